"""The figures of a flow run over time: benchmark quantities and pressure
iterations per step (``<stem>_benchmark.png``, ``<stem>_iterations.png``).
The benchmark figure says in red when the gas volume drifted
(:func:`.plots_figure.mark_gas_volume`).

A quantity the run does not have (the rise velocity of a flow without gas,
the solve times of a run killed before its first solve) leaves its panel
empty with a note (:func:`.plots_figure.no_data_note`), never an error.
"""
from __future__ import annotations

import numpy as np

from .plots_figure import (BANNER_COLOUR, grid_text, mark_gas_volume, no_data_note, run_figure,
                           solver_text, spans_decades)
from .bubble_sampling import gas_regions_text
from .validation import nested as _nested

__all__ = ["gas_components", "gas_phase", "hysing_case", "is_hysing_case1", "whole_gas_title",
           "benchmark_figure",
           "iterations_figure", "missing_quantities", "BENCHMARK_QUANTITIES"]


def gas_components(phi):
    """``(bubbles, layers)``: connected regions of gas (``phi < 0``) in ``phi``.

    Regions are 4-connected sets of cells; one that reaches the top row of
    cells is a gas layer (the gas above a free surface,
    :func:`~bubbleflow.flow.gas_regions.layer_labels`), any other a bubble.
    """
    from ..compute.regions import label_regions
    from ..flow.gas_regions import layer_labels

    gas = np.asarray(phi) < 0.0
    if not gas.any():
        return 0, 0
    labels, n = label_regions(gas)
    layers = len(layer_labels(labels))
    return n - layers, layers


def _close(a, b, rel=1e-6):
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


#: The fluids of Hysing et al.'s test cases: case -> {key: value}.  Keys
#: with None in :func:`hysing_case` must be as given where the case states
#: them; the others always.
_HYSING_FLUIDS = {
    1: {"fluids.liquid.density": 1000.0, "fluids.gas.density": 100.0,
        "physics.surface_tension": 24.5},
    2: {"fluids.liquid.density": 1000.0, "fluids.gas.density": 1.0,
        "physics.surface_tension": 1.96},
}
_HYSING_STATED = {
    1: {"physics.gravity": 0.98, "fluids.liquid.viscosity": 10.0, "fluids.gas.viscosity": 1.0},
    2: {"physics.gravity": 0.98, "fluids.liquid.viscosity": 10.0, "fluids.gas.viscosity": 0.1},
}


def hysing_case(case):
    """Which of Hysing et al.'s test cases ``case`` (the resolved case, a
    dict) is: 1, 2 or None.

    Both: domain 1 x 2 m, a single bubble of radius 0.25 at (0.5, 0.5), no
    other interface (no free surface, droplets, lattice or random bubbles),
    liquid density 1000; test case 1: gas density 100, surface tension 24.5
    (and, where the case states them, gravity 0.98 and viscosities 10 / 1);
    test case 2: gas density 1, surface tension 1.96 (gravity 0.98 and
    viscosities 10 / 0.1).  The grid is free.

    >>> hysing_case({"grid": {"lx": 1, "ly": 2},
    ...     "fluids": {"liquid": {"density": 1000}, "gas": {"density": 1}},
    ...     "physics": {"surface_tension": 1.96},
    ...     "geometry": {"bubbles": [{"center": [0.5, 0.5], "radius": 0.25}]}})
    2
    """
    if not isinstance(case, dict):
        return None
    g = lambda key: _nested(case, key)  # noqa: E731
    if not (_close(g("grid.lx"), 1.0) and _close(g("grid.ly"), 2.0)):
        return None
    bubbles = g("geometry.bubbles") or []
    if not isinstance(bubbles, list) or len(bubbles) != 1 or not isinstance(bubbles[0], dict):
        return None
    centre, radius = bubbles[0].get("center"), bubbles[0].get("radius")
    if not (isinstance(centre, (list, tuple)) and len(centre) == 2 and _close(centre[0], 0.5)
            and _close(centre[1], 0.5) and _close(radius, 0.25)):
        return None
    for key in ("geometry.droplets", "geometry.bubble_lattice", "geometry.random_bubbles",
                "geometry.free_surface"):
        if g(key):
            return None
    for number, fluids in _HYSING_FLUIDS.items():
        if all(_close(g(key), value) for key, value in fluids.items()) and all(
                g(key) is None or _close(g(key), value)
                for key, value in _HYSING_STATED[number].items()):
            return number
    return None


def is_hysing_case1(case):
    """True if ``case`` (the resolved case, a dict) is Hysing et al.'s test
    case 1 (:func:`hysing_case`).

    >>> is_hysing_case1({"grid": {"lx": 1, "ly": 2},
    ...     "fluids": {"liquid": {"density": 1000}, "gas": {"density": 100}},
    ...     "physics": {"surface_tension": 24.5},
    ...     "geometry": {"bubbles": [{"center": [0.5, 0.5], "radius": 0.25}]}})
    True
    """
    return hysing_case(case) == 1


