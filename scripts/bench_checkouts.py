"""Two checkouts' benchmarks side by side, in one run: a table of ratios.

    python3 scripts/bench_checkouts.py BASE_ROOT HEAD_ROOT [--rounds K] -- BENCH ARGS ...

Runs ``python3 -m bubbleflow bench BENCH ARGS --csv FILE`` with each
checkout first on ``PYTHONPATH`` (a git worktree or an exported tree of the
base), the two alternating for ``--rounds`` rounds (default 2) so that a
drift of the machine shows in both; prints per row of the bench's CSV (a
flow phase, a solver configuration) the best of the rounds of each and
their ratio head / base.  The columns compared: ``median_ms`` of the flow
phases (``bench --flow``), ``solve_ms`` and ``total_ms`` of the pressure
solves.  Rounds of one checkout differing more than the two checkouts do
say the difference is noise.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

#: The CSV columns that identify a row, and those compared.
KEYS = ("case", "nx", "ny", "nz", "phase", "size", "contrast", "config")
TIMES = ("median_ms", "solve_ms", "total_ms")


def run(root, args, path):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    cmd = [sys.executable, "-m", "bubbleflow", "bench", *args, "--csv", path, "--no-progress"]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{root}: bench failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def keyed(rows):
    out = {}
    for row in rows:
        key = tuple(row.get(k, "") for k in KEYS if row.get(k, "") != "")
        out[key] = {t: float(row[t]) for t in TIMES if row.get(t) not in (None, "")}
    return out


def main():
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("base")
    p.add_argument("head")
    p.add_argument("--rounds", type=int, default=2)
    opts = p.parse_args(argv[:split])
    bench = argv[split + 1:]
    best = {"base": {}, "head": {}}
    spread = {"base": {}, "head": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(opts.rounds):
            for name in ("base", "head"):
                rows = keyed(run(getattr(opts, name), bench, os.path.join(tmp, f"{name}{r}.csv")))
                for key, times in rows.items():
                    for t, v in times.items():
                        seen = spread[name].setdefault((key, t), [])
                        seen.append(v)
                        best[name][(key, t)] = min(seen)
    print(f"# bench {' '.join(bench)}: best of {opts.rounds} alternating rounds, ms")
    print(f"{'row':60s} {'column':10s} {'base':>10s} {'head':>10s} {'head/base':>9s} "
          f"{'base spread':>11s} {'head spread':>11s}")
    for (key, t), b in best["base"].items():
        h = best["head"].get((key, t))
        if h is None:
            continue
        sb, sh = (max(s) / min(s) - 1 if min(s) > 0 else 0.0
                  for s in (spread["base"][(key, t)], spread["head"][(key, t)]))
        print(f"{' '.join(key)[:60]:60s} {t:10s} {b:10.3f} {h:10.3f} {h / b:9.3f} "
              f"{sb:10.1%} {sh:10.1%}")


if __name__ == "__main__":
    main()
