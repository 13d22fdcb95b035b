"""Fingerprints of bubbleflow's answers, to show that a refactor changes no bit.

    python3 scripts/fingerprint.py BACKEND OUT.json [PKGROOT] [--quick]
    python3 scripts/fingerprint_compare.py BASE.json NEW.json

PKGROOT (default .) is the checkout fingerprinted: it goes first on sys.path
here and on PYTHONPATH in the runs this script starts, so that a base
checkout (a git worktree) and the refactored one are fingerprinted by the
same script.  Answers are hashed bit for bit (SHA-256 of their bytes, 16 hex
digits); iteration and step counts are kept as numbers beside the hashes, so
that a difference shows where it starts.

One JSON entry per key:

``N CONTRAST STORAGE METHOD PRECONDITIONER DEFLATION VARIANT``
    A PressureSolver on the 2-D bubbly-column matrix, solved twice (the
    second time with x0 and a right-hand side off the null space):
    iterations, residual, stop reason, engine, the two answers and the
    residual history.  Covers the solver choices, both storages, assembly.
``cg jacobi 64``, ``dpcg ips 64``
    The SciPy-style functions.
``flow``
    The default two_phase case for 0.05 s through the CLI: every dataset of
    its result file (strings as "str").
``flow DIM CASE METHOD LAUNCH``
    Coarse flows of a few adaptive steps (so the step-size code counts too):
    2-D two_phase and bubbly_column_flow, 3-D rising_bubble_3d and
    bubbly_column_3d_flow, with the level set and with CLSVOF, each run by the
    CLI as one process (LAUNCH ``serial``) and under ``mpiexec -n N``
    (``ranks=N``, N = 1, 2, 4: the slab decomposition and its halo
    exchanges).  Recorded from the result file: the final snapshot of every
    field, every per-step diagnostic, every per-step solver record, the case
    as the run read it, the run's status, and the steps and pressure
    iterations in plain.

Left out, because two runs of one checkout differ in them: timings (names
with ``seconds`` or ``wall``), run stamps (created, run_id, the snapshot
directory, the device, the version) and the output directory.

``--quick`` (1-3 minutes on 2 cores, as busy as they are) keeps the solves
of N = 64 (contrast 1e3, diagonals) and N = 128 (contrast 1e5, matrix-free),
the SciPy-style functions, ``flow``, and every coarse flow as one process
and under ``mpiexec -n 2`` and ``-n 4``; the full run (3-8 minutes) adds the
solves of N = 128 (contrast 1e3, diagonals) and N = 256, and ``-n 1``.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

#: (method, preconditioner, deflation, variant) of the PressureSolver records.
SOLVER_CHOICES = [
    ("cg", "none", "none", "adef2"),
    ("pcg", "jacobi", "none", "adef2"),
    ("pcg", "incomplete_poisson_scaled", "none", "adef2"),
    ("pcg", "block_ic", "none", "adef2"),
    ("pcg", "incomplete_poisson", "none", "adef2"),
    ("dpcg", "jacobi", "subdomains", "adef2"),
    ("dpcg", "incomplete_poisson_scaled", "levelset_subdomains", "adef2"),
    ("dpcg", "block_ic", "levelset_subdomains", "adef2"),
    ("dpcg", "jacobi", "stripes", "adef2"),
    ("dpcg", "incomplete_poisson_scaled", "levelset_subdomains", "def1"),
    ("dpcg", "jacobi", "levelset_subdomains", "adef2"),
]
#: (n, contrast, storage) of the bubbly-column matrices; the quick run's
#: still have both storages and both contrasts.
SOLVE_PROBLEMS = [(64, 1e3, "diagonals"), (128, 1e3, "diagonals"),
                  (128, 1e5, "matrix_free"), (256, 1e3, "diagonals")]
QUICK_SOLVE_PROBLEMS = [(64, 1e3, "diagonals"), (128, 1e5, "matrix_free")]

#: The coarse flows: case -> (dimension, settings).  Each runs 4-6 adaptive
#: steps, with a snapshot half way through and a reinitialisation every 2
#: steps.  The vertical axis (the ranks' slab axis) has the planes CLSVOF
#: needs on 4 ranks: 13 a rank, and multigrid's slab edges on multiples of 8
#: take 64.  So the cells are flatter than wide (hz = hx / 2 in 3-D; a
#: spacing differing by axis also shows axes swapped).  The columns' steps
#: are capped: at the gravity-limited first step CLSVOF's volume fraction
#: leaves [0, 1].
FLOW_CASES = {
    "two_phase": ("2d", {"grid.nx": 20, "grid.ny": 52, "time.end": 0.08}),
    "bubbly_column_flow": ("2d", {"grid.nx": 32, "grid.ny": 64, "time.end": 0.04,
                                  "time.dt_max": 0.01}),
    "rising_bubble_3d": ("3d", {"grid.nx": 16, "grid.ny": 16, "grid.nz": 64, "time.end": 0.05}),
    "bubbly_column_3d_flow": ("3d", {"grid.nx": 16, "grid.ny": 16, "grid.nz": 64,
                                     "time.end": 0.015, "time.dt_max": 0.01}),
}
INTERFACE_METHODS = ("levelset", "clsvof")
#: Launches of each coarse flow: None is one process, N is ``mpiexec -n N``
#: (2 ranks have only edge slabs, 4 have slabs with two neighbours).
LAUNCHES = (None, 1, 2, 4)
QUICK_LAUNCHES = (None, 2, 4)
#: Result-file attributes that are part of the answer (the others are stamps).
RUN_ATTRIBUTES = ("backend", "precision", "mode", "face_density", "run_status")
#: Seconds one flow run may take before it is counted as failed.
RUN_TIMEOUT = 600


def array_hash(a):
    """16 hex digits of the SHA-256 of an array's bytes (host copy, C order)."""
    a = np.ascontiguousarray(np.asarray(a.get() if hasattr(a, "get") else a))
    return hashlib.sha256(a.tobytes()).hexdigest()[:16]


