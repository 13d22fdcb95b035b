"""The cross-field checks of a case, and the defaults that depend on other
values (the method's preconditioner and deflation, the 3-D operator storage).

The geometry's own checks are in :mod:`.geometry_checks`, the time step's in
:mod:`.time_step`.
"""
from __future__ import annotations

import dataclasses
import math

from ..linalg import registry as _registry
from .bounds import LENGTH, MAGNITUDE, MAX_CELLS, MAX_CIRCLES, MAX_CONTRAST, max_csr_cells
from .errors import show_number, show_value
from .geometry_checks import check_geometry_2d, check_geometry_3d, has_gas
from .schema import DEFAULT_DEFLATION, DEFAULT_PRECONDITIONER
from .time_step import check_time

# What a case must say instead when it breaks a method's rule
# (:func:`bubbleflow.linalg.registry.method_violations`).
_RULE_EXPECTED = {
    ("preconditioner", "forbidden"): "method pcg or dpcg, or preconditioner none",
    ("preconditioner", "required"): "a preconditioner, or method cg",
    ("deflation", "forbidden"): "method dpcg, or deflation none",
    ("deflation", "required"): "a deflation type, or method pcg",
}


def check_case(case, ctx):
    """Cross-field checks and method-dependent defaults; returns the final case."""
    rep = dataclasses.replace
    g, s = case.grid, case.solver
    P = ("solver", "preconditioner", "type")
    D = ("solver", "deflation", "type")

    # A method the user did not write follows from what they did write: a
    # deflation (or its options) means dpcg, no preconditioner cg, else pcg.  (Studies
    # sweep solver.deflation.type over none, subdomains, ... this way.)
    M = ("solver", "method")
    if M not in ctx.explicit:
        method, _, _ = _registry.method_defaults(
            None, s.preconditioner.type if P in ctx.explicit else None,
            s.deflation.type if D in ctx.explicit else None,
            deflation_options=any(p[:2] == D[:2] for p in ctx.explicit))
        s = rep(s, method=method)
    # Method-dependent defaults: only keys the user did not write are filled.
    pc = s.preconditioner.type if P in ctx.explicit else DEFAULT_PRECONDITIONER[s.method]
    df = s.deflation.type if D in ctx.explicit else DEFAULT_DEFLATION[s.method]
    m = s.method
    for what, rule in _registry.method_violations(m, pc, df):
        path, value = (P, pc) if what == "preconditioner" else (D, df)
        ctx.fail(path, f"got {value!r} with method {m!r}", _RULE_EXPECTED[what, rule], value=value)
    s = rep(s, preconditioner=rep(s.preconditioner, type=pc), deflation=rep(s.deflation, type=df))

    _check_limits(case, df, ctx)
    if g.nz is not None:
        # 3-D stores the operator's face couplings unless the case asks for
        # the seven diagonals (three arrays against seven, the same apply).
        operator = case.operator
        if ("operator", "storage") not in ctx.explicit:
            operator = rep(operator, storage="matrix_free")
        return rep(case, solver=_check_3d(case, s, pc, df, ctx), operator=operator)
    _check_2d_only(case, ctx)
    check_geometry_2d(case, ctx)
    if case.mode == "flow":
        check_time(case, ctx)

    grid = f"a {g.nx} x {g.ny} grid"
    s = rep(s, deflation=_one_subdomain_form(s.deflation, ctx))
    if s.deflation.subdomains is not None:          # checked where written, used or not
        px, py = s.deflation.subdomains
        if s.deflation.cells_per_subdomain is not None:
            ctx.fail(("solver", "deflation", "subdomains"),
                     f"got [{px}, {py}] and cells_per_subdomain "
                     f"{s.deflation.cells_per_subdomain}",
                     "one of the two: subdomain counts, or their width in cells",
                     value=[px, py])
        if g.nx % px or g.ny % py:
            ctx.fail(("solver", "deflation", "subdomains"), f"got [{px}, {py}] for {grid}",
                     "divisors of nx and ny", value=[px, py])
    if df == "stripes" and g.ny % s.deflation.stripes:
        ctx.fail(("solver", "deflation", "stripes"), f"got {s.deflation.stripes} for {grid}",
                 f"a divisor of ny = {g.ny}", value=s.deflation.stripes)
    if pc == "block_ic":
        m_ = s.preconditioner.block_lines
        if g.ny % m_ or m_ >= g.ny:
            ctx.fail(("solver", "preconditioner", "block_lines"), f"got {m_} for {grid}",
                     f"a divisor of ny = {g.ny} smaller than ny (at least two blocks)", value=m_)
    return rep(case, solver=s)


