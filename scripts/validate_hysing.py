"""Validate the flow solver on the Hysing et al. (2009) rising bubble, test case 1 or 2.

For each resolution N (cells per unit length: nx = N, ny = 2 N on [0,1]x[0,2])
this uses ``OUTDIR/hysing_h{N}.h5`` (test case 2: ``OUTDIR/hysing2_h{N}.h5``;
``--name-suffix S`` appends S) if it exists (unless ``--rerun``), else runs::

    bubbleflow run cases/two_phase.yaml -o OUTDIR --set grid.nx=N --set grid.ny=2N \
        --set name=hysing_h{N} [--set KEY=VALUE ...] --no-progress [--backend B]

(test case 2: ``cases/hysing_case2.yaml``, ``name=hysing2_h{N}``; as
``python -m bubbleflow.apps.cli run ...`` with this interpreter), prints the
benchmark table with the published reference rows (case 1: TP2D; case 2: TP2D,
FreeLIFE and MooNMD, and the second rise-velocity maximum) and the pass/fail of
each acceptance bound (case 1: distance to TP2D; case 2: inside the groups'
range widened by the bound), and writes an overlay plot of rise velocity,
circularity and centroid against the TP2D, FreeLIFE and MooNMD curves.

    python3 scripts/validate_hysing.py [--test-case 1|2] [--resolutions 40 80 [160]]
                                       [--outdir outputs/hysing] [--backend auto|numpy|cupy]
                                       [--set KEY=VALUE ...] [--name-suffix S]
                                       [--rerun] [--plot FILE.png]

An existing run file is used as it is: runs with different ``--set`` values
need a different ``--name-suffix`` or ``--outdir`` (or ``--rerun``); a file
whose case contradicts a ``--set`` is reported with a warning.

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

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:           # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from bubbleflow.apps.validation import (acceptance_factor, benchmark,  # noqa: E402
                                   benchmark_quantities, compare, group_range, load_reference,
                                   nested, read_run)

#: Run-name prefix per test case (``{prefix}_h{N}``).
RUN_PREFIX = {1: "hysing", 2: "hysing2"}

#: Keys the script sets itself (not allowed in ``--set``).
OWN_KEYS = ("grid.nx", "grid.ny", "name")


class ValidationError(RuntimeError):
    """A run could not be produced or read."""


def run_name(n, test_case=1, suffix=""):
    return f"{RUN_PREFIX[test_case]}_h{n}{suffix}"


def run_command(case, outdir, n, backend=None, overwrite=False, sets=(), name=None):
    """The ``bubbleflow run`` command line for resolution ``n``."""
    cmd = [sys.executable, "-m", "bubbleflow.apps.cli", "run", str(case), "-o", str(outdir),
           "--set", f"grid.nx={n}", "--set", f"grid.ny={2 * n}",
           "--set", f"name={name or run_name(n)}"]
    for item in sets:
        cmd += ["--set", item]
    cmd.append("--no-progress")
    if backend:
        cmd += ["--backend", backend]
    if overwrite:
        cmd.append("--overwrite")        # --rerun: the old file stays until the new run ends
    return cmd


def ensure_run(n, outdir, case, backend=None, rerun=False, sets=(), name=None):
    """Path of the run file for resolution ``n``, running the solver if needed."""
    name = name or run_name(n)
    path = Path(outdir) / f"{name}.h5"
    if path.exists() and not rerun:
        print(f"[h = 1/{n}] using existing {path}", flush=True)
        return path
    if not Path(case).exists():
        raise ValidationError(f"case file {case} not found (needed to run resolution {n})")
    cmd = run_command(case, outdir, n, backend, overwrite=rerun and path.exists(), sets=sets,
                      name=name)
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


def set_item(text):
    """``--set KEY=VALUE`` (argparse type): the item, checked."""
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    if key.strip() in OWN_KEYS:
        raise argparse.ArgumentTypeError(f"{key.strip()} is set by this script "
                                         f"(use --resolutions)")
    return text


def check_sets(run, sets):
    """Warn where an existing run's case contradicts a ``--set`` item."""
    for item in sets:
        key, _, value = item.partition("=")
        have = nested(run["case"] or {}, key.strip())
        try:
            want = yaml.safe_load(value)
        except yaml.YAMLError:
            want = value
        if have is not None and have != want:
            print(f"warning: {run['path']} has {key.strip()} = {have!r}, --set asks {want!r} "
                  f"(use --rerun, --name-suffix or another --outdir)", file=sys.stderr, flush=True)


