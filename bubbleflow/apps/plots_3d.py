"""Figures of a 3-D run: slices, a projection of the gas, and the 3-D
benchmark's quantities (``bubbleflow plot`` on a run with ``grid.nz``).

The fields figure shows, at the last snapshot, the pressure and the density
on the vertical mid-plane ``y = ly/2`` (with the interface), the density on
the horizontal plane that cuts the most bubble cells (:func:`slice_plane`:
not the whole gas's centroid, which above a free surface lies in the air),
and the gas projected along
y: the gas thickness along each line of sight, in cells, with the outline
of its shadow (what an isosurface rendering shows of the bubble's shape,
without one).  The benchmark figure plots rise velocity, sphericity, the
centroid height and the volume change against time, with the published
codes' extreme values (:mod:`.validation_3d`) on the 3-D rising-bubble case.
"""
from __future__ import annotations

import math

import numpy as np

from .validation import nested

__all__ = ["fields_figure", "benchmark_figure", "is_rising_bubble_3d", "interface_style",
           "slice_plane", "PANEL_PAD"]


#: Padding (inches) around each panel and colour bar of the fields figure.
PANEL_PAD = 0.1


def interface_style():
    """A white line with a black edge: visible on any colour map (the 2-D
    figures' too)."""
    from matplotlib import patheffects

    return dict(colors="white", linewidths=1.6,
                path_effects=[patheffects.Stroke(linewidth=3.0, foreground="black"),
                              patheffects.Normal()])


def slice_plane(phi):
    """``(k, why)``: the horizontal plane ``phi[k]`` that shows the bubbles.

    Bubbles are the connected gas regions (``phi < 0``, 6-connected) that do
    not reach the top layer of cells; those that do are the gas above a free
    surface, whose centroid would put the plane in the air and show none of
    the bubbles.  The plane is the one cutting the most bubble cells (ties:
    the one nearest the bubbles' centroid), so it holds gas even when the
    bubbles sit at different heights.  Without bubbles it goes through the
    centroid of the gas, and without gas through the middle.

    Parameters
    ----------
    phi : ndarray, shape (nz, ny, nx)
        Level set at the cell centres (negative in the gas).

    Returns
    -------
    k : int
        Index of the plane along z.
    why : str
        What the plane is, for the panel's title.
    """
    from ..compute.regions import label_regions
    from ..flow.gas_regions import layer_labels

    gas = np.asarray(phi) < 0.0
    nz = gas.shape[0]
    if not gas.any():
        return nz // 2, "mid-height: no gas"
    labels, n = label_regions(gas)
    layer = layer_labels(labels)
    bubbles = gas & ~np.isin(labels, layer)
    cells = bubbles.sum(axis=(1, 2))
    if not cells.any():
        k = int(round(float(np.average(np.arange(nz), weights=gas.sum(axis=(1, 2))))))
        return k, "through the gas centroid: no bubble"
    centre = float(np.average(np.arange(nz), weights=cells))
    widest = np.flatnonzero(cells == cells.max())
    k = int(widest[np.argmin(np.abs(widest - centre))])
    count = n - len(layer)
    why = f"most cells of {count} bubble{'s' if count != 1 else ''}"
    return k, why + ("; gas layer not counted" if len(layer) else "")


def _extent(a, b):
    ha = (a[-1] - a[0]) / (len(a) - 1) if len(a) > 1 else 1.0
    hb = (b[-1] - b[0]) / (len(b) - 1) if len(b) > 1 else 1.0
    return (a[0] - ha / 2, a[-1] + ha / 2, b[0] - hb / 2, b[-1] + hb / 2)


def _panel(fig, ax, data, coords, labels, cmap, norm, title, unit, phi=None):
    im = ax.imshow(data, origin="lower", extent=_extent(*coords), cmap=cmap, norm=norm,
                   interpolation="nearest", aspect="equal")
    if phi is not None and np.isfinite(phi).any() and np.nanmin(phi) < 0.0 < np.nanmax(phi):
        ax.contour(coords[0], coords[1], phi, levels=[0.0], **interface_style())
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title(title, fontsize=10)
    # Attached with ``ax=`` (not an inset axes): constrained layout then
    # reserves room for the bar and its label before the next panel.
    cb = fig.colorbar(im, ax=ax, fraction=0.08, pad=0.03, aspect=25)
    cb.set_label(unit)


def _density_norm(rho):
    from matplotlib.colors import LogNorm, Normalize

    pos = rho[np.isfinite(rho) & (rho > 0)]
    lo, hi = (float(pos.min()), float(pos.max())) if pos.size else (1.0, 2.0)
    if hi / lo > 10.0:
        return LogNorm(lo, hi)
    return Normalize(lo, hi if hi > lo else lo + 1.0)


