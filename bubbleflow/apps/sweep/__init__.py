"""Parameter studies: ``bubbleflow sweep``.

::

    bubbleflow sweep CASE.yaml --param KEY --values V1,V2,... [--param KEY2 --values ...]
                     [--set key.path=value ...] [-o OUTDIR] [--name STUDY] [--resume]
                     [--executor local|dask] [--scheduler ADDRESS] [--workers N]
                     [--backend auto|numpy|cupy] [--no-progress] [-q]

A study runs one case per point of the cartesian product of the parameter
values (the first parameter varies slowest).  ``--values`` takes a comma
separated list (each item read as YAML: ``1,1e3,1e6``, ``jacobi,block_ic``,
``[8,8],[16,16]``) or a range: ``START:STOP:COUNT`` (COUNT linear values,
ends included) or ``START:STOP:COUNT:log`` (log-spaced).  The same study can
be written into the case file as a top-level ``sweep:`` block::

    sweep:
      name: contrast_study
      parameters:
        contrast: [1, 1000, 1000000]          # or "1:1e6:7:log"
        solver.preconditioner.type: [jacobi, incomplete_poisson_scaled]

``--param`` options add to (or, for the same key, replace) the block's
parameters.  Keys are case key paths (``grid.nx``, ``solver.rtol``, ...),
plus the virtual key ``contrast``, which sets ``fluids.gas.density =
fluids.liquid.density / contrast``.

Every point is validated before anything runs.  Output, in
``OUTDIR/<study name>/`` (OUTDIR: ``-o``, else the case's
``output.directory``)::

    study.yaml     the study: base case (resolved YAML), parameters, --set items
    run_0000.h5    one HDF5 file per run (the layout of ``bubbleflow run``)
    summary.csv    one row per finished run, in run order (rewritten atomically
    summary.h5     after every run); summary.h5: /summary/<column> datasets

The summary columns are ``run``, one column per parameter, then
``status`` (``ok``, ``not_converged``: the run wrote its file but a solve
failed, ``failed``: an exception, no file), and for ``mode: pressure``
``iterations``, ``residual`` (final true relative residual), ``converged``,
``reason``, ``setup_seconds``, ``solve_seconds``; for ``mode: flow``
``iterations_mean``, ``iterations_max``, ``pressure_solves``, ``steps``,
``residual`` (the worst), ``converged`` (all), ``reason``, setup and solve
totals and the Hysing benchmark quantities of
:func:`bubbleflow.apps.validation.benchmark_quantities`; then ``wall_seconds``,
``backend``, ``device``, ``gpu`` (PCI bus id of a CuPy run's GPU), ``host``,
``file`` and ``error``.

``--resume`` continues an interrupted study: runs with a row in
``summary.csv`` are skipped, the others run.  A folder that holds another
study (a different ``study.yaml``) is refused.

Execution (:func:`~bubbleflow.apps.sweep.point.run_point` is the unit of work):

* ``--executor local`` (default): one worker per visible GPU when the backend
  resolves to CuPy (each pinned to its GPU through ``CUDA_VISIBLE_DEVICES``),
  else one; ``--workers N`` sets the number (CPU runs in N processes).  One
  worker runs in this process; more run in a ``ProcessPoolExecutor``.
* ``--executor dask``: the runs are mapped over a Dask distributed cluster,
  ``--scheduler ADDRESS`` (workers must be able to import bubbleflow and
  should run one thread each; pin GPUs on the cluster side, e.g. with
  dask-cuda), or, without it, a ``LocalCluster`` of ``--workers`` processes
  of one thread.  Needs ``pip install bubbleflow[dask]``.

Exit codes: 0 when every run is ``ok``, 1 when a run failed or did not
converge (the others still run), 2 for bad input (one ``error:`` line,
nothing run).

The package, in the order a study runs: :mod:`.values` (parameter values,
ranges, the cartesian product), :mod:`.study` (the study read and every
point's case validated), :mod:`.folder` (the study folder checked, rows kept
for ``--resume``), :mod:`.point` (one run and its summary row),
:mod:`.executors` (in-process or a process pool, GPUs pinned),
:mod:`.dask_cluster` (a Dask cluster), :mod:`.summary` (``summary.csv`` and
``summary.h5``), :mod:`.runner` (the study run, progress and exit code).
"""
from __future__ import annotations