def load(n, path, test_case=1):
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
    run["quantities"] = benchmark_quantities(**run["diagnostics"], case=test_case)
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
SECOND_HEAD = "2nd max r.v. (t)"      # case 2's extra column, after the first maximum


def _layout(test_case):
    """Header and format of the table: case 1's, with the second rise-velocity
    maximum where the case has one and a first column wide enough for the
    groups' names."""
    bench = benchmark(test_case)
    head, widths = list(TABLE_HEAD), [7, 18, 18, 9, 10, 7, 10, 9, 9]
    if bench.split_time is not None:
        head.insert(2, SECOND_HEAD)
        widths.insert(2, 18)
    widths[0] = max([7] + [len(_group_name(bench, k)) for k in bench.values])
    return head, " ".join("{:>%ds}" % w for w in widths)


def _group_name(bench, key):
    return bench.groups[key][1].split(" (")[0]


def _pair(q, name):
    return f"{_f(q.get(name), '.4f')} ({_f(q.get(name + '_time'), '.3f')})"


def format_table(runs, test_case=1):
    bench = benchmark(test_case)
    head, fmt = _layout(test_case)
    second = bench.split_time is not None
    header = fmt.format(*head)
    lines = [header, "-" * len(header)]
    for run in runs:
        q, s = run["quantities"], run["solver"]
        share = s["pressure_share"]
        cells = [f"1/{run['resolution']}", _pair(q, "max_rise_velocity")]
        cells += [_pair(q, "second_max_rise_velocity")] if second else []
        cells += [_pair(q, "min_circularity"), _f(q["centroid_y_end"], ".4f"),
                  _f(100.0 * q["area_change"], "+.3f"), str(s["steps"]),
                  _f(s["mean_iterations"], ".1f"), _seconds(run["wall_seconds"]),
                  _f(None if share is None else 100.0 * share, ".1f")]
        lines.append(fmt.format(*cells))
    for key, ref in bench.values.items():
        cells = [_group_name(bench, key), _pair(ref, "max_rise_velocity")]
        cells += [_pair(ref, "second_max_rise_velocity")] if second else []
        area = ref.get("area_change")
        cells += [_pair(ref, "min_circularity"), _f(ref.get("centroid_y_end"), ".4f"),
                  "" if area is None else format(area, "g"), "", "", "", ""]
        lines.append(fmt.format(*cells))
    return "\n".join(lines)


def _amount(value, kind):
    return f"{100 * value:.2f} %" if kind == "relative" else f"{value:.4f}"


def format_checks(run, rows, factor, test_case=1):
    spread = any(r.spread for r in rows)
    what = "groups' range widened by the bounds" if spread else "bounds"
    out = [f"acceptance at h = 1/{run['resolution']} ({what} x{factor:g}):"]
    width = max([24] + [len(r.quantity) for r in rows])
    for r in rows:
        diff, bound = _amount(r.difference, r.kind), _amount(r.bound, r.kind)
        verdict = "PASS" if r.passed else "FAIL"
        if r.spread:
            low, high = group_range(r.quantity, test_case)
            out.append(f"  {r.quantity:{width}s} ours {_f(r.ours, '.5f'):>9s}  "
                       f"range [{low:.4f}, {high:.4f}]  beyond {diff:>9s} <= {bound:>8s}  "
                       f"{verdict}")
        else:
            out.append(f"  {r.quantity:{width}s} ours {_f(r.ours, '.5f'):>9s}  "
                       f"ref {r.reference:.4f}  diff {diff:>9s} <= {bound:>8s}  {verdict}")
    return "\n".join(out)


