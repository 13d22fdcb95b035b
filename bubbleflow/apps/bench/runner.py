"""The benchmark run: the header, every size, contrast, peer and configuration, the table."""
from __future__ import annotations

import sys
import time

from .measure import copy_bandwidth, device_info, machine_lines, memory_measure
from .options import DEFAULT_MAXITER_PER_N, PEERS
from .ours import run_ours
from .peers import run_peer
from .problem import add_speedups, failed_row, make_problem, numpy_backend
from .report import COLUMNS, LEGEND, LEGEND_3D, contrast_text, format_table, write_csv

__all__ = ["run_bench"]


def run_bench(bench, out=None, err=None):
    """Run the benchmark described by ``bench`` (a :class:`BenchConfig`).

    Prints the header and, at the end, the table on ``out``; one progress
    line per run on ``err``.  Returns ``(rows, failures)``.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    backend = bench.backend
    info = device_info(backend)
    bench.device = info["device"]
    bench.host_device = numpy_backend().device_name
    gpu = backend.on_device
    mib = bench.copy_mib or (512 if gpu else 64)
    bench.copy_bw, found = copy_bandwidth(backend, mib * 2 ** 20)
    bench.copy_host_bw = None
    if any(p != "cupy_cg" for p in bench.peers):
        bench.copy_host_bw = (bench.copy_bw if not gpu
                              else copy_bandwidth(numpy_backend(), 64 * 2 ** 20)[0])
    default_maxiter = f"{DEFAULT_MAXITER_PER_N} n"
    rtol_text = (f"{bench.rtol:g}" if bench.rtol
                 else "1e-8 (1e-6 at contrast >= 1e6)")
    print("# bubbleflow bench: the pressure solve, ours against the peer on the same matrix, "
          "right-hand side and tolerance", file=out)
    print("\n".join(machine_lines(
        info, backend, mib, bench.copy_bw, found,
        f"; host copy {bench.copy_host_bw / 1e9:.0f} GB/s (CPU peers)"
        if bench.copy_host_bw and gpu else "")), file=out)
    print(_problem_line(bench, rtol_text), file=out)
    deflated = any(c.deflation != "none" for c in bench.configs)
    print("# ours: " + (", ".join(c.token for c in bench.configs) or "none")
          + ("; deflation blocks of "
             + (f"{bench.cells_per_subdomain} cells" if bench.cells_per_subdomain
                else "64 cells (n >= 2048), 32 (256 <= n < 2048), 8 (n < 256)")
             if bench.dim == 2 or deflated else "")
          + f"; maxiter {bench.maxiter or default_maxiter}; {bench.repeat} timed solves, "
          "median of them", file=out)
    if bench.dim == 3:
        print(f"# memory (B/cell): {memory_measure(backend)} of one untimed set-up plus solve "
              "(ours) or set-up plus 10 iterations (peer), the inputs not counted; our MB/it: "
              "the 3-D model (bubbleflow.apps.bench.model3d)", file=out)
    print("# peers: " + (", ".join(bench.peers) or "none")
          + (f"; maxiter {bench.peer_maxiter or default_maxiter}; {bench.peer_repeat} timed "
             "solve(s)" + (f"; sizes <= {bench.peer_max_size}" if bench.peer_max_size else "")
             if bench.peers else ""), file=out)
    out.flush()

    jobs = []
    for n in bench.sizes:
        for contrast in bench.contrasts:
            peers = [p for p in bench.peers if not bench.peer_max_size or n <= bench.peer_max_size]
            configs = [c for c in bench.configs if c.runs_at(n)]
            jobs.append((n, contrast, peers, configs))
    total = sum(len(p) + len(c) for _, _, p, c in jobs)
    rows, failures, done = [], 0, 0
    warmed = set()
    t_start = time.perf_counter()

    def progress(label):
        def say(text):
            if bench.progress:
                print(f"bench [{done + 1}/{total}] {label}: {text} "
                      f"({time.perf_counter() - t_start:.0f} s)", file=err, flush=True)
        return say

    interrupted = False
    try:
        for n, contrast, peers, configs in jobs:
            problem = make_problem(n, contrast, bench.rhs, bench.seed, bench.rtol, bench.dim)
            these = []
            for name in peers:
                say = progress(f"{n}^{bench.dim} contrast {contrast_text(contrast)} {name}")
                try:
                    these.append(run_peer(name, problem, bench, say))
                except Exception as exc:
                    failures += 1
                    these.append(failed_row(problem, bench, "peer", PEERS[name], name, exc))
                    say(f"failed: {these[-1]['reason']}")
                done += 1
            for config in configs:
                say = progress(f"{n}^{bench.dim} contrast {contrast_text(contrast)} "
                               f"{config.name}")
                key = (n, config.token)
                try:
                    these.append(run_ours(problem, config, bench, key not in warmed, say))
                    warmed.add(key)
                except Exception as exc:
                    failures += 1
                    these.append(failed_row(problem, bench, "ours", config.name, config.token,
                                             exc))
                    say(f"failed: {these[-1]['reason']}")
                done += 1
            reference = next((r for r in these if r["kind"] == "peer"
                              and r.get("solve_ms") is not None), None)
            add_speedups(these, reference)
            rows.extend(these)
            if bench.csv:
                write_csv(bench.csv, rows)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if bench.csv and rows:
            write_csv(bench.csv, rows)
        if rows or not interrupted:
            if bench.csv:
                print(f"# wrote {bench.csv} ({len(rows)} rows, {len(COLUMNS)} columns)", file=out)
            if interrupted:
                print("# interrupted: the rows so far", file=out)
            print(LEGEND_3D if bench.dim == 3 else LEGEND, file=out)
            print(format_table(rows), file=out, flush=True)
    return rows, failures


def _problem_line(bench, rtol_text):
    """The header's line on the problem: 2-D or 3-D column, storage, rhs, rtol."""
    if bench.dim == 3:
        stored = "seven diagonals" if bench.storage == "diagonals" else "matrix free"
        what = f"bubbly column n^3 (unit cube, 2 x 2 x 2 bubbles), float64, 7-point operator {stored}"
    else:
        what = f"bubbly column n^2, float64, operator storage {bench.storage}"
    return (f"# problem: {what}, rhs {bench.rhs}"
            + (f" (seed {bench.seed})" if bench.rhs == "random" else "") + f", rtol {rtol_text}")