def benchmark_figure(run):
    """Rise velocity, circularity and centroid height against time: one
    bubble's, or the whole gas phase's, named so; on Hysing et al.'s curves
    for test case 1 (one bubble) and test case 2 (also where its skirt has
    broken up: the groups' curves agree up to the break-up, and the
    validation compares the whole gas's figures with them)."""
    from .validation import benchmark, load_reference

    d = run["diagnostics"]
    t = d["time"]
    gas = gas_phase(run)
    number = hysing_case(run["case"])
    hysing = number if (number == 1 and gas["single"]) or (number == 2 and not gas["layer"]) \
        else None
    fig, body = run_figure(run, 14.0, 4.6 if gas["single"] else 5.2)
    axes = body.subplots(1, 3)
    if gas["single"]:
        panels = (("rise_velocity", "rise velocity (m/s)", "rise velocity of the bubble"),
                  ("circularity", "circularity (-)", "circularity"),
                  ("centroid_y", "centroid y (m)", "height of the centroid"))
    else:
        panels = (("rise_velocity", "mean rise velocity of the gas (m/s)",
                   "mean rise velocity of all gas"),
                  ("circularity", "2 sqrt($\\pi$ total area) / total interface length (-)",
                   "circularity of all gas together\n(not the shape of any bubble)"),
                  ("centroid_y", "centroid y of the gas (m)", "centroid height of all gas"))
    refs = []
    if hysing:
        styles = {"tp2d": "k", "freelife": "C3", "moonmd": "C2"}
        for key, (_, label) in benchmark(hysing).groups.items():
            try:
                refs.append((label, styles.get(key, "0.4"), load_reference(key, case=hysing)))
            except (OSError, ValueError, KeyError):  # pragma: no cover - packaging
                continue
    nx, ny = len(run["x"]), len(run["y"])
    ours = f"bubbleflow ({nx} x {ny})"
    t_end = float(np.nanmax(t)) if t.size else 0.0
    missing = missing_quantities(run)
    for ax, (key, ylabel, title) in zip(axes, panels):
        for label, colour, ref in refs:
            ax.plot(ref["time"], ref[key], ls="--", lw=1.2, color=colour, label=label)
        values = None if key in missing else d.get(key)
        if values is not None:
            ax.plot(t, values, "-", color="C0", lw=1.8, label=ours,
                    marker="o" if t.size <= 30 else None, ms=3)
        else:
            no_data_note(ax, _missing_text(run, key))
        ax.set_xlabel("time t (s)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.35)
        if t_end > 0:
            ax.set_xlim(float(np.nanmin(t)), t_end)
            # Keep the y range to what is on screen, references included.
            on = [np.asarray(values)[np.isfinite(values)]] if values is not None else []
            for _, _, ref in refs:
                m = (ref["time"] >= np.nanmin(t)) & (ref["time"] <= t_end)
                on.append(ref[key][m])
            on = [a for a in on if a.size]
            on = np.concatenate(on) if on else np.zeros(0)
            if on.size:
                lo, hi = float(on.min()), float(on.max())
                pad = 0.06 * (hi - lo) if hi > lo else max(abs(hi) * 0.02, 1e-3)
                ax.set_ylim(lo - pad, hi + pad)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=8, loc="best")
    versus = f" vs Hysing et al. (2009), test case {hysing} (dashed)" if hysing else ""
    if gas["single"]:
        title = f"{run['name']}: benchmark quantities of the bubble{versus}"
    elif len(missing) == len(panels):
        title = (f"{run['name']}: no benchmark quantity to draw ({gas['text']})\n"
                 "rise velocity, circularity and centroid are those of the gas")
    else:
        title = (whole_gas_title(run["name"], gas, "circularity: total gas area against total "
                                 "interface length") + "\n"
                 + (f"{versus[1:]}: the groups agree up to the skirt's break-up" if hysing else
                    "no reference curves: Hysing et al. (2009) is one bubble"))
    body.suptitle(title, fontsize=11)
    mark_gas_volume(body, run)
    return fig


def whole_gas_title(name, gas, shape_words):
    """The two title lines of a benchmark figure of the whole gas phase
    (``gas``: :func:`gas_phase`; ``shape_words``: how its shape factor is
    taken), in 2-D and 3-D alike."""
    return (f"{name}: WHOLE GAS PHASE ({gas['text']}), NOT ONE BUBBLE\n"
            f"means over all the gas; {shape_words}"
            + (" (free surface included)" if gas["layer"] else ""))


#: The diagnostics the benchmark figure of a 2-D flow draws.
BENCHMARK_QUANTITIES = ("rise_velocity", "circularity", "centroid_y")


def missing_quantities(run):
    """The benchmark quantities a flow run's diagnostics have no finite value
    of (all of them for a flow without gas: a gas centroid, rise velocity
    and shape are undefined), in :data:`BENCHMARK_QUANTITIES` order."""
    d = run.get("diagnostics") or {}
    missing = []
    for key in BENCHMARK_QUANTITIES:
        values = d.get(key)
        if values is None or not np.isfinite(np.asarray(values, dtype=np.float64)).any():
            missing.append(key)
    return missing