# --------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------
def plot(runs, path, test_case=1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("rise_velocity", "rise velocity (m/s)"),
              ("circularity", "circularity (-)"),
              ("centroid_y", "centroid y (m)"))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), constrained_layout=True)
    ref_styles = {"tp2d": "k", "freelife": "tab:gray", "moonmd": "tab:brown"}
    for key, (_, label) in benchmark(test_case).groups.items():
        ref = load_reference(key, case=test_case)
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
    fig.suptitle(f"Rising bubble, Hysing et al. (2009) test case {test_case}: "
                 f"bubbleflow vs. reference")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------
def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--test-case", type=int, choices=sorted(RUN_PREFIX), default=1,
                   help="benchmark test case [1]; 2 runs cases/hysing_case2.yaml as hysing2_h{N}")
    p.add_argument("--resolutions", type=int, nargs="+", default=[40, 80], metavar="N",
                   help="cells per unit length (nx = N, ny = 2N); default 40 80")
    p.add_argument("--outdir", default="outputs/hysing", help="run files folder [outputs/hysing]")
    p.add_argument("--backend", choices=("auto", "numpy", "cupy"), default=None,
                   help="backend of new runs (default: the case's)")
    p.add_argument("--case", default=None,
                   help="case file [cases/two_phase.yaml; test case 2: cases/hysing_case2.yaml]")
    p.add_argument("--set", dest="sets", action="append", default=[], type=set_item,
                   metavar="KEY=VALUE",
                   help="passed to bubbleflow run (repeatable), e.g. --set levelset.method=clsvof; "
                        "an existing run file is reused whatever its sets: give runs with "
                        "different sets a different --name-suffix or --outdir (or --rerun)")
    p.add_argument("--name-suffix", default="", metavar="S",
                   help="appended to the run names (hysing_h{N}S), e.g. _clsvof")
    p.add_argument("--rerun", action="store_true", help="run even if the file exists")
    p.add_argument("--plot", default=None, metavar="FILE.png",
                   help="overlay plot [OUTDIR/hysing_case1.png; test case 2: "
                        "OUTDIR/hysing_case2.png]")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if any(n < 4 for n in args.resolutions):
        print("error: --resolutions must be >= 4", file=sys.stderr)
        return 1
    tc = args.test_case
    case = args.case or str(ROOT / benchmark(tc).case_file)
    resolutions = sorted(set(args.resolutions))
    outdir = Path(args.outdir)
    try:
        runs = []
        for n in resolutions:
            name = run_name(n, tc, args.name_suffix)
            reused = (outdir / f"{name}.h5").exists() and not args.rerun
            path = ensure_run(n, outdir, case, args.backend, args.rerun, sets=args.sets, name=name)
            runs.append(load(n, path, tc))
            if reused:
                check_sets(runs[-1], args.sets)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1

    print()
    print(f"Hysing et al. (2009) test case {tc}")
    print(format_table(runs, tc))
    print()
    all_ok = {}
    for run in runs:
        factor = acceptance_factor(run["h"] if run["h"] is not None else 1.0 / run["resolution"])
        rows = compare(run["quantities"], factor=factor, case=tc)
        all_ok[run["resolution"]] = all(r.passed for r in rows)
        print(format_checks(run, rows, factor, tc))
    plot_path = plot(runs, args.plot or outdir / f"hysing_case{tc}.png", tc)
    print(f"\nplot: {plot_path}")
    finest = resolutions[-1]
    verdict = "PASS" if all_ok[finest] else "FAIL"
    print(f"finest resolution h = 1/{finest}: {verdict}")
    return 0 if all_ok[finest] else 1


if __name__ == "__main__":
    sys.exit(main())