def dataset_hash(values):
    """A dataset's hash with its dtype and shape (so that a reshaped or
    retyped answer with the same bytes differs); strings hashed as text."""
    values = np.asarray(values)
    if values.dtype.kind in "OSU":
        text = "\n".join(v.decode() if isinstance(v, bytes) else str(v) for v in values.ravel())
        return f"{hashlib.sha256(text.encode()).hexdigest()[:16]} str{values.shape}"
    return f"{array_hash(values)} {values.dtype}{values.shape}"


def is_timing(name):
    """Whether a dataset or attribute is a timing, different in every run."""
    return "seconds" in name or "wall" in name


def solve_records(bf, backend, problems):
    """The PressureSolver records, one per problem and solver choice."""
    records = {}
    for n, contrast, storage in problems:
        A, b, phi = bf.bubbly_column(n, contrast, backend=backend, storage=storage)
        for method, M, deflation, variant in SOLVER_CHOICES:
            if n == 256 and method == "cg":      # tens of thousands of iterations
                continue
            start = time.perf_counter()
            solver = bf.PressureSolver(A, method=method, preconditioner=M, deflation=deflation,
                                       phi=phi, subdomains=(8, 8), variant=variant,
                                       rtol=1e-9, maxiter=20000)
            x, r = solver.solve(b)
            # A second solve on the same object, from x0: the reuse of its setup.
            # Its right-hand side is off the null space on purpose (the
            # projection counts too), so the solver's warning says nothing new.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*constant null space")
                x2, r2 = solver.solve(b * 0.5 + 1e-3, x0=x)
            key = f"{n} {contrast:g} {storage} {method} {M} {deflation} {variant}"
            records[key] = dict(it=r.iterations, it2=r2.iterations, res=repr(r.residual),
                                reason=r.reason, engine=r.engine, x=array_hash(x),
                                x2=array_hash(x2), hist=array_hash(r.residual_history))
            print(f"{key}: {r.iterations} {r2.iterations} iterations, {r.engine}, "
                  f"{time.perf_counter() - start:.2f} s", flush=True)
    return records