def _missing_text(run, key):
    """Why the panel of ``key`` is empty."""
    area = (run.get("diagnostics") or {}).get("area")
    if area is not None and len(area) and not np.any(np.asarray(area) > 0):
        return f"no {key.replace('_', ' ')}:\nthe flow has no gas"
    return f"no {key.replace('_', ' ')} in this file"


def gas_phase(run):
    """What the gas of a flow run is: one bubble, or several and/or a gas layer.

    Returns ``{"single": bool, "layer": bool, "text": str}``; ``text`` counts
    the connected gas regions in the first and the last snapshot (e.g. "6
    bubbles + gas layer at t = 0; 4 bubbles + gas layer at t = 1 s"), or, with
    no snapshot, the case's geometry.
    """
    geometry = _nested(run.get("case") or {}, "geometry") or {}
    geometry = geometry if isinstance(geometry, dict) else {}
    bubbles = geometry.get("bubbles")
    n_case = len(bubbles) if isinstance(bubbles, list) else 0
    many = any(geometry.get(k) for k in ("bubble_lattice", "random_bubbles", "droplets"))
    surface = geometry.get("free_surface") is not None and geometry.get("free_surface") is not False
    f = run.get("fields")
    if f is not None and f.get("phi") is not None:
        first = gas_components(f.get("phi_first", f["phi"]))
        last = gas_components(f["phi"])
        t0, t1 = f.get("time_first"), f.get("time")
        text = gas_regions_text(*first) + (f" at t = {t0:.3g} s" if t0 is not None else "")
        if f.get("snapshots", 1) > 1 and last != first:
            text += "; " + gas_regions_text(*last) + (f" at t = {t1:.3g} s" if t1 is not None else "")
        single = first == (1, 0) and last in ((1, 0), (0, 0)) and not surface and not many
        layer = surface or first[1] > 0 or last[1] > 0
    else:
        text = f"{n_case} bubble{'s' if n_case != 1 else ''}" + (" + gas layer" if surface else "")
        if many:
            text += " + more from the case's bubble patterns"
        single = n_case == 1 and not surface and not many
        layer = surface
    return {"single": single, "layer": layer, "text": text}


def iterations_figure(run):
    s = run["solves"]
    its = s["iterations"].astype(np.float64)
    steps = s["step"] if s["step"] is not None and len(s["step"]) == len(its) else np.arange(1, len(its) + 1)
    fig, body = run_figure(run, 8.0, 6.2)
    ax_i, ax_t = body.subplots(2, 1, sharex=True)
    marker = "o" if len(its) <= 60 else None
    ax_i.plot(steps, its, "-", color="C0", lw=1.2, marker=marker, ms=3, label="iterations")
    ax_i.axhline(float(np.mean(its)), color="C0", ls=":", lw=1.0,
                 label=f"mean {np.mean(its):.1f}")
    conv = s.get("converged")
    if conv is not None and len(conv) == len(its) and not np.all(conv):
        bad = ~conv.astype(bool)
        ax_i.plot(steps[bad], its[bad], ls="none", marker="X", color=BANNER_COLOUR, ms=9,
                  mec="k", mew=0.6, zorder=5, label=f"not converged ({int(bad.sum())} steps)")
    ax_i.set_ylabel("pressure iterations (-)")
    if spans_decades(its):
        ax_i.set_yscale("log")
        ax_i.grid(True, which="minor", alpha=0.12)
    else:
        ax_i.set_ylim(bottom=0)
    ax_i.grid(True, alpha=0.35)
    ax_i.legend(fontsize=8, loc="best")
    ax_i.set_title("pressure iterations per step", fontsize=10)

    plotted = []
    for key, colour, label in (("solve_seconds", "C1", "solve"), ("setup_seconds", "C2", "setup")):
        v = s.get(key)
        if v is not None and len(v) == len(its):
            ax_t.plot(steps, v, "-", color=colour, lw=1.2, marker=marker, ms=3,
                      label=f"{label} (total {np.nansum(v):.3g} s)")
            plotted.append(v[np.isfinite(v) & (v > 0)])
    allv = np.concatenate(plotted) if plotted else np.zeros(0)
    if allv.size and allv.max() / allv.min() > 100.0:
        ax_t.set_yscale("log")
    else:
        ax_t.set_ylim(bottom=0)
    ax_t.set_xlabel("time step (-)")
    ax_t.set_ylabel("time per step (s)")
    ax_t.set_title("pressure solve and set-up time per step", fontsize=10)
    ax_t.grid(True, alpha=0.35)
    if plotted:
        ax_t.legend(fontsize=8, loc="best")
    else:
        no_data_note(ax_t, "no solve or set-up times in this file")
    body.suptitle(f"{run['name']}: pressure solver per time step ({len(its)} steps)\n"
                 f"{solver_text(run)}; {grid_text(run)}"
                 + (f"; backend {run['backend']}" if run.get("backend") else ""), fontsize=10)
    return fig
