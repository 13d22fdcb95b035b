"""The ``bubbleflow`` command line.

::

    bubbleflow run CASE.yaml [-o OUTDIR] [--backend auto|numpy|cupy]
                             [--set key.path=value ...] [--quiet]
                             [--restart FILE.h5] [--overwrite] [--no-progress]
    bubbleflow sweep CASE.yaml --param KEY --values V1,V2,... [...]   (bubbleflow.apps.sweep)
    bubbleflow plot RUN.h5|summary.csv [-o DIR]                       (bubbleflow.apps.plots)
    bubbleflow bench [--sizes N ...] [--contrasts C ...] [...]        (bubbleflow.apps.bench)
    bubbleflow bench --flow [--cases hysing,column] [--sizes NX ...] [...]   (the flow, phase by phase)
    bubbleflow compile [CASE ...] [--set key.path=value ...]          (bubbleflow.apps.compile_ahead)
    bubbleflow --version

Each subcommand is one ``cmd_<name>(args) -> int`` function.  A mistake in
the case (or in an override, or a backend this machine cannot run) is a
:class:`~bubbleflow.case.config.CaseError`: it is printed as one ``error: ...``
line on stderr and the exit code is 2, without a traceback, because the fix
is in the user's file, not in the code.  A solve that fails exits with 1, and
so does a write of the output that the storage refuses (a full disk, a
quota, a file too large, an I/O error): one ``error: ...`` line naming the
file and why (:func:`bubbleflow.io.atomic.write_failure_line`).
"""
from __future__ import annotations

import argparse
import sys

from ..compute.comm import launcher_rank
from ..compute.host_memory import keep_freed_memory
from ..case.config import BACKENDS, CaseError, load_case
from ..version import installed_version

__all__ = ["main", "build_parser", "cmd_run", "restart_command"]

EXIT_OK = 0
EXIT_FAILED = 1       # the case ran but did not succeed (e.g. no convergence)
EXIT_USAGE = 2        # the case cannot be run as written (same code as argparse's)


def cmd_run(args):
    """``bubbleflow run``: validate the case, pick the backend, run it.

    Parameters
    ----------
    args : argparse.Namespace
        ``case``, ``output``, ``backend``, ``set``, ``quiet``, ``restart``,
        ``overwrite``, ``no_progress``.

    Returns
    -------
    int
        The exit code of :func:`bubbleflow.apps.run.run_case` (0 or 1).

    Raises
    ------
    CaseError
        The case, an override or the backend choice is unusable.
    """
    from ..compute.backend import BackendUnavailable, get_backend

    # -o and --backend go through the same validation as --set, after the
    # --set items so that they win.  Their values are used unparsed (a
    # directory called `2024` stays a string) and errors name the option.
    overrides = list(args.set or [])
    if args.output is not None:
        overrides.append(("output.directory", args.output, f"-o {args.output}"))
    if args.backend is not None:
        overrides.append(("backend", args.backend, f"--backend {args.backend}"))
    case = load_case(args.case, overrides)
    try:
        backend = get_backend(case.backend)
    except BackendUnavailable as exc:
        allowed = " or ".join(repr(b) for b in BACKENDS if b != case.backend)
        raise CaseError.from_runtime(
            case, "backend", f"got {case.backend!r}",
            f"{allowed} on this machine ({case.backend} unavailable: {exc})",
            value=case.backend) from None

    # Imported here so that case errors are reported even if the numerics
    # cannot be imported, and `--help` stays fast.
    from .run import run_case

    from ..case.resources import check_memory
    from ..compute.comm import communicator

    comm = communicator("auto", backend)
    if comm.size == 1:
        check_memory(case, backend)          # (the ranks each check their slab)
    else:                                    # started by mpiexec -n N
        from .ranks import run_case_ranks

        if args.profile:
            raise CaseError(args.case, None, f"got --profile with {comm.size} ranks",
                            "one process (the ranks' step phase by phase: mpiexec -n N "
                            "bubbleflow bench --flow)")

        return run_case_ranks(case, backend, comm, quiet=args.quiet, restart=args.restart,
                              overwrite=args.overwrite, progress=not args.no_progress,
                              command=restart_command(args))
    return run_case(case, backend, quiet=args.quiet, restart=args.restart,
                    progress=not args.no_progress, overwrite=args.overwrite,
                    command=restart_command(args), profile=args.profile)