def _check_2d_only(case, ctx):
    """A 2-D case: points of two coordinates, no 3-D wall names, no ``lz``."""
    geo = case.geometry
    for kind in ("bubbles", "droplets"):
        for i, c in enumerate(getattr(geo, kind)):
            if len(c.center) != 2:
                ctx.bad(("geometry", kind, i, "center"), list(c.center),
                        "two numbers [x, y] on a 2-D grid (grid.nz makes it 3-D)")
    d = case.solver.deflation
    if d.subdomains is not None and len(d.subdomains) != 2:
        ctx.bad(("solver", "deflation", "subdomains"), list(d.subdomains),
                "two integers [px, py] on a 2-D grid")
    for key in ("front", "back"):
        if getattr(case.boundaries, key) != "no_slip":      # (the default: a resolved case has it)
            ctx.fail(("boundaries", key), "a 3-D wall on a 2-D grid",
                     "no front or back wall in 2-D (grid.nz makes the grid 3-D)",
                     value=getattr(case.boundaries, key))
    if case.grid.lz is not None:
        ctx.bad(("grid", "lz"), case.grid.lz, "no lz without grid.nz (a 2-D grid)")
    lat = geo.bubble_lattice
    if lat is not None and (lat.layers is not None or lat.z_range is not None):
        ctx.fail(("geometry", "bubble_lattice", "layers" if lat.layers is not None else "z_range"),
                 "a 3-D lattice key on a 2-D grid", "columns, rows, x_range and y_range only "
                 "(grid.nz makes the grid 3-D)", value=lat.layers or lat.z_range)
    rb = geo.random_bubbles
    if rb is not None and rb.region is not None and len(rb.region) != 4:
        ctx.bad(("geometry", "random_bubbles", "region"), list(rb.region),
                "null or four numbers [x0, x1, y0, y1] on a 2-D grid")


def _check_3d(case, s, pc, df, ctx):
    """The checks of a 3-D case (``grid.nz`` given); returns the solver section."""
    g = case.grid
    check_geometry_3d(case, ctx)
    if case.mode == "flow":
        check_time(case, ctx)
    d = s.deflation
    m = s.preconditioner.block_lines
    if pc == "block_ic" and g.ny % m:
        ctx.fail(("solver", "preconditioner", "block_lines"), f"got {m} for ny = {g.ny}",
                 f"a divisor of ny = {g.ny} (3-D blocks: that many x-lines of a z-plane; "
                 "ny: whole planes)", value=m)
    if df == "stripes" and g.nz % d.stripes:
        ctx.fail(("solver", "deflation", "stripes"), f"got {d.stripes} for nz = {g.nz}",
                 f"a divisor of nz = {g.nz} (3-D stripes are layers along z)", value=d.stripes)
    s = dataclasses.replace(s, deflation=_one_subdomain_form(d, ctx))
    counts = s.deflation.subdomains
    if counts is not None:
        if len(counts) != 3 or any(n % p for n, p in zip(g.cells, counts)):
            ctx.fail(("solver", "deflation", "subdomains"),
                     f"got {list(counts)} for a {' x '.join(map(str, g.cells))} grid",
                     "three integers [px, py, pz] dividing nx, ny and nz", value=list(counts))
        if s.deflation.cells_per_subdomain is not None:
            ctx.fail(("solver", "deflation", "subdomains"),
                     f"got {list(counts)} and cells_per_subdomain "
                     f"{s.deflation.cells_per_subdomain}",
                     "one of the two: subdomain counts, or their width in cells",
                     value=list(counts))
    return s


