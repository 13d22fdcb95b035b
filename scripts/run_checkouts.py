"""Whole ``bubbleflow run`` commands of two checkouts side by side, in one
sitting: a table of wall times and their ratio.

    python3 scripts/run_checkouts.py BASE_ROOT HEAD_ROOT [--rounds K] [--ranks N ...]
        [--head-set KEY=VALUE ...] -- CASE.yaml [RUN ARGS ...]

Runs ``python3 -m bubbleflow run CASE RUN ARGS -o TMP`` with each checkout
first on ``PYTHONPATH`` (a git worktree or an exported tree of the base),
under ``mpiexec -n N`` for each ``--ranks N`` (1: one process, the
default), the two checkouts alternating for ``--rounds`` rounds (default
2) so that a drift of the machine shows in both.  ``--head-set`` settings go to the head's
runs only: keys the base does not know, set to what the base does (for
example ``output.bubbles_every=0``).  Each run's figures: the whole
command's wall time, and the step loop's (the ``N steps to t = T s in X s``
line a flow prints; the solve line of a pressure case).  The table holds
the best of the rounds of each and the ratio head / base; rounds of one
checkout differing more than the two checkouts do say the difference is
noise.  A run that fails ends the script with its command and its last
error line.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.apps.bench.ranks_scaling import find_mpiexec  # noqa: E402

#: The step loop's time in a flow run's summary line; the solve's in a pressure run's.
LOOP = re.compile(r"steps to t = [0-9.eE+-]+ s in ([0-9.]+) s")
SOLVE = re.compile(r"solve ([0-9.]+) s")


def run(root, args, ranks, out):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    cmd = [sys.executable, "-m", "bubbleflow", "run", *args, "-o", out, "--no-progress"]
    if ranks > 1:
        cmd = [find_mpiexec() or "mpiexec", "-n", str(ranks)] + cmd
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or [""]
        sys.exit(f"{root}: {' '.join(cmd)}: exit {proc.returncode}: {lines[-1]}")
    found = LOOP.search(proc.stdout) or SOLVE.search(proc.stdout)
    return wall, float(found.group(1)) if found else float("nan")


def main():
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base")
    p.add_argument("head")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--ranks", type=int, nargs="+", default=[1],
                   help="launches: 1 is one process, N > 1 mpiexec -n N (default 1)")
    p.add_argument("--head-set", action="append", default=[], metavar="KEY=VALUE")
    opts = p.parse_args(argv[:split])
    args = argv[split + 1:]
    if not args:
        p.error("give the case and its run arguments after --")
    head_args = args + [a for kv in opts.head_set for a in ("--set", kv)]
    launches = sorted(set(opts.ranks))
    if launches[0] < 1:
        p.error(f"--ranks: {launches[0]} is not a rank count (expected 1 or more)")
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(opts.rounds):
            for ranks in launches:
                for name, root, these in (("base", opts.base, args), ("head", opts.head,
                                                                      head_args)):
                    out = os.path.join(tmp, f"{name}{ranks}_{r}")
                    figures.setdefault((ranks, name), []).append(run(root, these, ranks, out))
    print(f"# bubbleflow run {' '.join(args)}"
          + (f" (head also: {' '.join(opts.head_set)})" if opts.head_set else "")
          + f": best of {opts.rounds} alternating rounds, s")
    print(f"{'ranks':>5s} {'figure':8s} {'base':>9s} {'head':>9s} {'head/base':>9s} "
          f"{'base rounds':>24s} {'head rounds':>24s}")
    for ranks in launches:
        for k, what in enumerate(("command", "loop")):
            b = [f[k] for f in figures[(ranks, "base")]]
            h = [f[k] for f in figures[(ranks, "head")]]
            print(f"{ranks:5d} {what:8s} {min(b):9.2f} {min(h):9.2f} {min(h) / min(b):9.3f} "
                  f"{' / '.join(f'{v:.2f}' for v in b):>24s} "
                  f"{' / '.join(f'{v:.2f}' for v in h):>24s}")


if __name__ == "__main__":
    main()
