"""The bubbles of a flow run, one by one (``<stem>_bubbles.png``): what the
bubble tracker recorded (``/bubbles``, :mod:`bubbleflow.io.bubble_tables`).

Panels: the trajectories (each bubble's centroid path on the domain, one
colour per bubble, its merges and splits marked), the rise velocity of
each bubble against time, and the size distribution (the equivalent
diameters at the last sample, those of the first sample outlined).  A
swarm (more than :data:`SWARM` bubbles at one sample) adds the void
fraction profile (the bubbles' gas fraction averaged over horizontal
planes, from the last snapshot's volume fraction ``c``, or from ``phi <
0`` for the level set alone; a gas layer above a free surface left out), the mean
rise velocity against time (with the bubbles' spread, and the bubbles' gas
weighted by size) and the number of bubbles against time.

Unlike the benchmark figure (:mod:`.plots_flow`), whose quantities are
those of the whole gas phase, every curve here is one bubble's.
"""
from __future__ import annotations

import numpy as np

from .plots_figure import no_data_note, run_figure

__all__ = ["bubbles_figure", "bubble_table", "gas_weighted_rise", "void_profile", "SWARM",
           "LEGEND_MOST"]

#: More bubbles than this at one sample make a swarm: its panels are added.
SWARM = 5
#: Bubbles named in a legend at most (more: one colour each, unnamed).
LEGEND_MOST = 8


def _vertical(run):
    """``(ndim, the vertical axis' letter, its cell centres)``."""
    if run.get("z") is not None:
        return 3, "z", run["z"]
    return 2, "y", run["y"]


def bubble_table(run):
    """``(table, None)``: the bubble table of a flow run (column -> array,
    :func:`bubbleflow.io.bubble_tables.read_bubble_tables`), or ``(None,
    why)`` when there is nothing to draw."""
    table = run.get("bubbles") or {}
    _, up, _ = _vertical(run)
    need = ("step", "time", "id", "diameter", "centroid_x", "centroid_" + up, "velocity_" + up)
    if not table or any(name not in table for name in need):
        return None, "no bubble table (a run without bubble tracking, output.bubbles_every: 0)"
    lengths = {len(np.ravel(table[name])) for name in need}
    if len(lengths) != 1:
        return None, "the bubble table's columns have different lengths"
    if lengths == {0}:
        return None, "the bubble table is empty (no bubble was sampled)"
    return {name: np.ravel(table[name]) for name in table}, None


def _colours(ids):
    """One colour per bubble id (a qualitative map, cycled)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(ids) <= 10 else "tab20"]
    return {int(i): cmap(k % cmap.N) for k, i in enumerate(ids)}


def _events(run, kind):
    """``(step, id, other)`` rows of the events of ``kind`` (a name of
    :data:`~bubbleflow.flow.bubble_tracking.EVENT_KINDS`)."""
    from ..flow.bubble_tracking import EVENT_KINDS

    events = run.get("bubble_events") or {}
    if any(name not in events for name in ("step", "kind", "id", "other")):
        return np.zeros((0, 3), dtype=np.int64)
    keep = np.ravel(events["kind"]) == EVENT_KINDS.index(kind)
    return np.stack([np.ravel(events[name])[keep] for name in ("step", "id", "other")],
                    axis=1).astype(np.int64)


def _where(table, step, bubble, up):
    """The centroid ``(x, vertical)`` of ``bubble`` at ``step`` (None if no row)."""
    at = np.flatnonzero((table["step"] == step) & (table["id"] == bubble))
    if not at.size:
        return None
    return table["centroid_x"][at[0]], table["centroid_" + up][at[0]]


def _domain(run):
    """``(x0, x1, v0, v1)``: the domain's extent across and up (m)."""
    x = run["x"]
    _, _, v = _vertical(run)
    hx = (x[-1] - x[0]) / (len(x) - 1) if len(x) > 1 else 1.0
    hv = (v[-1] - v[0]) / (len(v) - 1) if len(v) > 1 else 1.0
    return x[0] - hx / 2, x[-1] + hx / 2, v[0] - hv / 2, v[-1] + hv / 2


