"""Speed benchmark of the pressure solve, ours against the peer: ``bubbleflow bench``.

::

    bubbleflow bench [--dim 2|3] [--sizes N ...] [--contrasts C ...] [--backend auto|numpy|cupy]
                     [--configs PRE[(K=V,...)]:DEFL[@MAXN] ...] [--cells-per-subdomain N]
                     [--rhs gravity|random] [--seed S] [--rtol R] [--maxiter N]
                     [--check-every N] [--repeat K] [--peers NAME ...] [--no-peer]
                     [--peer-maxiter N] [--peer-repeat K] [--peer-max-size N]
                     [--copy-mib M] [--csv FILE] [--no-progress]
    bubbleflow bench --flow [--cases hysing,column,rising3d,column3d,CASE.yaml]
                            [--sizes NX|NXxNY|NXxNYxNZ ...]
                            [--steps N] [--skip K] [--set KEY=VALUE ...] [--backend B]
                            [--copy-mib M] [--csv FILE|FOLDER] [--no-progress]

``--flow`` times a flow time step phase by phase instead (:mod:`.flow`).
Without it, the standard solver problem of ``shared/notes/benchmarks.md`` (the bubbly
column of :func:`bubbleflow.case.problem.bubbly_column_phases`, ``n x n`` cells,
at each size and density contrast) is solved, on the same matrix,
right-hand side and tolerance, by

* our configurations (``PRE:DEFL``: :class:`~bubbleflow.linalg.solver.PressureSolver`
  with that preconditioner and deflation; DPCG A-DEF2 with a deflation, PCG
  without one, CG without either);
* the peer a user would pick instead (``--peers``): ``cupy_cg``, CuPy's
  ``cupyx.scipy.sparse.linalg.cg`` with a Jacobi ``LinearOperator`` on a
  cuSPARSE CSR matrix (GPU); ``scipy_cg``, SciPy's ``cg`` with Jacobi (CPU);
  ``pyamg`` and ``pyamg_rs``, SciPy's ``cg`` preconditioned by a PyAMG
  smoothed-aggregation or classical (Ruge-Stuben) V-cycle (CPU; where PyAMG
  is importable).

``--dim 3``: the 3-D bubbly column instead
(:func:`bubbleflow.case.problem.bubbly_column_3d`: the unit cube, ``n^3``
cells, 2 x 2 x 2 bubbles; the matrix-free 7-point operator), ``--sizes``
cells per side.  Our configurations default to ``multigrid:none`` and
``jacobi:none@256``; one that does not run on a 3-D operator (a
preconditioner built from the five diagonals, a deflation that is 2-D only)
is refused before anything runs (:func:`.options.check_configs_3d`).  The
peers get the 7-point CSR matrix
(:meth:`~bubbleflow.operators.poisson.PoissonOperator.to_backend_sparse`).
Bytes per iteration come from the 3-D model
(:func:`.model3d.bytes_per_iteration_3d`) where the solver counts none; the
table ends with the memory of one untimed set-up plus solve
(``memory_bytes``, ``memory_bytes_per_cell``, ``memory_measure``: the CuPy
memory pool's peak, or tracemalloc's on NumPy; :class:`.measure.MemoryPeak`).
A size whose estimated arrays (:func:`.model3d.arrays_per_cell_3d`) do not
fit in the free device or host memory is refused before any work.

Right-hand sides (``--rhs``): ``gravity``, the first pressure solve of a
fluid at rest (:func:`bubbleflow.operators.poisson.gravity_rhs`); ``random``, seeded
uniform values, made zero-mean (at the largest sizes the gravity right-hand
side has an attainable-accuracy floor above rtol 1e-8 in float64:
docs/performance_records.md, "Figures behind code choices").

Timing: each configuration is warmed up once per size (set-up and solve, for
kernel compilation and library handles), then built once with its set-up
timed, solved once untimed for the memory count (the CuPy pool's free blocks
released before it, its size read after it: no allocation inside a timed
solve), and solved ``--repeat`` times; the peer gets a short warm-up (10
iterations, also its memory count) and ``--peer-repeat`` timed solves.  The
device is synchronised before every clock reading, and the TRUE residual of
every timed solve is computed.  The reported run is the median (lower median
for an even count) by solve time.

Columns (CSV: every column of :data:`COLUMNS`; the printed table: the main
ones): iterations, ms per iteration, time to solution, set-up time, final
true relative residual, converged and reason, bytes per iteration (the
solver's own count, ``SolveRecord.bytes_per_iteration``, else the model of
:func:`model_bytes_per_iteration`), achieved GB/s, floor ms per iteration
(bytes / copy bandwidth measured in the same run by a large device-to-device
copy, counting bytes read plus written), ratio to the floor, speedup over the
peer (solve only, and set-up plus solve), peak GPU memory (CuPy memory pool)
in bytes and in float64 grid arrays.  ``docs/performance_records.md`` defines each;
``dim`` and the ``memory_*`` columns of ``--dim 3`` are defined above.

Exit codes: 0 when every run completed (converged or not: see the
``converged`` column), 1 when a run raised an error (it is recorded and the
others go on), 2 for bad arguments (one ``error:`` line, nothing run).

The package: :mod:`.options` (the arguments, validated), :mod:`.problem` (the
standard problem and result rows), :mod:`.ours` and :mod:`.peers` (one
solver on one problem), :mod:`.measure` (copy bandwidth, device, true
residual, memory peak), :mod:`.model3d` (the 3-D bytes and memory
estimates), :mod:`.report` (CSV and table), :mod:`.runner` (the run); for
``--flow``: :mod:`.flow_cases` (the benchmark cases at each size),
:mod:`.flow_options`, :mod:`.flow` (the measurement and the run),
:mod:`.flow_floors` (each phase's bytes and floor), :mod:`.flow_report` and,
under ``mpiexec``, :mod:`.ranks_flow` (the step on the ranks beside its model).
"""
from __future__ import annotations

