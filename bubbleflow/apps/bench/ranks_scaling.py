"""``bubbleflow bench --scaling 1 2 4``: the ranks' benchmark
(:func:`.ranks_model.run_ranks_bench`) on each count of ranks, each started
by ``mpiexec -n N``, and one table of strong and weak scaling with the
model's time and error beside each measurement.

* Strong scaling: the same ``n^d`` grid on 1 and on N ranks; efficiency
  ``T_1 / (N T_N)``.
* Weak scaling: ``n^d`` cells a rank (the column stacked a unit a rank);
  efficiency ``T_1 / T_N``.

``T`` is the measured time of one iteration; the model's efficiency is the
same ratio of its predicted times.  Every count of ranks runs the same
loop (Jacobi PCG by the engine ``--ranks-engine`` picks: on GPUs the fused
engine, else the array loop; the ``engine`` column), one rank included, so
the ratios compare like with like.

At each strong size a second table: the default solver's time to solution
(:mod:`.ranks_solve`: a new solver's set-up and its solve, multigrid PCG
on one process's whole grid and on the ranks' slabs) and its ratio to one
process's.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["SCALING_COLUMNS", "find_mpiexec", "scaling_rows", "format_scaling", "format_solutions",
           "run_scaling", "run_counts"]

#: The scaling table's columns (also the CSV's).
SCALING_COLUMNS = ("dim", "scaling", "n", "ranks", "cells", "cells_per_rank", "comm", "backend",
                   "engine", "measured_ms", "model_ms", "model_error", "efficiency", "model_efficiency",
                   "setup_ms", "solve_ms", "solve_iterations", "solution_ms", "solution_ratio")


def find_mpiexec():
    """The ``mpiexec`` beside this Python (the ``mpich`` wheel's), else on the PATH; or None."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def scaling_rows(rows, sizes, weak_sizes):
    """The table's rows from the ranks' benchmark rows of every count of
    ranks (:func:`.ranks_model.run_ranks_bench`'s, one rank's among them):
    for each of ``sizes`` the rows of that grid (strong scaling), for each
    of ``weak_sizes`` the rows of that many cells a rank (weak scaling), the
    one-rank row first in each; efficiencies against it (None where it is
    missing)."""
    out = []
    for kind, ns in (("strong", sizes), ("weak", weak_sizes)):
        for dim, n in sorted({(r["dim"], n) for r in rows for n in ns}):
            group = sorted((r for r in rows if r["dim"] == dim and r["n"] == n and (
                r["ranks"] == 1 or r["weak"] == (kind == "weak"))), key=lambda r: r["ranks"])
            base = group[0] if group and group[0]["ranks"] == 1 else None
            for r in group:
                factor = r["ranks"] if kind == "strong" else 1
                eff = model_eff = None
                if base is not None:
                    eff = base["measured"] / (factor * r["measured"])
                    model_eff = base["predicted"] / (factor * r["predicted"])
                out.append(dict(dim=dim, scaling=kind, n=n, ranks=r["ranks"], cells=r["cells"],
                                cells_per_rank=r["cells"] // r["ranks"], comm=r["comm"],
                                backend=r["backend"], engine=r.get("engine", "generic"),
                                measured_ms=1e3 * r["measured"],
                                model_ms=1e3 * r["predicted"],
                                model_error=(r["predicted"] - r["measured"]) / r["measured"],
                                efficiency=eff, model_efficiency=model_eff,
                                **_solution(r if kind == "strong" else None, base)))
    return out


def _solution(row, base):
    """The default solver's columns of a strong row (None for a weak row,
    ``row`` None, or one without): set-up, solve and their sum in ms,
    iterations, and the sum's ratio to the one-rank row ``base``'s."""
    got = (row or {}).get("solution")
    if not got:
        return dict(setup_ms=None, solve_ms=None, solve_iterations=None, solution_ms=None,
                    solution_ratio=None)
    total = got["setup"] + got["solve"]
    one = (base or {}).get("solution")
    return dict(setup_ms=1e3 * got["setup"], solve_ms=1e3 * got["solve"],
                solve_iterations=got["iterations"], solution_ms=1e3 * total,
                solution_ratio=total / (one["setup"] + one["solve"]) if one else None)


def format_scaling(table):
    """The scaling rows as an aligned text table (percentages for the ratios)."""
    head = ("D", "scaling", "n", "ranks", "cells a rank", "comm", "engine", "ms/it",
            "model ms/it",
            "model error", "efficiency", "model eff.")
    lines = []
    for t in table:
        pct = (lambda v: "-" if v is None else f"{100 * v:.1f} %")
        lines.append((str(t["dim"]), t["scaling"], str(t["n"]), str(t["ranks"]),
                      str(t["cells_per_rank"]), t["comm"], t["engine"],
                      f"{t['measured_ms']:.3f}",
                      f"{t['model_ms']:.3f}", f"{100 * t['model_error']:+.1f} %",
                      pct(t["efficiency"]), pct(t["model_efficiency"])))
    widths = [max([len(h)] + [len(row[i]) for row in lines]) for i, h in enumerate(head)]
    fmt = lambda row: "  ".join(c.rjust(w) for c, w in zip(row, widths))   # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines])


def format_solutions(table):
    """The default solver's time to solution of the strong rows that have
    one, as an aligned text table (empty where none has)."""
    rows = [t for t in table if t.get("solution_ms") is not None]
    if not rows:
        return ""
    head = ("D", "n", "ranks", "comm", "set-up ms", "solve ms", "its", "to solution ms",
            "x one rank")
    lines = [(str(t["dim"]), str(t["n"]), str(t["ranks"]), t["comm"], f"{t['setup_ms']:.1f}",
              f"{t['solve_ms']:.1f}", str(t["solve_iterations"]), f"{t['solution_ms']:.1f}",
              "-" if t["solution_ratio"] is None else f"{t['solution_ratio']:.2f}")
             for t in rows]
    widths = [max([len(h)] + [len(row[i]) for row in lines]) for i, h in enumerate(head)]
    fmt = lambda row: "  ".join(c.rjust(w) for c, w in zip(row, widths))   # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines])


def _worker_command(mpiexec, ranks, dim, sizes, weak_sizes, backend, rows_path,
                    engine="auto"):
    cmd = [mpiexec, "-n", str(ranks), sys.executable, "-m", "bubbleflow", "bench",
           "--dim", str(dim), "--backend", backend, "--rows", str(rows_path),
           "--ranks-engine", engine]
    if sizes:
        cmd += ["--sizes", *map(str, sizes)]
    if weak_sizes:
        cmd += ["--weak-sizes", *map(str, weak_sizes)]
    return cmd


def run_scaling(counts, dim, sizes, weak_sizes, backend="numpy", csv=None, out=print,
                err=None, mpiexec=None, engine="auto"):
    """Run the ranks' benchmark on each of ``counts`` ranks (1 added where
    missing: the baseline), print the table and write it to ``csv`` (after
    each count, atomically);
    returns ``(table, failed counts)``.  The workers print their own lines
    as they go; a count that fails is named and the rest still run."""
    def command(ranks, path, launcher):
        return _worker_command(launcher, ranks, dim, sizes, weak_sizes, backend, path, engine)

    def table(rows):
        return scaling_rows(rows, sizes, weak_sizes)

    rows, failed = run_counts(counts, command, SCALING_COLUMNS, table, csv, err, mpiexec,
                              "bench --scaling")
    out(format_scaling(table(rows)))
    solutions = format_solutions(table(rows))
    if solutions:
        out("\n# the default solver (multigrid PCG): a new solver's set-up and solve, the "
            "median after the first\n" + solutions)
    return table(rows), failed


def run_counts(counts, command, columns, table, csv=None, err=None, mpiexec=None,
               what="bench --scaling"):
    """Launch ``command(ranks, rows_path, mpiexec)`` for each of ``counts``
    (1 added: the baseline), each writing its rows to ``rows_path`` (JSON
    lines); after each count ``table(rows)`` goes to ``csv`` (``columns``,
    atomically).  Returns ``(rows, failed counts)``: a count that fails, or
    whose processes did not join one MPI world, is named on ``err`` and the
    rest still run."""
    from ...io.atomic import atomic_text
    from ..tables import csv_text

    err = err or (lambda text: print(text, file=sys.stderr, flush=True))
    mpiexec = mpiexec or find_mpiexec()
    rows, failed = [], []
    with tempfile.TemporaryDirectory(prefix="bubbleflow-scaling-") as tmp:
        for ranks in sorted(set(counts) | {1}):
            path = Path(tmp) / f"rows{ranks}.jsonl"
            cmd = command(ranks, path, mpiexec)
            code = subprocess.run(cmd, env=dict(os.environ)).returncode
            if code != 0 or not path.exists():
                err(f"error: {what}: {' '.join(cmd[:3])} ... failed (exit code {code})")
                failed.append(ranks)
                continue
            got = [json.loads(line) for line in path.read_text().splitlines() if line]
            if any(r["ranks"] != ranks for r in got):
                # Processes that did not join one MPI world (another MPI's
                # launcher, or no mpi4py) each ran alone: no N-rank figure.
                err(f"error: {what}: {' '.join(cmd[:3])} started processes that ran "
                    f"as {sorted({r['ranks'] for r in got})} rank(s), not {ranks}: is {mpiexec} "
                    "the launcher of the MPI mpi4py uses?")
                failed.append(ranks)
                continue
            rows += got
            if csv:             # after every count: a later one's failure keeps these
                atomic_text(csv, csv_text(columns, table(rows)))
    return rows, failed