def fields_figure(run, run_figure):
    """The 3-D fields figure (``run_figure`` makes the figure with its warning banner)."""
    from matplotlib.colors import Normalize

    f = run["fields"]
    x, y, z = run["x"], run["y"], run["z"]
    p, rho, phi = f["p"], f["rho"], f["phi"]
    j = len(y) // 2                                   # the vertical mid-plane y = ly / 2
    gas = phi < 0.0
    k, why = slice_plane(phi)
    aspect = (z[-1] - z[0] + 1e-300) / (x[-1] - x[0] + 1e-300)
    img_w = min(3.0, 6.0 / max(aspect, 1e-3))
    fig, body = run_figure(run, 4 * (img_w + 1.9), img_w * max(aspect, 1.0) + 1.6)
    # A clear margin between one panel's colour-bar label and the next
    # panel's axis label (the default pad leaves them touching).
    fig.get_layout_engine().set(w_pad=PANEL_PAD)
    axes = body.subplots(1, 4)
    finite = p[np.isfinite(p)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    xz = (x, z)
    _panel(body, axes[0], p[:, j, :], xz, ("x (m)", "z (m)"), "viridis",
           Normalize(lo, hi if hi > lo else lo + 1.0), f"pressure, plane y = {y[j]:.3g} m",
           "p (Pa)", phi[:, j, :])
    _panel(body, axes[1], rho[:, j, :], xz, ("x (m)", "z (m)"), "Blues", _density_norm(rho),
           f"density, plane y = {y[j]:.3g} m", "$\\rho$ (kg/m$^3$)", phi[:, j, :])
    _panel(body, axes[2], rho[k], (x, y), ("x (m)", "y (m)"), "Blues", _density_norm(rho),
           f"density, plane z = {z[k]:.3g} m\n({why})", "$\\rho$ (kg/m$^3$)",
           phi[k])
    thickness = gas.sum(axis=1).astype(np.float64)    # cells of gas along each line of sight
    _panel(body, axes[3], thickness, xz, ("x (m)", "z (m)"), "magma",
           Normalize(0.0, max(float(thickness.max()), 1.0)), "gas seen along y\n(thickness)",
           "gas cells along y", np.where(thickness > 0, -1.0, 1.0) if gas.any() else None)
    when = f"t = {f['time']:.4g} s" if f.get("time") is not None else "the result"
    if f.get("step") is not None:
        when += f" (step {f['step']})"
    body.suptitle(f"{run['name']} ({run['mode']}): {when}; {len(x)} x {len(y)} x {len(z)} cells",
                  fontsize=11)
    return fig


def is_rising_bubble_3d(case):
    """Whether a resolved case is the 3-D benchmark's test case 1 (its
    geometry, fluids and forces; resolution and solver free)."""
    def close(a, b):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-6)
        except (TypeError, ValueError):
            return False

    bubbles = nested(case, "geometry.bubbles") or []
    wanted = {"grid.lx": 1.0, "grid.ly": 1.0, "grid.lz": 2.0, "fluids.liquid.density": 1000.0,
              "fluids.gas.density": 100.0, "fluids.liquid.viscosity": 10.0,
              "fluids.gas.viscosity": 1.0, "physics.gravity": 0.98,
              "physics.surface_tension": 24.5}
    return (all(close(nested(case, k), v) for k, v in wanted.items()) and len(bubbles) == 1
            and close(bubbles[0].get("radius"), 0.25)
            and all(close(c, v) for c, v in zip(bubbles[0].get("center", ()), (0.5, 0.5, 0.5))))


def benchmark_figure(run, run_figure):
    """Rise velocity, sphericity, centroid height and volume change against
    time: one bubble's, or the whole gas phase's, named so, where the gas is
    several regions or lies under a free surface (as in 2-D,
    :func:`.plots_flow.benchmark_figure`)."""
    from .plots_figure import mark_gas_volume
    from .plots_flow import gas_phase, whole_gas_title
    from .validation_3d import load_reference

    d = run["diagnostics"]
    t = d["time"]
    gas = gas_phase(run)
    benchmark = is_rising_bubble_3d(run.get("case") or {}) and gas["single"]
    fig, body = run_figure(run, 17.0, 4.4 if gas["single"] else 5.0)
    axes = body.subplots(1, 4)
    volume = d.get("volume")
    change = volume / volume[0] - 1.0 if volume is not None and volume[0] > 0 else None
    if gas["single"]:
        labels = ("rise velocity (m/s)", "sphericity", "centroid height z (m)")
    else:
        labels = ("mean rise velocity of the gas (m/s)",
                  "$(36 \\pi V^2)^{1/3}$ / total interface area (-)",
                  "centroid height z of the gas (m)")
        for ax, name in zip(axes, ("mean rise velocity of all gas",
                                   "sphericity of all gas together\n(not the shape of any bubble)",
                                   "centroid height of all gas", "volume change of all gas")):
            ax.set_title(name, fontsize=10)
    panels = ((d.get("rise_velocity"), labels[0], "max_rise_velocity", "t_max_rise_velocity"),
              (d.get("sphericity"), labels[1], "min_sphericity", "t_min_sphericity"),
              (d.get("centroid_z"), labels[2], "centroid_end", "t_centroid_end"),
              (change, "relative volume change", None, None))
    ref = load_reference() if benchmark else {}
    cells = f"{len(run['x'])} x {len(run['y'])} x {len(run['z'])}"
    for ax, (values, label, value_key, time_key) in zip(axes, panels):
        if values is not None:
            ax.plot(t, values, "-", lw=1.8, color="C0", label=f"bubbleflow ({cells})")
        if value_key:
            for (code, row), marker in zip(ref.items(), "os^"):
                ax.plot(row[time_key], row[value_key], marker, mfc="none", color="k", label=code)
        ax.set_xlabel("time t (s)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.35)
    axes[0].legend(fontsize=8)
    if gas["single"]:
        title = f"{run['name']}: benchmark quantities of the bubble"
        if benchmark:
            title += (" vs the codes of Adelsberger et al. (2014), test case 1 (markers: their"
                      " extremes)")
    else:
        title = whole_gas_title(run["name"], gas,
                                "sphericity: total gas volume against total interface area")
    body.suptitle(title, fontsize=11)
    mark_gas_volume(body, run)
    return fig