def function_records(bf, backend):
    """The SciPy-style functions on the 64 x 64 column."""
    A, b, phi = bf.bubbly_column(64, 1e3, backend=backend)
    x, r = bf.cg(A, b, rtol=1e-8, M="jacobi")
    records = {"cg jacobi 64": dict(it=r.iterations, x=array_hash(x))}
    deflation = bf.make_deflation("subdomains", A, subdomains=(8, 8))
    x, r = bf.dpcg(A, b, rtol=1e-8, M="incomplete_poisson_scaled", deflation=deflation)
    records["dpcg ips 64"] = dict(it=r.iterations, x=array_hash(x))
    return records


def cli_module(root):
    """The module that runs the command line in the checkout at ``root``."""
    if os.path.exists(os.path.join(root, "bubbleflow", "apps", "cli.py")):
        return "bubbleflow.apps.cli"
    return "bubbleflow"


def child_env(root):
    """The environment of a run: the checkout at ``root`` first on its path."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


def mpiexec():
    """The ``mpiexec`` beside this Python (the test extras' MPICH), else the
    one on ``PATH``."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.path.exists(beside) else shutil.which("mpiexec") or beside


def run_flow(root, backend, case_file, settings, ranks, out_dir):
    """Run a case through the CLI into ``out_dir``: ``(result, failure)``, the
    path of its result file (None if it wrote none) and, if the run failed, a
    line saying how."""
    cmd = [sys.executable, "-m", cli_module(root), "run", case_file, "-o", out_dir,
           "--backend", backend, "--quiet", "--no-progress"]
    for key, value in settings.items():
        cmd += ["--set", f"{key}={value}"]
    if ranks is not None:
        cmd = [mpiexec(), "-n", str(ranks)] + cmd
    try:
        p = subprocess.run(cmd, env=child_env(root), capture_output=True, text=True, cwd=root,
                           timeout=RUN_TIMEOUT)
        failure = None
        if p.returncode:
            print(" ".join(cmd), p.stdout, p.stderr, sep="\n", file=sys.stderr)
            lines = (p.stderr or p.stdout).strip().splitlines() or [""]
            failure = f"exit {p.returncode}: {lines[-1]}"
    except subprocess.TimeoutExpired:
        failure = f"timed out after {RUN_TIMEOUT} s"
    results = [f for f in os.listdir(out_dir) if f.endswith(".h5")]
    if len(results) != 1:
        return None, failure or f"{len(results)} result files in {out_dir}"
    return os.path.join(out_dir, results[0]), failure


def legacy_flow_record(root, backend):
    """The default two_phase case for 0.05 s: every dataset but the timings."""
    import h5py

    with tempfile.TemporaryDirectory() as d:
        path, failure = run_flow(root, backend, os.path.join(root, "cases", "two_phase.yaml"),
                                 {"time.end": 0.05, "output.interval": 0.025}, None, d)
        record = {"error": failure} if failure else {}
        if path is None:
            return record
        with h5py.File(path, "r") as f:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset) and not is_timing(name):
                    record[name] = array_hash(obj[()]) if obj.dtype.kind in "fiub" else "str"
            f.visititems(visit)
        return record


def case_hash(case_text):
    """The case as the run read it, less its output directory (a temporary one)."""
    import yaml

    case = yaml.safe_load(case_text)
    case.get("output", {}).pop("directory", None)
    return hashlib.sha256(json.dumps(case, sort_keys=True).encode()).hexdigest()[:16]


