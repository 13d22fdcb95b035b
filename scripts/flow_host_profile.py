"""Where the host's time goes in a flow run: ``bubbleflow run`` under cProfile.

    python3 scripts/flow_host_profile.py CASE.yaml [--set K=V ...] [--end T] [--top N]

A short warm-up run first (kernels compiled, caches filled), then the
profiled run to ``--end``; prints the run's wall time and the functions with
the most own time and the most cumulative time.  On a GPU the step is bound
by the host (launches, synchronisations, Python) at small grids, so the
host's profile is the step's.
"""
import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.apps.cli import main  # noqa: E402


def _run(case, sets, end, backend, outdir):
    args = ["run", case, "--quiet", "--backend", backend, "-o", outdir,
            "--set", f"time.end={end}", "--set", f"output.interval={end}"]
    for s in sets:
        args += ["--set", s]
    return main(args)


def cli():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--end", type=float, default=0.3)
    ap.add_argument("--warmup-end", type=float, default=0.02)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--top", type=int, default=35)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _run(a.case, a.sets, a.warmup_end, a.backend, os.path.join(tmp, "warm"))
        t0 = time.perf_counter()
        _run(a.case, a.sets, a.end, a.backend, os.path.join(tmp, "plain"))
        plain = time.perf_counter() - t0
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        _run(a.case, a.sets, a.end, a.backend, os.path.join(tmp, "profiled"))
        prof.disable()
        profiled = time.perf_counter() - t0
    print(f"# {a.case} {' '.join(a.sets)} to t = {a.end}: wall {plain:.2f} s plain, "
          f"{profiled:.2f} s profiled")
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(a.top)
    st.sort_stats("cumulative").print_stats(a.top + 15)


if __name__ == "__main__":
    cli()
