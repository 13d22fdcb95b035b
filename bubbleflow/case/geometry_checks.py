"""Where a case's bubbles and droplets lie: the lattice centres, and the
checks that they fit the domain, stay apart from each other and from the
walls, and sit on the right side of the free surface (2-D and 3-D).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from .bounds import MAX_RANDOM_FILL
from .errors import show_number, show_value

# Circles may touch the wall; this relative slack keeps e.g. 0.7 + 0.3 <= 1.0
# from failing on rounding.
_WALL_SLACK = 1e-12


def lattice_centres(lattice):
    """Centres of a bubble lattice, bottom row first, left to right (in 3-D
    bottom layer first, then row by row).

    ``x = linspace(x0, x1, columns)`` (the midpoint when ``columns == 1``),
    likewise ``y`` over ``y_range`` and ``rows`` and, with ``layers``, ``z``
    over ``z_range``.

    Parameters
    ----------
    lattice : LatticeConfig or mapping
        With ``columns``, ``rows``, ``x_range`` and ``y_range`` (and
        ``layers``, ``z_range`` in 3-D).

    Returns
    -------
    list of (float, float) or (float, float, float)
    """
    import numpy as np

    get = lattice.get if isinstance(lattice, Mapping) else lambda k: getattr(lattice, k, None)

    def spread(rng, n):
        lo, hi = (float(v) for v in rng)
        n = int(n)
        return [0.5 * (lo + hi)] if n == 1 else [float(v) for v in np.linspace(lo, hi, n)]

    xs = spread(get("x_range"), get("columns"))
    ys = spread(get("y_range"), get("rows"))
    if get("layers") is None:
        return [(x, y) for y in ys for x in xs]
    zs = spread(get("z_range"), get("layers"))
    return [(x, y, z) for z in zs for y in ys for x in xs]


def has_gas(geo):
    """Whether the geometry puts any gas in the domain (else liquid only)."""
    return bool(geo.free_surface is not None or geo.bubbles or geo.droplets
                or geo.bubble_lattice is not None or geo.random_bubbles is not None)


def check_geometry_2d(case, ctx):
    """A 2-D case's free surface, and its circles, lattice and random bubbles
    inside the domain (clear of the walls by a cell in a flow) and apart."""
    g, geo = case.grid, case.geometry
    lx, ly = g.lx, g.ly
    domain = f"[0, {show_number(lx)}] x [0, {show_number(ly)}]"
    slack = _WALL_SLACK * max(lx, ly)

    if geo.free_surface is not None and not 0 < geo.free_surface <= ly:
        ctx.bad(("geometry", "free_surface"), geo.free_surface,
                f"a height with 0 < h <= ly = {show_number(ly)}, or null (liquid everywhere)")

    # In a flow the interface must not touch a wall (the wall conditions and
    # the level set would fight); keep at least one cell of liquid between.
    gap = max(lx / g.nx, ly / g.ny) if case.mode == "flow" else -slack

    def inside(path, x, y, r, what=""):
        if x - r < gap or x + r > lx - gap or y - r < gap or y + r > ly - gap:
            clear = " clear of the walls by at least one cell" if case.mode == "flow" else ""
            ctx.fail(path, f"got{what} centre ({show_number(x)}, {show_number(y)}) "
                     f"with radius {show_number(r)}",
                     f"a circle inside the domain {domain}{clear}")

    for kind in ("bubbles", "droplets"):
        for i, c in enumerate(getattr(geo, kind)):
            inside(("geometry", kind, i), c.center[0], c.center[1], c.radius)

    lat = geo.bubble_lattice
    if lat is not None:
        for axis in ("x", "y"):
            lo, hi = getattr(lat, f"{axis}_range")
            if lo > hi:
                ctx.bad(("geometry", "bubble_lattice", f"{axis}_range"), [lo, hi],
                        f"two numbers [{axis}0, {axis}1] with {axis}0 <= {axis}1")
        for k, (x, y) in enumerate(lattice_centres(lat)):
            row, col = divmod(k, lat.columns)
            inside(("geometry", "bubble_lattice"), x, y, lat.radius,
                   f" (column {col + 1}, row {row + 1})")

    rb = geo.random_bubbles
    if rb is not None:
        if rb.region is None:
            if 2 * rb.radius > min(lx, ly):
                ctx.bad(("geometry", "random_bubbles", "radius"), rb.radius,
                        f"a radius that fits the domain {domain}")
        else:
            x0, x1, y0, y1 = rb.region
            path = ("geometry", "random_bubbles", "region")
            if not (x0 < x1 and y0 < y1):
                ctx.bad(path, list(rb.region), "[x0, x1, y0, y1] with x0 < x1 and y0 < y1")
            if x0 < -slack or x1 > lx + slack or y0 < -slack or y1 > ly + slack:
                ctx.bad(path, list(rb.region), f"a region inside the domain {domain}")
            if x1 - x0 < 2 * rb.radius or y1 - y0 < 2 * rb.radius:
                ctx.bad(path, list(rb.region),
                        f"a region at least 2 * radius = {show_number(2 * rb.radius)} "
                        "wide and tall")

    _check_overlaps(case, ctx, gap)


def check_geometry_3d(case, ctx):
    """A 3-D case's free surface, and its spheres, lattice and random bubbles
    inside the box (clear of the walls by a cell in a flow) and apart."""
    g, geo = case.grid, case.geometry
    lengths = g.lengths
    if geo.free_surface is not None and not 0 < geo.free_surface <= lengths[2]:
        ctx.bad(("geometry", "free_surface"), geo.free_surface,
                f"a height with 0 < h <= lz = {show_number(lengths[2])}, "
                "or null (liquid everywhere)")
    gap = max(lengths[a] / g.cells[a] for a in range(3)) if case.mode == "flow" else 0.0
    _check_spheres(case, ctx, gap)
    _check_lattice_3d(case, ctx, gap)
    _check_random_3d(case, ctx, gap)


def _inside_box(centre, r, lengths, gap):
    return all(gap <= x - r and x + r <= v - gap for x, v in zip(centre, lengths))


def _check_spheres(case, ctx, gap):
    """3-D ``bubbles`` and ``droplets``: three coordinates, inside the box,
    apart from each other, bubbles under the free surface, droplets in gas."""
    geo, lengths = case.geometry, case.grid.lengths
    fs = geo.free_surface
    domain = " x ".join(f"[0, {show_number(v)}]" for v in lengths)
    clear = " clear of the walls by at least one cell" if case.mode == "flow" else ""
    spheres = []
    for kind in ("bubbles", "droplets"):
        for i, c in enumerate(getattr(geo, kind)):
            path = ("geometry", kind, i)
            if len(c.center) != 3:
                ctx.bad(path + ("center",), list(c.center), "three numbers [x, y, z] on a 3-D grid")
            if not _inside_box(c.center, c.radius, lengths, gap):
                ctx.fail(path, f"got centre {list(c.center)} with radius {show_number(c.radius)}",
                         f"a sphere inside the domain {domain}{clear}")
            if kind == "bubbles" and fs is not None and c.center[2] + c.radius > fs - gap:
                ctx.fail(path, f"got centre {list(c.center)} with radius {show_number(c.radius)}, "
                         f"reaching the free surface at z = {show_number(fs)}",
                         f"a bubble below the free surface (z + radius <= {show_number(fs - gap)})")
            spheres.append((path, kind, c))
    for i, (path, kind, a) in enumerate(spheres):
        for _, other, b in spheres[:i]:
            if kind == other and math.dist(a.center, b.center) < a.radius + b.radius + gap:
                ctx.fail(path, f"got centre {list(a.center)} with radius {show_number(a.radius)}, "
                         f"overlapping the sphere at {list(b.center)}",
                         "spheres apart from each other" + (" by at least one cell" if gap else ""))
    for path, kind, d in spheres:
        in_layer = fs is not None and d.center[2] - d.radius >= fs + gap
        in_bubble = any(math.dist(d.center, b.center) <= b.radius - d.radius - gap
                        for _, k, b in spheres if k == "bubbles")
        if kind == "droplets" and not (in_layer or in_bubble):
            ctx.fail(path, f"got centre {list(d.center)} with radius "
                     f"{show_number(d.radius)}, not in gas",
                     "a droplet in the gas above the free surface or inside a bubble")


def _check_lattice_3d(case, ctx, gap):
    """A 3-D ``bubble_lattice``: layers and z_range given, spheres inside the
    box, apart, under the free surface and apart from the explicit bubbles."""
    lat, geo, lengths = case.geometry.bubble_lattice, case.geometry, case.grid.lengths
    if lat is None:
        return
    path = ("geometry", "bubble_lattice")
    for key in ("layers", "z_range"):
        if getattr(lat, key) is None:
            ctx.fail(path + (key,), "missing on a 3-D grid",
                     "layers (spheres along z) and z_range [z0, z1] in 3-D")
    counts = (lat.columns, lat.rows, lat.layers)
    for axis, rng, n in zip("xyz", (lat.x_range, lat.y_range, lat.z_range), counts):
        if rng[0] > rng[1]:
            ctx.bad(path + (f"{axis}_range",), list(rng),
                    f"two numbers [{axis}0, {axis}1] with {axis}0 <= {axis}1")
        if n > 1 and (rng[1] - rng[0]) / (n - 1) < 2 * lat.radius + gap:
            ctx.fail(path + (f"{axis}_range",), f"got {list(rng)} for {n} spheres of radius "
                     f"{show_number(lat.radius)}", "spheres apart from each other"
                     + (" by at least one cell" if gap else ""), value=list(rng))
    corners = [(lat.x_range[i], lat.y_range[j], lat.z_range[k])
               for i in (0, 1) for j in (0, 1) for k in (0, 1)]
    if not all(_inside_box(c, lat.radius, lengths, gap) for c in corners):
        ctx.fail(path, f"got spheres of radius {show_number(lat.radius)} over "
                 f"x {list(lat.x_range)}, y {list(lat.y_range)}, z {list(lat.z_range)}",
                 "spheres inside the domain" + (" clear of the walls by at least one cell"
                                                if gap else ""))
    fs = geo.free_surface
    if fs is not None and max(lat.z_range) + lat.radius > fs - gap:
        ctx.fail(path + ("z_range",),
                 f"got a top layer at z = {show_number(max(lat.z_range))} with radius "
                 f"{show_number(lat.radius)}, reaching the free surface at {show_number(fs)}",
                 f"spheres below the free surface (z1 + radius <= {show_number(fs - gap)})",
                 value=list(lat.z_range))
    centres = lattice_centres(lat)
    for i, b in enumerate(geo.bubbles):
        if any(math.dist(b.center, c) < b.radius + lat.radius + gap for c in centres):
            ctx.fail(("geometry", "bubbles", i), f"got centre {list(b.center)}, overlapping the "
                     "bubble lattice", "bubbles apart from the lattice's")


def _check_random_3d(case, ctx, gap):
    """3-D ``random_bubbles``: a region of six numbers inside the box and
    under the free surface, filled at most to :data:`~.bounds.MAX_RANDOM_FILL`."""
    rb, lengths = case.geometry.random_bubbles, case.grid.lengths
    if rb is None:
        return
    path = ("geometry", "random_bubbles", "region")
    if rb.region is not None and len(rb.region) != 6:
        ctx.bad(path, list(rb.region), "null or six numbers [x0, x1, y0, y1, z0, z1] in 3-D")
    region = rb.region or (0.0, lengths[0], 0.0, lengths[1], 0.0, lengths[2])
    spans = [(region[2 * a], region[2 * a + 1]) for a in range(3)]
    if any(hi - lo < 2 * rb.radius for lo, hi in spans) or any(
            lo < -1e-12 or hi > v + 1e-12 for (lo, hi), v in zip(spans, lengths)):
        ctx.bad(path, list(region), f"a region inside the domain, at least 2 * radius = "
                f"{show_number(2 * rb.radius)} across along every axis")
    fs = case.geometry.free_surface
    if fs is not None and spans[2][1] > fs - gap:
        ctx.fail(path, f"got {show_value(list(region))}, reaching z = "
                 f"{show_number(spans[2][1])} above the free surface at {show_number(fs)}",
                 f"a region with z1 <= {show_number(fs - gap)}", value=rb.region)
    volume = math.prod(hi - lo for lo, hi in spans)
    need = rb.count * 4.0 / 3.0 * math.pi * (rb.radius + 0.5 * rb.min_gap) ** 3
    if need > MAX_RANDOM_FILL * volume:
        ctx.fail(("geometry", "random_bubbles", "count"),
                 f"got {rb.count} spheres of radius {show_number(rb.radius)} filling "
                 f"{need / volume:.0%} of their region",
                 f"at most {MAX_RANDOM_FILL:.0%} of it (random placement jams beyond)",
                 value=rb.count)


def _circle_text(x, y, r):
    return f"centre ({show_number(x)}, {show_number(y)}) with radius {show_number(r)}"


def _check_apart(ctx, circles, key, gap, apart):
    """``geometry.<key>`` (bubbles or droplets): no two of them overlap."""
    pair = _first_overlap([c.center[0] for c in circles], [c.center[1] for c in circles],
                          [c.radius for c in circles], gap)
    if pair is not None:
        i, j = pair
        a, b = circles[i], circles[j]
        ctx.fail(("geometry", key, j),
                 f"got {_circle_text(*b.center, b.radius)}, overlapping geometry.{key}"
                 f"[{i}] ({_circle_text(*a.center, a.radius)})",
                 f"{key} apart from each other{apart}")


def _first_overlap(xs, ys, rs, gap):
    """``(i, j)``, ``i < j``, of the overlapping pair with the smallest ``j``, or None.

    Two circles overlap when their centres are closer than ``r_i + r_j +
    gap``.  Sweeps along x: each circle is compared with those whose x is
    within reach, in NumPy.
    """
    import numpy as np

    xs, ys, rs = (np.asarray(a, dtype=float) for a in (xs, ys, rs))
    n = xs.size
    if n < 2:
        return None
    order = np.argsort(xs, kind="stable")
    sx, sy, sr = xs[order], ys[order], rs[order]
    reach = sr + sr.max() + gap
    hi = np.searchsorted(sx, sx + reach, side="right")
    best = None
    for a in range(n):
        b = np.arange(a + 1, hi[a])
        if b.size == 0:
            continue
        d = np.hypot(sx[b] - sx[a], sy[b] - sy[a])
        for k in b[d < sr[a] + sr[b] + gap]:
            i, j = sorted((int(order[a]), int(order[k])))
            if best is None or (j, i) < (best[1], best[0]):
                best = (i, j)
    return best


def _check_overlaps(case, ctx, gap):
    """Bubbles apart from each other and below the free surface; droplets in gas.

    ``gap`` is the clearance the walls need too (one cell in a flow, a
    rounding slack otherwise): two interfaces closer than that merge at once.
    """
    import numpy as np

    geo = case.geometry
    fs = geo.free_surface
    flow = case.mode == "flow"
    apart = " by at least one cell" if flow else ""

    # Explicit bubbles among themselves.
    B = geo.bubbles
    _check_apart(ctx, B, "bubbles", gap, apart)

    lat = geo.bubble_lattice
    if lat is not None:
        (x0, x1), (y0, y1), r = lat.x_range, lat.y_range, lat.radius
        for axis, n, lo, hi in (("x", lat.columns, x0, x1), ("y", lat.rows, y0, y1)):
            if n > 1 and (hi - lo) / (n - 1) < 2 * r + gap:
                ctx.fail(("geometry", "bubble_lattice"),
                         f"got {n} {'columns' if axis == 'x' else 'rows'} of radius "
                         f"{show_number(r)}, {show_number((hi - lo) / (n - 1))} apart in {axis} "
                         "(overlapping)",
                         f"a spacing ({axis}1 - {axis}0) / (n - 1) >= 2 * radius"
                         f"{' + one cell' if flow else ''}")
        # The lattice bubble nearest to an explicit one is the nearest node
        # of the rectangular lattice: round each coordinate and clip.
        for i, b in enumerate(B):
            idx = []
            for c, lo, hi, n in ((b.center[0], x0, x1, lat.columns),
                                 (b.center[1], y0, y1, lat.rows)):
                step = (hi - lo) / (n - 1) if n > 1 else 0.0
                k = int(np.clip(np.rint((c - lo) / step), 0, n - 1)) if step > 0 else 0
                idx.append((k, lo + k * step if n > 1 else 0.5 * (lo + hi)))
            (col, cx), (row, cy) = idx
            if math.hypot(b.center[0] - cx, b.center[1] - cy) < b.radius + r + gap:
                ctx.fail(("geometry", "bubbles", i),
                         f"got {_circle_text(*b.center, b.radius)}, overlapping the "
                         f"bubble_lattice bubble at ({show_number(cx)}, {show_number(cy)}) "
                         f"(column {col + 1}, row {row + 1})",
                         f"bubbles apart from each other{apart}")

    if fs is not None:
        below = f"a bubble in the liquid, below the free surface at {show_number(fs)}{apart}"
        for i, b in enumerate(B):
            y, r = b.center[1], b.radius
            if y + r > fs - gap:
                where = ("lying in the gas above" if y - r >= fs else "crossing")
                ctx.fail(("geometry", "bubbles", i),
                         f"got {_circle_text(*b.center, r)}, {where} the free surface at "
                         f"{show_number(fs)}",
                         below + f" (y + radius <= {show_number(fs - max(gap, 0))})")
        if lat is not None and max(lat.y_range) + lat.radius > fs - gap:
            y, r = max(lat.y_range), lat.radius
            where = ("lying in the gas above" if y - r >= fs else "crossing")
            ctx.fail(("geometry", "bubble_lattice"),
                     f"got a top row at y = {show_number(y)} with radius {show_number(r)}, "
                     f"{where} the free surface at {show_number(fs)}",
                     "bubbles below the free surface "
                     f"(y1 + radius <= {show_number(fs - max(gap, 0))})")
        rb = geo.random_bubbles
        top = rb.region[3] if rb is not None and rb.region is not None else None
        if rb is not None and (top is None or top > fs - max(gap, 0)):
            ctx.fail(("geometry", "random_bubbles", "region"),
                     f"got {show_value(list(rb.region)) if rb.region else 'null'} "
                     "(bubbles anywhere up to y = "
                     f"{show_number(top if top is not None else case.grid.ly)}), "
                     f"above the free surface at {show_number(fs)}",
                     f"a region [x0, x1, y0, y1] with y1 <= {show_number(fs - max(gap, 0))}",
                     value=rb.region)

    rb = geo.random_bubbles
    if rb is not None:
        x0, x1, y0, y1 = rb.region or (0.0, case.grid.lx, 0.0, case.grid.ly)
        need = rb.count * math.pi * (rb.radius + 0.5 * rb.min_gap) ** 2
        if need > MAX_RANDOM_FILL * (x1 - x0) * (y1 - y0):
            ctx.fail(("geometry", "random_bubbles", "count"),
                     f"got {rb.count} bubbles of radius {show_number(rb.radius)} covering "
                     f"{need / ((x1 - x0) * (y1 - y0)):.0%} of their region",
                     f"at most {MAX_RANDOM_FILL:.0%} of it (random placement jams beyond)",
                     value=rb.count)

    # Droplets: liquid added to gas, so each must lie in gas, whole.
    D = geo.droplets
    _check_apart(ctx, D, "droplets", gap, apart)
    for i, d in enumerate(D):
        (x, y), r = d.center, d.radius
        if fs is not None and y - r >= fs + gap:
            continue                                   # in the gas layer
        # Else it must lie inside one explicit bubble (a droplet in a bubble).
        host = next((k for k, b in enumerate(B)
                     if math.hypot(x - b.center[0], y - b.center[1]) + r <= b.radius - gap), None)
        if host is not None:
            continue
        if fs is not None and y + r > fs and y - r < fs + gap:
            where = f"crossing the free surface at {show_number(fs)}"
        elif fs is not None:
            where = (f"lying in the liquid below the free surface at {show_number(fs)} "
                     "(it adds nothing)")
        else:
            where = "lying in the liquid (no free surface: liquid everywhere; it adds nothing)"
        above = f" (y - radius >= {show_number(fs + max(gap, 0))})" if fs is not None else ""
        ctx.fail(("geometry", "droplets", i), f"got {_circle_text(x, y, r)}, {where}",
                 f"a droplet in the gas: above the free surface{above} or inside a bubble{apart}")