def result_record(path):
    """What a flow's result file says of its answer: the final snapshot of
    each field, the per-step diagnostics and solver records, the case."""
    import h5py

    record = {}
    with h5py.File(path, "r") as f:
        fields = f["fields"]
        for name in sorted(fields):
            if name not in ("step", "time"):
                record[f"field {name}"] = dataset_hash(fields[name][-1])
        record["snapshot steps"] = fields["step"][()].tolist()
        record["snapshot times"] = dataset_hash(fields["time"][()])
        for group in ("diagnostics", "solver"):
            for name in sorted(f[group]):
                if not is_timing(name):
                    record[f"{group} {name}"] = dataset_hash(f[group][name][()])
        record["steps"] = len(f["solver/iterations"])
        record["iterations"] = f["solver/iterations"][()].tolist()
        record["case"] = case_hash(f.attrs["case"])
        for name in RUN_ATTRIBUTES:
            value = f.attrs.get(name)
            record[name] = value.decode() if isinstance(value, bytes) else str(value)
    return record


def flow_records(root, backend, launches):
    """The coarse flows, each interface method, each launch.  A failed run
    keeps what its result file holds, beside the failure."""
    records = {}
    for case, (dim, case_settings) in FLOW_CASES.items():
        case_file = os.path.join(root, "cases", f"{case}.yaml")
        for method in INTERFACE_METHODS:
            settings = dict(case_settings, **{"output.interval": case_settings["time.end"] / 2,
                                              "levelset.method": method,
                                              "levelset.reinit_every": 2})
            for ranks in launches:
                launch = "serial" if ranks is None else f"ranks={ranks}"
                key = f"flow {dim} {case} {method} {launch}"
                start = time.perf_counter()
                with tempfile.TemporaryDirectory() as d:
                    path, failure = run_flow(root, backend, case_file, settings, ranks, d)
                    record = result_record(path) if path else {}
                if failure:
                    record["error"] = failure
                records[key] = record
                print(f"{key}: {record.get('steps')} steps, {time.perf_counter() - start:.1f} s"
                      + (f", FAILED: {failure}" if failure else ""), flush=True)
    return records


def import_checkout(root):
    """Import bubbleflow from the checkout at ``root`` here and check that the
    runs started from here import it too (not an installed copy)."""
    sys.path.insert(0, root)
    import bubbleflow

    probe = subprocess.run([sys.executable, "-c", "import bubbleflow; print(bubbleflow.__file__)"],
                           env=child_env(root), capture_output=True, text=True, cwd=root)
    for where, path in (("here", bubbleflow.__file__), ("in a run", probe.stdout.strip())):
        if not os.path.abspath(path).startswith(os.path.join(root, "bubbleflow") + os.sep):
            sys.exit(f"bubbleflow imported from {path!r} {where}, not from {root}")
    return bubbleflow


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backend", help="numpy or cupy")
    parser.add_argument("out", metavar="OUT.json")
    parser.add_argument("root", metavar="PKGROOT", nargs="?", default=".",
                        help="the checkout to fingerprint (default .)")
    parser.add_argument("--quick", action="store_true", help="a subset: 1-3 minutes on 2 cores")
    parser.add_argument("--ranks", type=int, nargs="*", metavar="N",
                        help="the mpiexec launches of the coarse flows (default 1 2 4, "
                             "--quick 2 4; none given: one process only, as on one GPU, "
                             "where every rank needs its own)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    bf = import_checkout(root)

    start = time.perf_counter()
    problems = QUICK_SOLVE_PROBLEMS if args.quick else SOLVE_PROBLEMS
    records = solve_records(bf, args.backend, problems)
    records.update(function_records(bf, args.backend))
    records["flow"] = legacy_flow_record(root, args.backend)
    launches = QUICK_LAUNCHES if args.quick else LAUNCHES
    if args.ranks is not None:
        launches = (None, *args.ranks)
    records.update(flow_records(root, args.backend, launches))
    with open(args.out, "w") as f:
        json.dump(records, f, indent=1, sort_keys=True)
    failed = sorted(k for k, v in records.items() if isinstance(v, dict) and "error" in v)
    print(f"wrote {args.out}: {len(records)} entries in {time.perf_counter() - start:.0f} s"
          + (f"; failed runs: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