def restart_command(args):
    """The ``bubbleflow run`` words of ``args`` that decide the result: the
    case, ``-o``, ``--backend`` and every ``--set`` as typed.

    A run that stops prints them with ``--restart PATH``
    (:func:`bubbleflow.apps.run.restart_hint`): typed as shown, in the same
    folder, that continues the same case into the same output.
    ``--overwrite`` is left out (a restart in place needs none), as are
    ``--quiet`` and ``--no-progress`` (they change only what is printed).

    Parameters
    ----------
    args : argparse.Namespace
        Those of ``bubbleflow run`` (:func:`cmd_run`).

    Returns
    -------
    list of str
    """
    words = ["bubbleflow", "run", args.case]
    if args.output is not None:
        words += ["-o", args.output]
    if args.backend is not None:
        words += ["--backend", args.backend]
    for item in args.set or ():
        words += ["--set", item]
    return words


def build_parser(command=None):
    """The argument parser, one subparser per ``cmd_*`` function;
    ``command="run"``: the ``run`` subparser alone (a run starts without
    importing the other commands' modules)."""
    parser = argparse.ArgumentParser(
        prog="bubbleflow",
        description="Two-phase bubbly-flow pressure solver (NumPy or CuPy).")
    parser.add_argument("--version", action="version", version=f"bubbleflow {installed_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser("run", help="run a YAML case file",
                         description="Validate a YAML case file and run it.")
    run.add_argument("case", metavar="CASE.yaml", help="the case file")
    run.add_argument("-o", "--output", metavar="OUTDIR",
                     help="output directory (overrides output.directory)")
    run.add_argument("--backend", choices=BACKENDS,
                     help="array backend (overrides the case's backend)")
    run.add_argument("--set", action="append", metavar="KEY.PATH=VALUE", default=[],
                     help="override a case value, parsed as YAML, e.g. --set grid.nx=256 "
                          "--set solver.deflation.subdomains=[8,8]; may be repeated")
    run.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    run.add_argument("--restart", metavar="FILE.h5",
                     help="mode flow: continue from the last checkpoint (snapshot) in FILE.h5")
    run.add_argument("--overwrite", action="store_true",
                     help="replace an existing result in OUTDIR once this run has finished "
                          "(until then it is kept, as NAME.previous.h5 for flow runs)")
    run.add_argument("--profile", action="store_true",
                     help="say at the end where the run's time went: start-up, case build, "
                          "set-up, solve or the steps phase by phase, output, each beside "
                          "its floor (a flow's phases launched directly and waited for: "
                          "slower, on a GPU much slower for small steps)")
    run.add_argument("--no-progress", action="store_true",
                     help="no progress bar (it is also off when stderr is not a terminal)")
    run.set_defaults(func=cmd_run)

    if command == "run":
        return parser
    # Subcommands that live beside their code: each module has
    # add_subparser(subparsers), registering its cmd_* function.
    from . import bench, compile_ahead, plots, sweep as study

    study.add_subparser(sub)
    plots.add_subparser(sub)
    bench.add_subparser(sub)
    compile_ahead.add_subparser(sub)
    return parser


def _command(words):
    """The subcommand the command line names: its first word not an
    option (None where there is none, or an option comes first: ``--help``
    and ``--version`` want every subcommand)."""
    if not words or words[0].startswith("-"):
        return None
    return words[0]


def main(argv=None):
    """Entry point of the ``bubbleflow`` console script; returns the exit code.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).
    """
    # Freed NumPy arrays reused instead of mapped afresh (compute/host_memory.py).
    keep_freed_memory()
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(words))
    try:
        # Subcommands that set `one_line_errors` report argument errors as a
        # CaseError (one line, exit 2) instead of argparse's usage message.
        args, extra = parser.parse_known_args(argv)
        if extra:
            if getattr(args, "one_line_errors", False):
                raise CaseError(f"bubbleflow {args.command}", None,
                                f"unrecognized arguments: {' '.join(extra)}")
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        return args.func(args)
    except CaseError as exc:
        if launcher_rank() == 0:       # under mpiexec every rank checks; rank 0 says it
            print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        return 130
    except Exception as exc:
        from ..io.atomic import write_failure_line

        line = write_failure_line(exc)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr, flush=True)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