import argparse

from ...case.config import CaseError
from ...linalg.registry import model_bytes_per_iteration
from .flow import run_flow_bench
from .flow_options import parse_flow_args, refuse_flow_only
from .flow_cases import CASES_HELP, SIZES_HELP
from .flow_report import FLOW_COLUMNS
from .measure import copy_bandwidth
from .model3d import bytes_per_iteration_3d
from .options import (DEFAULT_CONFIGS, DEFAULT_CONFIGS_3D, DEFAULT_MAXITER_PER_N, PEERS, PROG,
                      BenchConfig, Config, cells_per_subdomain, check_csv_writable,
                      count_option, default_rtol, dim_option, max_side, parse_args, parse_config)
from .peers import peer_bytes_per_iteration
from .problem import make_problem
from .report import COLUMNS, format_table, write_csv
from .runner import run_bench

__all__ = [
    "add_subparser", "cmd_bench", "run_bench", "parse_args", "BenchConfig", "Config",
    "COLUMNS", "DEFAULT_CONFIGS", "DEFAULT_CONFIGS_3D", "PEERS", "model_bytes_per_iteration",
    "bytes_per_iteration_3d", "peer_bytes_per_iteration",
    "copy_bandwidth", "cells_per_subdomain", "default_rtol",
    "format_table", "write_csv", "make_problem", "parse_config",
    "run_flow_bench", "parse_flow_args", "FLOW_COLUMNS",
]


def cmd_bench(args):
    """``bubbleflow bench [--flow]``: validate the arguments, run, print, write the CSV.

    Returns
    -------
    int
        0 when every run completed, 1 when one raised an error.

    Raises
    ------
    CaseError
        Bad arguments (before anything runs).
    """
    from ...compute.comm import communicator

    if args.rounds is not None and not (args.scaling and args.flow):
        raise CaseError(PROG, "--rounds", f"got {args.rounds!r} without --flow --scaling",
                        "it with bench --flow --scaling R ... (the rounds of the flow's "
                        "scaling runs)")
    if args.scaling:                        # one process launching mpiexec -n N
        return _scaling(args)
    comm = communicator("auto")
    if comm.size > 1 or args.rows:          # mpiexec -n N bubbleflow bench
        return _ranks_bench_ending_all(comm, args)
    if args.weak_sizes:
        raise CaseError(PROG, "--weak-sizes", "got --weak-sizes on one process",
                        "it with --scaling, or under mpiexec -n N")
    if args.flow:
        flow_bench = parse_flow_args(args)
        _, failures = run_flow_bench(flow_bench)
        return 1 if failures else 0
    refuse_flow_only(args)
    bench = parse_args(args)
    _, failures = run_bench(bench)
    return 1 if failures else 0