def _trajectories(ax, run, table, colours):
    from matplotlib.lines import Line2D

    _, up, _ = _vertical(run)
    for bubble, colour in colours.items():
        mine = table["id"] == bubble
        order = np.argsort(table["time"][mine], kind="stable")
        x, v = table["centroid_x"][mine][order], table["centroid_" + up][mine][order]
        ax.plot(x, v, "-", color=colour, lw=1.5)
        ax.plot(x[:1], v[:1], "o", color=colour, ms=3.5)
    marks = []
    for kind, marker, label in (("merged", "X", "merged"), ("split", "P", "split off")):
        rows = _events(run, kind)
        # Where it happened: the survivor's centroid (merged), the piece's (split).
        spots = [_where(table, step, survivor if kind == "merged" else piece, up)
                 for step, survivor, piece in rows]
        spots = [s for s in spots if s is not None]
        if spots:
            ax.plot(*np.array(spots).T, ls="none", marker=marker, color="k", ms=8, mfc="white",
                    mew=1.3, zorder=5)
            marks.append(Line2D([], [], ls="none", marker=marker, color="k", mfc="white",
                                mew=1.3, label=f"{label} ({len(spots)})"))
    x0, x1, v0, v1 = _domain(run)
    ax.set_xlim(x0, x1)
    ax.set_ylim(v0, v1)
    ax.set_aspect("equal")
    ax.set_xlabel("centroid x (m)")
    ax.set_ylabel(f"centroid {up} (m)")
    ax.set_title("trajectories (dot: first sample)", fontsize=10)
    ax.grid(True, alpha=0.3)
    if marks:
        ax.legend(handles=marks, fontsize=8, loc="lower right", framealpha=0.85)


def _rise_velocities(ax, run, table, colours):
    _, up, _ = _vertical(run)
    for bubble, colour in colours.items():
        mine = table["id"] == bubble
        order = np.argsort(table["time"][mine], kind="stable")
        ax.plot(table["time"][mine][order], table["velocity_" + up][mine][order], "-",
                color=colour, lw=1.3, label=f"bubble {bubble}")
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("time t (s)")
    ax.set_ylabel(f"rise velocity, mean {up}-velocity of the bubble (m/s)")
    ax.set_title("rise velocity of each bubble", fontsize=10)
    ax.grid(True, alpha=0.35)
    if len(colours) <= LEGEND_MOST:
        ax.legend(fontsize=8, loc="best")