from ...case.config import BACKENDS, CaseError
from ...case.yaml_reader import shorten
from .point import run_point
from .runner import MAX_WORKERS, run_study
from .study import Study, prepare_study
from .summary import STATUSES, read_summary, write_summary
from .values import Parameter, expand, parse_range, parse_values

__all__ = [
    "add_subparser", "cmd_sweep", "run_point", "parse_values", "parse_range", "expand",
    "prepare_study", "run_study", "read_summary", "write_summary", "Study", "Parameter",
    "STATUSES", "MAX_WORKERS",
]



def _workers(text, file):
    """``--workers`` as an int from 1 to :data:`MAX_WORKERS` (None when not given)."""
    if text is None:
        return None
    digits = str(text).strip()
    # (Compared as text first: int() refuses thousands of digits.)
    if not digits.isdigit() or len(digits) > len(str(MAX_WORKERS)) \
            or not 1 <= int(digits) <= MAX_WORKERS:
        raise CaseError(file, None, f"got {shorten(repr(text), 20)}",
                        f"an integer from 1 to {MAX_WORKERS} (worker processes)",
                        origin=f"--workers {text}")
    return int(digits)


def cmd_sweep(args):
    """``bubbleflow sweep``: validate every point, then run the study.

    Returns
    -------
    int
        0 when every run is ok, 1 when any failed or did not converge.

    Raises
    ------
    CaseError
        Bad input (unknown key, invalid value, a folder holding another study,
        an unusable executor), before any run.
    """
    workers = _workers(args.workers, args.case)     # before the (long) validation of the points
    study = prepare_study(args.case, params=args.param, values=args.values,
                          overrides=args.set, output=args.output, name=args.name,
                          backend=args.backend)
    return run_study(study, executor=args.executor, workers=workers,
                     scheduler=args.scheduler, resume=args.resume,
                     progress=not args.no_progress, quiet=args.quiet)


def add_subparser(subparsers):
    """Register ``bubbleflow sweep`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "sweep", help="run a parameter study (one run per point of a cartesian product)",
        description="Run a case once per point of the cartesian product of the given "
                    "parameter values; one HDF5 file per run and a summary table "
                    "(summary.csv, summary.h5) in OUTDIR/<study>/.")
    p.add_argument("case", metavar="CASE.yaml",
                   help="a case file, or a study file (a case file with a top-level sweep: block)")
    p.add_argument("--param", action="append", metavar="KEY", default=[],
                   help="a case key path to sweep (grid.nx, solver.preconditioner.type, ...) or "
                        "'contrast' (gas density = liquid density / contrast); may be repeated")
    p.add_argument("--values", action="append", metavar="LIST", default=[],
                   help="values of the preceding --param: V1,V2,... (each read as YAML) or a "
                        "range START:STOP:COUNT[:log], e.g. 1:1e6:7:log")
    p.add_argument("--set", action="append", metavar="KEY.PATH=VALUE", default=[],
                   help="fixed override applied to every run (as in bubbleflow run); may be repeated")
    p.add_argument("-o", "--output", metavar="OUTDIR",
                   help="folder receiving the study folder (default the case's output.directory)")
    p.add_argument("--name", metavar="STUDY",
                   help="study name (default the sweep block's name, else <case name>_study)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted study: skip runs in summary.csv, run the others")
    p.add_argument("--executor", choices=("local", "dask"), default=None,
                   help="local: this machine (one worker per GPU); dask: a Dask distributed "
                        "cluster (default local, dask with --scheduler)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="dask scheduler address (tcp://host:8786); without it a LocalCluster")
    p.add_argument("--workers", metavar="N",
                   help="workers (local processes or LocalCluster size; default one per visible "
                        "GPU with the cupy backend, else 1 = in-process)")
    p.add_argument("--backend", choices=BACKENDS,
                   help="array backend of every run (overrides the case's backend)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (it is also off when stderr is not a terminal)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    p.set_defaults(func=cmd_sweep)
    return p