def _ranks_bench_ending_all(comm, args):
    """:func:`_ranks_bench`; an error on one rank (other than the bad
    arguments every rank refuses alike) ends every rank, which would
    otherwise wait for it in a collective."""
    import sys
    import traceback

    try:
        return _ranks_bench(comm, args)
    except CaseError:
        raise
    except (Exception, KeyboardInterrupt) as exc:
        if comm.size < 2:
            raise
        print(f"error: bench: rank {comm.rank} of {comm.size} failed ({type(exc).__name__}: "
              f"{exc}); ending every rank", file=sys.stderr, flush=True)
        if not isinstance(exc, KeyboardInterrupt):
            traceback.print_exc()
        sys.stderr.flush()
        comm.abort(1)
        raise


def _ranks_bench(comm, args):
    """The ranks' benchmark: the model of an iteration beside its measured
    time (:func:`.ranks_model.run_ranks_bench`), for ``--dim``, ``--sizes``
    and ``--weak-sizes``; ``--rows FILE``: rank 0 writes the rows there
    (JSON lines, for ``--scaling``), and one rank runs it too."""
    from ...compute.backend import BackendUnavailable, get_backend
    from ...compute.comm import communicator
    from ...compute.transfer import on_device
    from .ranks_model import run_ranks_bench

    dim = dim_option(args.dim)
    try:
        backend = get_backend("cupy" if args.backend == "cupy" else "numpy")
    except BackendUnavailable as exc:
        raise CaseError(PROG, "--backend", f"got 'cupy' with {comm.size} ranks",
                        f"numpy or auto on this machine ({exc})") from None
    if on_device(backend):
        # The device communicator where every rank has a GPU, else MPI.
        comm = communicator("auto", backend)
        comm.use_device(backend)
    if args.flow:
        from .ranks_flow import run_ranks_flow_bench

        args.backend = backend.name                 # (as checked above, for every rank alike)
        rows, _ = run_ranks_flow_bench(comm, parse_flow_args(args))
        _write_rows(args.rows, comm, rows)
        return 0
    refuse_flow_only(args)
    sizes, weak = _ranks_size_lists(args, dim, comm.size)
    rows = run_ranks_bench(comm, dim, sizes, backend=backend, weak_sizes=weak,
                           engine=args.ranks_engine)
    _write_rows(args.rows, comm, rows)
    return 0


def _write_rows(path, comm, rows):
    """``--rows FILE``: rank 0 writes the rows there (JSON lines, for ``--scaling``)."""
    if path and comm.rank == 0:
        import json

        from ...io.atomic import atomic_text

        atomic_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def _ranks_size_lists(args, dim, ranks):
    """``(sizes, weak sizes)`` of the ranks' benchmark on up to ``ranks``
    ranks (default sizes only where no weak ones are asked for)."""
    default = (["1024", "2048"] if dim == 2 else ["96", "160"]) if not args.weak_sizes else []
    return (list(dict.fromkeys(_ranks_sizes("--sizes", args.sizes or default, 4 * ranks, dim))),
            list(dict.fromkeys(_ranks_sizes("--weak-sizes", args.weak_sizes or [], 4, dim))))


def _ranks_sizes(flag, tokens, least, dim):
    """The sizes of a ranks' option, each an integer >= ``least`` (4 planes
    a rank) and at most :func:`.options.max_side`."""
    sizes = []
    most = max_side(dim)
    for token in tokens:
        if not str(token).isdigit() or not least <= int(token) <= most:
            raise CaseError(PROG, flag, f"got {token!r}",
                            f"an integer >= {least} (4 planes a rank) and <= {most} "
                            f"(n^{dim} cells at most the int32 index limit of the CSR matrices)")
        sizes.append(int(token))
    return sizes


def _scaling(args):
    """``bench --scaling R [R ...]``: the ranks' benchmark under ``mpiexec
    -n R`` for each count (and one rank), strong scaling at ``--sizes`` and
    weak at ``--weak-sizes``; one table (:mod:`.ranks_scaling`)."""
    from .ranks_scaling import run_scaling

    counts = [count_option("--scaling", token) for token in args.scaling]
    dim = dim_option(args.dim)
    if args.flow:
        return _flow_scaling(args, counts)
    refuse_flow_only(args)
    sizes, weak = _ranks_size_lists(args, dim, max(counts))
    if args.csv:
        check_csv_writable(args.csv)
    backend = _scaling_backend(args.backend)
    _, failed = run_scaling(counts, dim, sizes, weak, backend=backend, csv=args.csv,
                            mpiexec=_launcher(), engine=args.ranks_engine)
    return 1 if failed else 0


