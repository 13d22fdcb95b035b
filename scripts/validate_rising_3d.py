"""Validate the 3-D flow on the 3-D rising bubble, test case 1 (Adelsberger et al. 2014).

For each resolution N (cells per unit length: N x N x 2N on [0,1]^2 x [0,2])
this uses ``OUTDIR/rising_bubble_3d_h{N}.h5`` if it exists (unless
``--rerun``), else runs::

    bubbleflow run cases/rising_bubble_3d.yaml -o OUTDIR --set grid.nx=N --set grid.ny=N \
        --set grid.nz=2N --set name=rising_bubble_3d_h{N} --no-progress [--backend B]

then prints, per resolution, the benchmark quantities against the spread of
the three published codes (bubbleflow/data/adelsberger2014_case1.csv) and
the run's wall time, and writes a plot of rise velocity, sphericity and
centroid height against time with the codes' extreme values marked.

    python3 scripts/validate_rising_3d.py [--resolutions 32 64] [--outdir outputs/rising3d]
                                          [--backend auto|numpy|cupy] [--rerun]
                                          [--method levelset|clsvof] [--plot FILE.png]

(with ``--method clsvof`` the runs are ``rising_bubble_3d_clsvof_h{N}``).

Exit code 0 when the finest resolution lies within the codes' spread for
every judged quantity (largest rise velocity, smallest sphericity, centroid
at t = 3), 1 otherwise.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:           # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from bubbleflow.apps.validation_3d import (benchmark_quantities, compare,  # noqa: E402
                                           load_reference, read_run)

CASE = ROOT / "cases" / "rising_bubble_3d.yaml"


def ensure_run(n, outdir, backend=None, rerun=False, method="levelset"):
    """The run file of resolution ``n`` and interface ``method``, running the
    case if needed."""
    name = f"rising_bubble_3d_h{n}" if method == "levelset" else f"rising_bubble_3d_{method}_h{n}"
    path = Path(outdir) / f"{name}.h5"
    if path.exists() and not rerun:
        return path
    cmd = [sys.executable, "-m", "bubbleflow.apps.cli", "run", str(CASE), "-o", str(outdir),
           "--set", f"grid.nx={n}", "--set", f"grid.ny={n}", "--set", f"grid.nz={2 * n}",
           "--set", f"name={name}", "--set", f"levelset.method={method}", "--no-progress"]
    if backend:
        cmd += ["--backend", backend]
    if rerun:
        cmd.append("--overwrite")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(cmd, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise SystemExit(f"error: the run at N = {n} failed (exit {done.returncode})")
    return path


def plot(runs, path):
    """Rise velocity, sphericity and centroid against time, per resolution,
    with the codes' extreme values as markers."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ref = load_reference()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for n, series in runs:
        for ax, key in zip(axes, ("rise_velocity", "sphericity", "centroid_z")):
            ax.plot(series["time"], series[key], label=f"bubbleflow, h = 1/{n}")
    markers = ("o", "s", "^")
    for (code, row), m in zip(ref.items(), markers):
        axes[0].plot(row["t_max_rise_velocity"], row["max_rise_velocity"], m, mfc="none",
                     color="k", label=f"{code} (max)")
        axes[1].plot(row["t_min_sphericity"], row["min_sphericity"], m, mfc="none", color="k",
                     label=f"{code} (min)")
        axes[2].plot(row["t_centroid_end"], row["centroid_end"], m, mfc="none", color="k",
                     label=f"{code} (t = 3)")
    for ax, label in zip(axes, ("rise velocity (m/s)", "sphericity", "centroid height (m)")):
        ax.set_xlabel("t (s)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("3-D rising bubble, test case 1 (Adelsberger et al. 2014)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resolutions", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--outdir", default="outputs/rising3d")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--rerun", action="store_true")
    ap.add_argument("--method", choices=("levelset", "clsvof"), default="levelset",
                    help="the interface method (levelset.method)")
    ap.add_argument("--plot", default=None, help="PNG file (default OUTDIR/rising_bubble_3d.png)")
    args = ap.parse_args(argv)
    os.makedirs(args.outdir, exist_ok=True)
    runs, ok = [], True
    for n in sorted(args.resolutions):
        series = read_run(ensure_run(n, args.outdir, args.backend, args.rerun, args.method))
        runs.append((n, series))
        q = benchmark_quantities(series)
        print(f"\nh = 1/{n} ({' x '.join(map(str, series['cells']))} cells), wall "
              f"{series['wall_seconds']:.1f} s, volume change {q['volume_change']:+.2e}")
        rows = compare(q)
        for row in rows:
            print("  " + str(row))
        ok = all(r.within for r in rows if r.judged)
    out = args.plot or os.path.join(args.outdir, "rising_bubble_3d.png")
    plot(runs, out)
    print(f"\nplot: {out}")
    print("finest resolution within the published codes' spread" if ok
          else "finest resolution OUTSIDE the published codes' spread")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
