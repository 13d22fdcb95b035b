"""Validate the flow solver on the Hysing et al. (2009) rising bubble, test case 1.

For each resolution N (cells per unit length: nx = N, ny = 2 N on [0,1]x[0,2])
this uses ``OUTDIR/hysing_h{N}.h5`` if it exists (unless ``--rerun``), else
runs::

    bubbleflow run cases/two_phase.yaml -o OUTDIR --set grid.nx=N --set grid.ny=2N \
        --set name=hysing_h{N} --no-progress [--backend B]

(as ``python -m bubbleflow.apps.cli run ...`` with this interpreter), prints the
benchmark table with the published TP2D reference row and the pass/fail of
each acceptance bound, and writes an overlay plot of rise velocity,
circularity and centroid against the TP2D, FreeLIFE and MooNMD curves.

    python3 scripts/validate_hysing.py [--resolutions 40 80 [160]] [--outdir outputs/hysing]
                                       [--backend auto|numpy|cupy] [--rerun] [--plot FILE.png]

Exit code 0 when every acceptance bound holds at the finest resolution,
1 otherwise (including a failed or unusable run, reported as ``error: ...``).
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:           # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from bubbleflow.apps.validation import (REFERENCE, REFERENCE_GROUPS, acceptance_factor,  # noqa: E402
                                   benchmark_quantities, compare, load_reference, read_run)

DEFAULT_CASE = ROOT / "cases" / "two_phase.yaml"


class ValidationError(RuntimeError):
    """A run could not be produced or read."""


def run_name(n):
    return f"hysing_h{n}"


def run_command(case, outdir, n, backend=None, overwrite=False):
    """The ``bubbleflow run`` command line for resolution ``n``."""
    cmd = [sys.executable, "-m", "bubbleflow.apps.cli", "run", str(case), "-o", str(outdir),
           "--set", f"grid.nx={n}", "--set", f"grid.ny={2 * n}",
           "--set", f"name={run_name(n)}", "--no-progress"]
    if backend:
        cmd += ["--backend", backend]
    if overwrite:
        cmd.append("--overwrite")        # --rerun: the old file stays until the new run ends
    return cmd


def ensure_run(n, outdir, case, backend=None, rerun=False):
    """Path of the run file for resolution ``n``, running the solver if needed."""
    path = Path(outdir) / f"{run_name(n)}.h5"
    if path.exists() and not rerun:
        print(f"[h = 1/{n}] using existing {path}", flush=True)
        return path
    if not Path(case).exists():
        raise ValidationError(f"case file {case} not found (needed to run resolution {n})")
    cmd = run_command(case, outdir, n, backend, overwrite=rerun and path.exists())
    print(f"[h = 1/{n}] running: {' '.join(cmd)}", flush=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    # Output is inherited, i.e. streamed live to this terminal.
    proc = subprocess.run(cmd, cwd=str(ROOT), env=env)
    if proc.returncode != 0:
        raise ValidationError(f"bubbleflow run for resolution {n} failed with exit code "
                              f"{proc.returncode}: {' '.join(cmd)}")
    if not path.exists():
        raise ValidationError(f"bubbleflow run for resolution {n} succeeded but wrote no {path}")
    return path


def load(n, path):
    """read_run + benchmark_quantities, with the resolution checked."""
    try:
        run = read_run(path)
    except (OSError, ValueError, KeyError) as exc:
        raise ValidationError(f"cannot read {path}: {exc} (use --rerun to recompute)") from None
    if run["mode"] not in (None, "flow"):
        raise ValidationError(f"{path}: mode is {run['mode']!r}, not 'flow' (use --rerun)")
    if run["nx"] is not None and (run["nx"], run["ny"]) != (n, 2 * n):
        raise ValidationError(f"{path}: grid is {run['nx']} x {run['ny']}, expected "
                              f"{n} x {2 * n} (use --rerun)")
    run["quantities"] = benchmark_quantities(**run["diagnostics"])
    run["resolution"] = n
    return run


# --------------------------------------------------------------------------
# Table
# --------------------------------------------------------------------------
def _f(value, fmt):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def _seconds(value):
    if value is None:
        return "-"
    if value >= 3600:
        return f"{value / 3600:.2f} h"
    if value >= 60:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s"


TABLE_HEAD = ("h", "max rise vel. (t)", "min circ. (t)", "y_c(t=3)", "area chg %",
              "steps", "mean p-its", "wall", "p-solve %")
TABLE_FMT = "{:>7s} {:>18s} {:>18s} {:>9s} {:>10s} {:>7s} {:>10s} {:>9s} {:>9s}"


def format_table(runs):
    lines = [TABLE_FMT.format(*TABLE_HEAD), "-" * 105]
    for run in runs:
        q, s = run["quantities"], run["solver"]
        share = s["pressure_share"]
        lines.append(TABLE_FMT.format(
            f"1/{run['resolution']}",
            f"{_f(q['max_rise_velocity'], '.4f')} ({_f(q['max_rise_velocity_time'], '.3f')})",
            f"{_f(q['min_circularity'], '.4f')} ({_f(q['min_circularity_time'], '.3f')})",
            _f(q["centroid_y_end"], ".4f"),
            _f(100.0 * q["area_change"], "+.3f"),
            str(s["steps"]),
            _f(s["mean_iterations"], ".1f"),
            _seconds(run["wall_seconds"]),
            _f(None if share is None else 100.0 * share, ".1f")))
    lines.append(TABLE_FMT.format(
        "TP2D",
        f"{REFERENCE['max_rise_velocity']:.4f} ({REFERENCE['max_rise_velocity_time']:.3f})",
        f"{REFERENCE['min_circularity']:.4f} ({REFERENCE['min_circularity_time']:.3f})",
        f"{REFERENCE['centroid_y_end']:.4f}", "0", "", "", "", ""))
    return "\n".join(lines)


def format_checks(run, rows, factor):
    out = [f"acceptance at h = 1/{run['resolution']} (bounds x{factor:g}):"]
    for r in rows:
        if r.kind == "relative":
            diff, bound = f"{100 * r.difference:.2f} %", f"{100 * r.bound:.2f} %"
        else:
            diff, bound = f"{r.difference:.4f}", f"{r.bound:.4f}"
        out.append(f"  {r.quantity:24s} ours {_f(r.ours, '.5f'):>9s}  ref {r.reference:.4f}  "
                   f"diff {diff:>9s} <= {bound:>8s}  {'PASS' if r.passed else 'FAIL'}")
    return "\n".join(out)


# --------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------
def plot(runs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("rise_velocity", "rise velocity (m/s)"),
              ("circularity", "circularity (-)"),
              ("centroid_y", "centroid y (m)"))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), constrained_layout=True)
    ref_styles = {"tp2d": "k", "freelife": "tab:gray", "moonmd": "tab:brown"}
    for key, (_, label) in REFERENCE_GROUPS.items():
        ref = load_reference(key)
        for ax, (name, _) in zip(axes, panels):
            ax.plot(ref["time"], ref[name], "--", color=ref_styles.get(key), lw=1.2, label=label)
    for run in runs:
        d = run["diagnostics"]
        for ax, (name, _) in zip(axes, panels):
            ax.plot(d["time"], d[name], "-", lw=1.6, label=f"bubbleflow h = 1/{run['resolution']}")
    for ax, (_, ylabel) in zip(axes, panels):
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle("Rising bubble, Hysing et al. (2009) test case 1: bubbleflow vs. reference")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------
def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--resolutions", type=int, nargs="+", default=[40, 80], metavar="N",
                   help="cells per unit length (nx = N, ny = 2N); default 40 80")
    p.add_argument("--outdir", default="outputs/hysing", help="run files folder [outputs/hysing]")
    p.add_argument("--backend", choices=("auto", "numpy", "cupy"), default=None,
                   help="backend of new runs (default: the case's)")
    p.add_argument("--case", default=str(DEFAULT_CASE), help="case file [cases/two_phase.yaml]")
    p.add_argument("--rerun", action="store_true", help="run even if the file exists")
    p.add_argument("--plot", default=None, metavar="FILE.png",
                   help="overlay plot [OUTDIR/hysing_case1.png]")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if any(n < 4 for n in args.resolutions):
        print("error: --resolutions must be >= 4", file=sys.stderr)
        return 1
    resolutions = sorted(set(args.resolutions))
    outdir = Path(args.outdir)
    try:
        runs = [load(n, ensure_run(n, outdir, args.case, args.backend, args.rerun))
                for n in resolutions]
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1

    print()
    print("Hysing et al. (2009) test case 1")
    print(format_table(runs))
    print()
    all_ok = {}
    for run in runs:
        factor = acceptance_factor(run["h"] if run["h"] is not None else 1.0 / run["resolution"])
        rows = compare(run["quantities"], factor=factor)
        all_ok[run["resolution"]] = all(r.passed for r in rows)
        print(format_checks(run, rows, factor))
    plot_path = plot(runs, args.plot or outdir / "hysing_case1.png")
    print(f"\nplot: {plot_path}")
    finest = resolutions[-1]
    verdict = "PASS" if all_ok[finest] else "FAIL"
    print(f"finest resolution h = 1/{finest}: {verdict}")
    return 0 if all_ok[finest] else 1


if __name__ == "__main__":
    sys.exit(main())