def _launcher():
    """The ``mpiexec`` of ``--scaling``, with mpi4py beside it; refused in
    one line before any launch where either is missing."""
    from .ranks_scaling import find_mpiexec

    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise CaseError(PROG, "--scaling", "mpi4py is not installed",
                        "mpi4py and an MPI (pip install -e '.[mpi]' brings mpi4py and mpich)") from None
    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise CaseError(PROG, "--scaling", "no mpiexec found",
                        "an MPI launcher (pip install -e '.[mpi]' brings mpi4py and mpich)")
    return mpiexec


def _flow_scaling(args, counts):
    """``bench --flow --scaling R [R ...]``: the flow benchmark under
    ``mpiexec -n R`` for each count (and one rank), one table of strong
    scaling with the model (:mod:`.ranks_flow_scaling`).  The options are
    checked here, before any launch."""
    from .ranks_flow_scaling import run_flow_scaling

    backend = _scaling_backend(args.backend)
    csv, args.csv = args.csv, None              # (the table's, not the workers')
    if csv:
        check_csv_writable(csv)
    parse_flow_args(args)
    flow_args = []
    for flag, values in (("--cases", args.cases), ("--sizes", args.sizes)):
        if values:
            flow_args += [flag, *values]
    for flag, value in (("--steps", args.steps), ("--skip", args.skip)):
        if value is not None:
            flow_args += [flag, str(value)]
    for item in args.set or ():
        flow_args += ["--set", item]
    rounds = count_option("--rounds", args.rounds) if args.rounds is not None else 1
    _, failed = run_flow_scaling(counts, flow_args, backend=backend, csv=csv,
                                 mpiexec=_launcher(), rounds=rounds)
    return 1 if failed else 0


def _scaling_backend(name):
    """The backend the ranks of ``--scaling`` run on: ``auto`` is CuPy where
    it works; ``cupy`` where it does not is refused before any launch."""
    from ...compute.backend import BackendUnavailable, get_backend

    try:
        return get_backend(name or "auto").name
    except BackendUnavailable as exc:
        raise CaseError(PROG, "--backend", f"got {name!r}",
                        f"numpy or auto on this machine ({exc})") from None


def _one_line_error(message):
    """argparse's errors for ``bench``: one ``error:`` line (exit 2), via CaseError."""
    raise CaseError(PROG, None, message)