def _one_subdomain_form(d, ctx):
    """An override of ``subdomains`` or ``cells_per_subdomain`` replaces the
    other form written in the file (``--set solver.deflation.subdomains=[4,4]``
    on a case with ``cells_per_subdomain``); both in one place stay an error."""
    if d.subdomains is None or d.cells_per_subdomain is None:
        return d
    S = ("solver", "deflation", "subdomains")
    C = ("solver", "deflation", "cells_per_subdomain")
    by_override = {p: ctx.where.locate(p)[1] is not None for p in (S, C)}
    if by_override[S] and not by_override[C]:
        return dataclasses.replace(d, cells_per_subdomain=None)
    if by_override[C] and not by_override[S]:
        return dataclasses.replace(d, subdomains=None)
    return d

def _check_limits(case, deflation, ctx):
    """Sizes and physical magnitudes the numerics can represent (see MAX_CELLS...);
    ``deflation``: the deflation's type, resolved."""
    g, fl, ph, geo = case.grid, case.fluids, case.physics, case.geometry
    cells = math.prod(g.cells)
    if cells > MAX_CELLS:
        ctx.fail(("grid",), f"got {' x '.join(map(str, g.cells))} = {cells:.3g} cells",
                 f"at most {MAX_CELLS} cells (the GPU kernels index a grid with 32-bit offsets)",
                 value=cells)
    if deflation != "none" and cells > max_csr_cells(len(g.cells)):
        ctx.fail(("grid",), f"got {' x '.join(map(str, g.cells))} = {cells:.3g} cells with "
                 f"solver.deflation.type {deflation}",
                 f"at most {max_csr_cells(len(g.cells))} cells with deflation (its CSR matrices "
                 f"have int32 indices), or solver.deflation.type none", value=cells)
    lo, hi = LENGTH
    for key in ("lx", "ly", "lz"):
        v = getattr(g, key)
        if v is not None and not lo <= v <= hi:
            ctx.bad(("grid", key), v, f"a length between {show_number(lo)} and {show_number(hi)} m")
    lo, hi = MAGNITUDE
    for fluid in ("liquid", "gas"):
        for key, unit in (("density", "kg/m^3"), ("viscosity", "Pa s")):
            v = getattr(getattr(fl, fluid), key)
            if not lo <= v <= hi:
                ctx.bad(("fluids", fluid, key), v, f"a {key} between {show_number(lo)} and "
                        f"{show_number(hi)} {unit} (beyond, float64 over- or underflows)")
    for key in ("gravity", "surface_tension"):
        v = getattr(ph, key)
        if v > hi:
            ctx.bad(("physics", key), v, f"a number between 0 and {show_number(hi)}")
    lat = geo.bubble_lattice
    n_circles = (len(geo.bubbles) + len(geo.droplets)
                 + (lat.columns * lat.rows * (lat.layers or 1 if g.nz is not None else 1)
                    if lat is not None else 0)
                 + (geo.random_bubbles.count if geo.random_bubbles is not None else 0))
    if n_circles > MAX_CIRCLES:
        ctx.fail(("geometry",), f"got {n_circles} bubbles and droplets",
                 f"at most {MAX_CIRCLES} (the level set is built circle by circle)",
                 value=n_circles)
    rho_l, rho_g = fl.liquid.density, fl.gas.density
    contrast = max(rho_l, rho_g) / min(rho_l, rho_g)
    # Only where both fluids are present: a liquid-only case has one density.
    if contrast > MAX_CONTRAST and has_gas(geo):
        # Blame the density further (in decades) from its default.
        off_l, off_g = abs(math.log10(rho_l / 1000.0)), abs(math.log10(rho_g / 1.0))
        fluid, v = ("gas", rho_g) if off_g >= off_l else ("liquid", rho_l)
        ctx.fail(("fluids", fluid, "density"),
                 f"got {show_value(v)}, a density contrast of {contrast:.3g} "
                 f"(liquid {show_number(rho_l)}, gas {show_number(rho_g)})",
                 f"a contrast of at most {show_number(MAX_CONTRAST)}: beyond it the float64 "
                 "pressure solve cannot converge", value=v)
