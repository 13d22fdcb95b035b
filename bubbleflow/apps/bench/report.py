"""The benchmark's output: every column to CSV, the main ones as an aligned table."""
from __future__ import annotations

import math

from ...case.config import CaseError
from .options import parse_config

__all__ = ["COLUMNS", "LEGEND", "LEGEND_3D", "write_csv", "format_table", "contrast_text"]

#: Short names of the peers in the table.
PEER_SHORT = {"cupy_cg": "cupy cg+jac", "scipy_cg": "scipy cg+jac", "pyamg": "pyamg sa+cg",
              "pyamg_rs": "pyamg rs+cg"}

#: Every CSV column, in order (``docs/performance_records.md`` says what each means).
COLUMNS = (
    "size", "dim", "cells", "contrast", "rhs", "rtol", "kind", "solver", "config",
    "iterations", "ms_per_iteration", "solve_ms", "setup_ms", "total_ms",
    "true_residual", "converged", "reason",
    "bytes_per_iteration", "bytes_source", "achieved_gb_s", "floor_ms_per_iteration",
    "ratio_to_floor", "speedup_solve", "speedup_total", "speedup_vs", "speedup_note",
    "peak_gpu_bytes", "peak_gpu_arrays",
    "memory_bytes", "memory_bytes_per_cell", "memory_measure",
    "operator_ms", "solver_setup_ms", "setup_cold_ms", "deflation_vectors", "subdomains",
    "maxiter",
    "runs", "solve_ms_min", "solve_ms_max", "engine",
    "backend", "device", "copy_gb_s",
)

def write_csv(path, rows):
    """Every column of :data:`COLUMNS`, one row per solver and problem, atomically."""
    from ...io.atomic import atomic_text
    from ..tables import csv_text

    atomic_text(path, csv_text(COLUMNS, rows))


def _fmt(v, spec, width):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-".rjust(width)
    return format(v, spec).rjust(width)


def _short_solver(row):
    if row["kind"] == "peer":
        return PEER_SHORT.get(row["config"], row["config"])
    try:
        return parse_config(row["config"]).short
    except CaseError:
        return row["solver"]


def _reason_short(row):
    if row["converged"]:
        return "ok"
    r = row["reason"] or ""
    return {"true residual above rtol": "res>rtol", "stagnation": "stagn"}.get(r, r[:8])


def contrast_text(v):
    """1 -> '1', 1000 -> '1e3', 1e6 -> '1e6', 31.6 -> '31.6'."""
    text = f"{v:g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = f"{mant}e{int(exp)}"
    elif v >= 1000 and v == int(v) and str(int(v)).rstrip("0") == "1":
        text = f"1e{len(str(int(v))) - 1}"
    return text


def _speedup(row, key):
    v = row.get(key)
    if v is None:
        return "-"
    note = row.get("speedup_note") or ""
    mark = "?" if "ours not converged" in note else (">" if "peer not converged" in note else "")
    return mark + format(v, ".3g")


#: The memory column's header by what measured it (:class:`.measure.MemoryPeak`).
_MEMORY_HEADER = {"memory pool peak": "pool B/cell", "tracemalloc peak": "trace B/cell"}


def format_table(rows):
    """The compact, aligned table of the main columns (one line per row).

    3-D rows (``--dim 3``) end with the memory of the set-up plus solve
    (GiB and bytes per cell, its measure named in the header: ``pool``, the
    CuPy memory pool's peak; ``trace``, tracemalloc's peak of the NumPy
    arrays) instead of the peak pool after the solves and its arrays."""
    three_d = any(r.get("dim") == 3 for r in rows)
    if three_d:
        measures = {r["memory_measure"] for r in rows if r.get("memory_measure")}
        label = _MEMORY_HEADER.get(measures.pop(), "B/cell") if len(measures) == 1 else "B/cell"
        last = f"{'GiB':>6} {label:>12}"
    else:
        last = f"{'GiB':>6} {'arrays':>6}"
    head = (f"{'n':>5} {'contrast':>8} {'solver':<19} {'its':>6} {'ms/it':>8} {'solve ms':>9} "
            f"{'setup ms':>9} {'true res':>8} {'status':<8} {'MB/it':>7} {'GB/s':>6} "
            f"{'floor ms':>8} {'x floor':>7} {'speedup':>7} {'+setup':>7} " + last)
    lines = [head]
    for r in rows:
        nbytes = r.get("bytes_per_iteration")
        if three_d:
            peak = r.get("memory_bytes")
            memory = _fmt(r.get('memory_bytes_per_cell'), '.0f', 12)
        else:
            peak = r.get("peak_gpu_bytes")
            memory = _fmt(r['peak_gpu_arrays'], '.1f', 6)
        lines.append(
            f"{r['size']:>5} {contrast_text(r['contrast']):>8} {_short_solver(r):<19.19} "
            f"{_fmt(r['iterations'], 'd', 6)} {_fmt(r['ms_per_iteration'], '.4f', 8)} "
            f"{_fmt(r['solve_ms'], '.1f', 9)} {_fmt(r['setup_ms'], '.1f', 9)} "
            f"{_fmt(r['true_residual'], '.1e', 8)} {_reason_short(r):<8.8} "
            f"{_fmt(nbytes / 1e6 if nbytes else None, '.1f', 7)} "
            f"{_fmt(r['achieved_gb_s'], '.0f', 6)} {_fmt(r['floor_ms_per_iteration'], '.4f', 8)} "
            f"{_fmt(r['ratio_to_floor'], '.2f', 7)} {_speedup(r, 'speedup_solve'):>7} "
            f"{_speedup(r, 'speedup_total'):>7} "
            f"{_fmt(peak / 2 ** 30 if peak is not None else None, '.2f', 6)} {memory}")
    return "\n".join(lines)


LEGEND = ("# solver: dpcg = deflated PCG (A-DEF2), pcg = PCG without deflation; jac = jacobi, "
           "ips = incomplete_poisson_scaled, ip = incomplete_poisson, bic = block_ic, mg = "
           "multigrid; lsd = "
           "levelset_subdomains, sd = subdomains, str = stripes\n"
           "# status: ok = true residual <= rtol; speedup = peer solve time / ours, +setup = "
           "(set-up + solve) ratio; '>' lower bound (the peer stopped unconverged), '?' ours "
           "did not converge; GiB/arrays: peak CuPy memory pool, and / (8 n^2)")
#: The legend of a 3-D table (``--dim 3``): the memory columns differ.
LEGEND_3D = LEGEND.rsplit("; GiB/arrays", 1)[0] + (
    "; GiB, B/cell: memory of our set-up plus solve (the peer's: set-up plus 10 "
    "iterations), in GiB and bytes per cell (n^3): pool = peak of the CuPy memory pool, "
    "trace = tracemalloc peak of the NumPy arrays")