def add_subparser(subparsers):
    """Register ``bubbleflow bench`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "bench", help="speed benchmark of the pressure solve: ours against the peer",
        description="Solve the standard bubbly-column pressure problem at each size and "
                    "density contrast with our configurations and with the peer (CuPy cg + "
                    "Jacobi on the GPU, SciPy cg + Jacobi and PyAMG on the CPU), on the same "
                    "matrix, right-hand side and tolerance; print the device, versions, copy "
                    "bandwidth and a table (iterations, ms per iteration, time to solution, "
                    "set-up, true residual, bytes per iteration, GB/s, floor, speedup, peak "
                    "GPU memory); write every column to --csv.  See docs/performance.md.  With "
                    "--flow: where a flow time step's time goes instead, phase by phase "
                    "(options below).")
    p.add_argument("--dim", metavar="D",
                   help="2: the n^2 bubbly column (default); 3: the n^3 one (unit cube, 7-point "
                        "operator; default sizes 128 256 512 on the GPU, 32 48 on the CPU; "
                        "default configurations " + " ".join(DEFAULT_CONFIGS_3D) + ")")
    p.add_argument("--sizes", nargs="+", metavar="N",
                   help="cells per side (default 1024 2048 4096 on the GPU, 256 512 on the CPU); "
                        + SIZES_HELP)
    p.add_argument("--contrasts", nargs="+", metavar="C",
                   help="density contrasts rho_liquid / rho_gas (default 1 1e3 1e6)")
    p.add_argument("--backend", choices=("auto", "numpy", "cupy"), default="auto",
                   help="array backend of our solver and of the GPU peer (default auto)")
    p.add_argument("--configs", nargs="*", metavar="PRE[(K=V,...)]:DEFL[@MAXN]",
                   help="our configurations, preconditioner:deflation, optionally @MAXN: only at "
                        "sizes <= MAXN (default: " + " ".join(DEFAULT_CONFIGS) + "); none "
                        "given: peers only")
    p.add_argument("--cells-per-subdomain", metavar="N",
                   help="deflation block edge in cells (default 64 at n >= 2048, 32 at "
                        "256 <= n < 2048, 8 below)")
    p.add_argument("--rhs", choices=("gravity", "random"),
                   help="gravity: the standard first-projection rhs; random: seeded uniform, "
                        "zero-mean (default gravity)")
    p.add_argument("--seed", metavar="S", help="seed of --rhs random (default 0)")
    p.add_argument("--rtol", metavar="R",
                   help="relative tolerance of every solve (default 1e-8, 1e-6 at contrast >= 1e6)")
    p.add_argument("--maxiter", metavar="N",
                   help=f"our iteration limit (default {DEFAULT_MAXITER_PER_N} n)")
    p.add_argument("--check-every", metavar="N",
                   help="our iterations between convergence checks (default 10)")
    p.add_argument("--storage", choices=("diagonals", "matrix_free"),
                   help="our operator storage (default diagonals in 2-D, matrix_free in 3-D)")
    p.add_argument("--repeat", metavar="K",
                   help="timed solves of each of our configurations; the median is reported "
                        "(default 3)")
    p.add_argument("--peers", nargs="+", metavar="NAME",
                   help="peers: " + ", ".join(PEERS) + " (default cupy_cg on the GPU; scipy_cg, "
                        "and pyamg where importable, on the CPU)")
    p.add_argument("--no-peer", action="store_true", help="run no peer")
    p.add_argument("--peer-maxiter", metavar="N",
                   help=f"the peer's iteration limit (default {DEFAULT_MAXITER_PER_N} n, enough to "
                        "converge)")
    p.add_argument("--peer-repeat", metavar="K",
                   help="timed solves of the peer (default 1: it is slow)")
    p.add_argument("--peer-max-size", metavar="N", help="run the peer only at sizes <= N")
    p.add_argument("--copy-mib", metavar="M",
                   help="size of the copy that measures the bandwidth (default 512 MiB on the "
                        "GPU, 64 on the CPU)")
    p.add_argument("--csv", metavar="FILE", help="write every column to FILE (atomically); "
                   "with --flow FILE or FOLDER (then FOLDER/bench_flow.csv)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress lines on stderr (one per run otherwise)")
    ranks = p.add_argument_group(
        "several ranks (mpiexec -n N bubbleflow bench, or --scaling)",
        "Under mpiexec -n N the benchmark times Jacobi-PCG iterations of the bubbly column "
        "(contrast 1000) on the ranks' slabs beside the performance model of an iteration "
        "(docs/performance_records.md); of the options above --dim, --sizes (cells per side "
        "in all) and --backend apply.")
    ranks.add_argument("--scaling", nargs="+", metavar="R",
                       help="run it under mpiexec -n R for each R (and 1, the baseline) and "
                            "print strong scaling at --sizes and weak scaling at --weak-sizes: "
                            "measured and modelled ms an iteration, the model's error, the "
                            "efficiency; --csv writes the table")
    ranks.add_argument("--weak-sizes", nargs="+", metavar="N",
                       help="N^d cells a rank, the column stacked a unit a rank (weak scaling)")
    ranks.add_argument("--ranks-engine", choices=("auto", "generic"), default="auto",
                       help="the ranks' iteration: auto (the fused engine, its sums reduced "
                            "over the ranks in CUDA graphs, where it runs: CuPy with NCCL or "
                            "one rank; else the array loop) or generic (the array loop "
                            "everywhere)")
    ranks.add_argument("--rounds", metavar="K",
                       help="with --flow --scaling: run every count K times, the counts one "
                            "after the other in each round, and print each figure's median "
                            "over the rounds and each round's step ratio (default 1)")
    ranks.add_argument("--rows", metavar="FILE", help=argparse.SUPPRESS)
    flow = p.add_argument_group(
        "flow benchmark (--flow)",
        "Time a flow time step phase by phase (the flow solver's phases and the output), "
        "each beside its bandwidth floor, with the pressure solve's iterations and the wall "
        "time per simulated second.  Of the options above --sizes, --backend, --copy-mib, "
        "--csv and --no-progress apply.")
    flow.add_argument("--flow", action="store_true",
                      help="run the flow benchmark instead of the pressure-solve one")
    flow.add_argument("--cases", nargs="+", metavar="CASE",
                      help=CASES_HELP)
    flow.add_argument("--steps", metavar="N", help="measured steps per configuration "
                      "(default 50)")
    flow.add_argument("--skip", metavar="K", help="warm-up steps before them, not measured "
                      "(default 5)")
    flow.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="override a case value (as bubbleflow run --set), e.g. --set "
                           "solver.deflation.subdomains=[64,128]; may be repeated")
    p.set_defaults(func=cmd_bench, one_line_errors=True)
    p.error = _one_line_error
    return p
