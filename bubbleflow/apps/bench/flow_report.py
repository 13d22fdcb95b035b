"""The output of ``bubbleflow bench --flow``: a table per configuration, every column to CSV."""
from __future__ import annotations

import math

__all__ = ["FLOW_COLUMNS", "format_flow_table", "write_flow_csv", "h_text"]

#: Every CSV column, in order: one row per configuration and phase (then its
#: ``step`` row: every phase, output included); the configuration's figures
#: are repeated on each of its rows (``nz`` empty for a 2-D grid; ``cells``
#: the whole grid's; ``ns_per_cell`` the step's mean time over them;
#: ``clock_off_*`` the step with the phase clock off, the output amortised).
FLOW_COLUMNS = (
    "case", "name", "nx", "ny", "nz", "cells", "h", "interface", "deflation", "subdomains",
    "phase", "median_ms", "mean_ms", "share", "bytes_per_step", "floor_ms", "ratio_to_floor",
    "iterations_mean", "iterations_max", "ms_per_iteration", "bytes_per_iteration",
    "unconverged_solves", "steps", "skip", "dt_mean", "step_ms", "clock_off_median_ms",
    "clock_off_mean_ms", "clock_off_ratio_to_floor", "ns_per_cell",
    "wall_s_per_sim_s", "time_end", "projected_wall_s", "output_interval", "snapshot_ms",
    "snapshot_written_ms", "snapshots_per_step", "snapshot_bytes", "backend", "device",
    "copy_gb_s", "host_copy_gb_s", "status",
)


def write_flow_csv(path, rows):
    """Every column of :data:`FLOW_COLUMNS`, atomically."""
    from ...io.atomic import atomic_text
    from ..tables import csv_text

    atomic_text(path, csv_text(FLOW_COLUMNS, rows))


def h_text(h):
    """1/80 -> '1/80', 0.3 -> '0.3'."""
    inverse = 1.0 / h
    return f"1/{round(inverse)}" if abs(inverse - round(inverse)) < 1e-9 * inverse else f"{h:g}"


def _num(v, spec, width):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-".rjust(width)
    return format(v, spec).rjust(width)


def _ratio(v):
    if v is None:
        return "-".rjust(8)
    return format(v, ".0f" if v >= 10 else ".2f").rjust(8)


def _duration(seconds):
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 60:.3g} min" if seconds >= 120 else f"{seconds:.3g} s"


def _per_cell(ns):
    """A time per cell in the unit that keeps it readable: 0.37 -> '0.37 ns', 17668 -> '17.7 us'."""
    scale, unit = next(((s, u) for s, u in ((1e6, "ms"), (1e3, "us")) if ns >= s), (1.0, "ns"))
    return f"{ns / scale:.3g} {unit}"


def format_flow_table(config, bench, rows):
    """The table of one configuration's rows (phases, then ``step``) and its summary lines."""
    case = config.case
    last = rows[-1]
    lines = [f"# {config.title} ({case.name}, h = {h_text(last['h'])}, {last['interface']}): "
             f"{config.subdomains_note}; {last['steps']} steps after {bench.skip}, mean dt "
             f"{last['dt_mean']:.3g} s",
             f"{'phase':<18} {'median ms':>10} {'mean ms':>10} {'share':>7} {'floor ms':>10} "
             f"{'x floor':>8}"]
    for r in rows:
        lines.append(f"{r['phase']:<18.18} {_num(r['median_ms'], '.3f', 10)} "
                     f"{_num(r['mean_ms'], '.3f', 10)} {_num(r['share'], '.1%', 7)} "
                     f"{_num(r['floor_ms'], '.3g', 10)} {_ratio(r['ratio_to_floor'])}")
    if last.get("clock_off_mean_ms") is not None:
        ratio = last["clock_off_ratio_to_floor"]
        lines.append(f"{'step, clock off':<18} {_num(last['clock_off_median_ms'], '.3f', 10)} "
                     f"{_num(last['clock_off_mean_ms'], '.3f', 10)} {'':>7} "
                     f"{_num(last['floor_ms'], '.3g', 10)} {_ratio(ratio)}")
        lines.append("# step, clock off: as a run takes it, no synchronisation between phases "
                     "(the phases above each end with one)")
    per_it = last["ms_per_iteration"]
    lines.append(
        f"# pressure solve: {last['iterations_mean']:.1f} iterations per step (max "
        f"{last['iterations_max']}), " + (f"{per_it:.4f} ms per iteration, " if per_it else "")
        + f"{last['bytes_per_iteration'] / 1e6:.3g} MB per iteration"
        + (f"; {last['unconverged_solves']} solves NOT converged" if last["unconverged_solves"]
           else ""))
    steps_to_end = case.time.end / last["dt_mean"]
    interval = case.output.interval
    lines.append(
        f"# {last['step_ms']:.3f} ms per step ({_per_cell(last['ns_per_cell'])} per cell of "
        f"{last['cells']:,}); {last['wall_s_per_sim_s']:.3g} s wall per "
        f"simulated s; the whole case to t = {case.time.end:g} s: about "
        f"{_duration(last['projected_wall_s'])} ({steps_to_end:.0f} steps at the mean dt)")
    background = last["snapshot_written_ms"] > 1.5 * last["snapshot_ms"]
    lines.append(
        f"# output: one snapshot file of {last['snapshot_bytes'] / 1e6:.3g} MB holds the step "
        f"loop {last['snapshot_ms']:.3g} ms"
        + (f" and is on disk after {last['snapshot_written_ms']:.3g} ms (written in the "
           "background)" if background else "")
        + f"; {last['snapshots_per_step']:.3g} snapshots per step ("
        + (f"every {interval:g} s" if interval else "start and end only") + ")")
    return "\n".join(lines)