def _sizes(ax, table):
    first, last = table["step"].min(), table["step"].max()
    d_last = table["diameter"][table["step"] == last]
    d_first = table["diameter"][table["step"] == first]
    both = np.concatenate([d_first, d_last])
    both = both[np.isfinite(both)]
    lo, hi = (float(both.min()), float(both.max())) if both.size else (0.0, 1.0)
    middle = 0.5 * (lo + hi)
    if hi - lo <= 0.1 * abs(middle):
        # Sizes all alike (one bubble, equal bubbles): one bin, a fifth of the size wide.
        bins = [middle - 0.1 * abs(middle) - 1e-12, middle + 0.1 * abs(middle) + 1e-12]
    else:
        pad = 0.02 * (hi - lo)
        bins = np.linspace(lo - pad, hi + pad, max(2, min(12, both.size)) + 1)
    t_first = float(table["time"][table["step"] == first][0])
    t_last = float(table["time"][table["step"] == last][0])
    ax.hist(d_last, bins=bins, color="C0", alpha=0.75,
            label=f"last sample, t = {t_last:.3g} s ({d_last.size})")
    if last != first:
        ax.hist(d_first, bins=bins, histtype="step", color="k", lw=1.2,
                label=f"first sample, t = {t_first:.3g} s ({d_first.size})")
    ax.set_xlabel("equivalent diameter (m)")
    ax.set_ylabel("bubbles (-)")
    ax.set_title("size distribution", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def void_profile(gas, spacing):
    """``(profile, layers)``: the bubbles' gas fraction of each horizontal
    plane of the cell field ``gas`` (the gas fraction of each cell, the
    first axis vertical; ``spacing`` the cell sizes in grid-axis order) and
    the number of gas layers left out of it.

    A gas layer (the gas above a free surface) is what the bubble tracker
    calls one (:mod:`bubbleflow.flow.gas_regions`): a region whose cores,
    the cells more than half gas, reach the top plane of cells; every cell
    counts with the region of its nearest core.  Counted, a layer would
    fill the planes above the surface and leave the bubbles' fractions a
    sliver of the axis.
    """
    from ..compute.regions import label_regions
    from ..flow.gas_regions import layer_labels, nearest_labels

    gas = np.asarray(gas, dtype=np.float64)
    labels, _ = label_regions(gas > 0.5)
    layers = layer_labels(labels)
    if layers.size:
        gas = np.where(np.isin(nearest_labels(labels, spacing), layers), 0.0, gas)
    return gas.mean(axis=tuple(range(1, gas.ndim))), int(layers.size)


def _void_fraction(ax, run):
    """The bubbles' gas fraction of each horizontal plane of the last snapshot."""
    _, up, heights = _vertical(run)
    f = run.get("fields") or {}
    if f.get("c") is not None:
        gas, source = f["c"], "volume fraction c"
    elif f.get("phi") is not None:
        gas, source = (f["phi"] < 0.0).astype(np.float64), "cells with phi < 0"
    else:
        no_data_note(ax, "no snapshot in this file")
        return
    spacing = [float(run[a][1] - run[a][0]) if len(run[a]) > 1 else 1.0
               for a in "xyz"[:gas.ndim]]
    profile, layers = void_profile(gas, spacing)
    ax.plot(profile, heights, "-", color="C0", lw=1.6)
    ax.set_xlim(0.0, max(1e-3, float(np.nanmax(profile)) * 1.05))
    ax.set_ylim(*_domain(run)[2:])
    left_out = ("" if not layers else
                ", the gas layer left out" if layers == 1 else f", {layers} gas layers left out")
    ax.set_xlabel(f"gas fraction of the plane (-), from {source}{left_out}")
    ax.set_ylabel(f"{up} (m)")
    when = f"t = {f['time']:.3g} s" if f.get("time") is not None else "the last snapshot"
    ax.set_title(f"void fraction profile of the bubbles at {when}", fontsize=10)
    ax.grid(True, alpha=0.35)


def _samples(table):
    """``(times, sum)``: each sample's time and ``sum(values)``, a function
    that sums ``values`` (one a row) over each sample's bubbles."""
    steps, first = np.unique(table["step"], return_index=True)
    at = np.searchsorted(steps, table["step"])
    return table["time"][first], lambda values: np.bincount(at, weights=values,
                                                            minlength=steps.size)


def _per_sample(table, values):
    """``(times, means, spreads, counts)`` of ``values`` over the bubbles of each sample."""
    times, total = _samples(table)
    counts = total(np.ones(len(values)))
    mean = total(values) / counts
    spread = np.sqrt(np.maximum(total(values * values) / counts - mean * mean, 0.0))
    return times, mean, spread, counts.astype(np.int64)


def gas_weighted_rise(table, up):
    """``(times, velocity)``: each sample's rise velocity of the bubbles'
    gas, each bubble's weighted by its size (``volume``, or ``area`` in
    2-D): where a swarm's gas goes, which its many small pieces do not
    sway as they sway the mean over the bubbles."""
    size = table["volume"] if "volume" in table else table["area"]
    times, total = _samples(table)
    gas = total(size)
    return times, total(size * table["velocity_" + up]) / np.where(gas > 0, gas, np.nan)


def _mean_rise(ax, run, table):
    _, up, _ = _vertical(run)
    t, mean, spread, _ = _per_sample(table, table["velocity_" + up])
    ax.fill_between(t, mean - spread, mean + spread, color="C1", alpha=0.25,
                    label="one standard deviation")
    ax.plot(t, mean, "-", color="C1", lw=1.6, label="mean over the bubbles")
    if "volume" in table or "area" in table:
        t, weighted = gas_weighted_rise(table, up)
        ax.plot(t, weighted, "--", color="C4", lw=1.4, label="the bubbles' gas (size-weighted)")
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("time t (s)")
    ax.set_ylabel("rise velocity (m/s)")
    ax.set_title("mean rise velocity of the bubbles", fontsize=10)
    ax.grid(True, alpha=0.35)
    ax.legend(fontsize=8, loc="best")


def _counts(ax, table):
    t, _, _, counts = _per_sample(table, table["diameter"])
    ax.step(t, counts, where="post", color="C2", lw=1.6)
    ax.set_xlabel("time t (s)")
    ax.set_ylabel("bubbles (-)")
    ax.set_ylim(0, counts.max() * 1.1 + 0.5)
    ax.set_title("number of bubbles", fontsize=10)
    ax.grid(True, alpha=0.35)


def bubbles_figure(run):
    """``<stem>_bubbles.png`` of a flow run whose file holds a bubble table
    (:func:`bubble_table` says when it does not: draw nothing then)."""
    table, _ = bubble_table(run)
    ids = np.unique(table["id"])
    colours = _colours(ids)
    most = int(np.unique(table["step"], return_counts=True)[1].max())
    swarm = most > SWARM
    fig, body = run_figure(run, 14.5, 9.6 if swarm else 5.0)
    axes = np.atleast_2d(body.subplots(2 if swarm else 1, 3))
    _trajectories(axes[0, 0], run, table, colours)
    _rise_velocities(axes[0, 1], run, table, colours)
    _sizes(axes[0, 2], table)
    if swarm:
        _void_fraction(axes[1, 0], run)
        _mean_rise(axes[1, 1], run, table)
        _counts(axes[1, 2], table)
    merged, split = len(_events(run, "merged")), len(_events(run, "split"))
    every = np.diff(np.unique(table["step"]))
    sampled = ("one sample" if not every.size else "sampled every step" if every.min() == 1
               else f"sampled every {int(every.min())} steps")
    named = "" if len(ids) <= LEGEND_MOST else ", one colour each"
    cells = " x ".join(str(len(run[a])) for a in ("x", "y", "z") if run.get(a) is not None)
    body.suptitle(f"{run['name']}: {len(ids)} bubble{'s' if len(ids) != 1 else ''} tracked"
                  f"{named} ({merged} merged, {split} split off; at most {most} at once), "
                  f"{sampled}; {cells} cells\n"
                  "each curve is one bubble (the benchmark figure's quantities are the whole "
                  "gas phase's)", fontsize=10.5)
    return fig
