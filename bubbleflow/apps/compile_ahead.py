"""``bubbleflow compile``: a GPU's kernels compiled before the first run.

A run on a GPU compiles each kernel (NVRTC) where it first calls it, and
CuPy keeps the result on disk (``~/.cupy/kernel_cache``, or
``CUPY_CACHE_DIR``) for every later process; so the first run on a machine
waits for its compiles (docs/performance.md, "The first run on a
machine").  This command runs a few steps of a small copy of each case
(the grid halved while it has more than :data:`.flow.warm_up.WARM_UP_CELLS`
cells) into a temporary folder it then removes: the kernels those runs
call are in CuPy's cache before the user's own runs start.

Without cases it takes the benchmark's named flows in 2-D and 3-D
(:data:`.bench.flow_cases.NAMED_CASES`), and the 2-D and 3-D rising bubble
also with the implicit viscous stress and with the level set alone
(:data:`DEFAULT_RUNS`): the shipped cases' kernels.  A case file given
instead is compiled with its own settings (and ``--set``).
"""
from __future__ import annotations

import math
import os
import tempfile
import time
from dataclasses import dataclass

from ..case.config import CaseError
from ..case.time_step import initial_dt_limits
from .bench.flow_cases import NAMED_CASES, case_at_cells, case_loader

__all__ = ["PROG", "DEFAULT_RUNS", "CompileRun", "plan", "run_plan", "add_subparser",
           "cmd_compile"]

PROG = "bubbleflow compile"
#: The runs compiled when no case is named: ``(name, overrides)``.
DEFAULT_RUNS = (
    ("hysing", ()), ("column", ()), ("rising3d", ()), ("column3d", ()),
    ("hysing", ("momentum.viscosity=implicit",)), ("rising3d", ("momentum.viscosity=implicit",)),
    ("hysing", ("levelset.method=levelset",)), ("rising3d", ("levelset.method=levelset",)),
)
#: Steps of each run at least: the first step and the steps after it take
#: other branches (a level set reinitialised every few steps: one more
#: than its interval).
MIN_STEPS = 3


@dataclass(frozen=True)
class CompileRun:
    """One run of the plan: what it is, the small case and its steps."""

    label: str          # the named case or the file, with its own overrides
    case: object        # the validated small case, time.end set
    steps: int          # the steps it takes at the limits at t = 0


def _steps(case):
    every = case.levelset.reinit_every if case.levelset.method == "levelset" else 0
    return max(MIN_STEPS, every + 1)


def _small(load, overrides, origin):
    """The case of ``load`` with ``overrides`` on its small copy's cells."""
    from ..flow.warm_up import MAX_COPY_CELLS, small_copy_cells

    base = load(list(overrides))
    if base.mode != "flow":
        raise CaseError(base.source, "mode", f"got {base.mode!r}",
                        f"a mode: flow case ({PROG} runs a few steps of it)", value=base.mode)
    cells = small_copy_cells(base.grid.cells)
    if cells is None:
        raise CaseError(base.source, "grid", f"got {' x '.join(map(str, base.grid.cells))} cells",
                        f"a grid that halves to at most {MAX_COPY_CELLS} cells (even counts) "
                        f"for {PROG}; its kernels compile in its first run instead")
    if cells == tuple(base.grid.cells):
        return base
    return case_at_cells(load, overrides, cells, origin, prog=PROG)[0]


def plan(labels=(), overrides=()):
    """The runs of ``bubbleflow compile``: every case validated (a
    :class:`CaseError` before any work), on its small copy, its end time
    the steps of :func:`_steps` at its time-step limits at rest.

    ``labels``: names of :data:`NAMED_CASES` or case files; none: the
    :data:`DEFAULT_RUNS`.  ``overrides``: ``"key=value"`` items for all."""
    runs = [(label, ()) for label in labels] if labels else list(DEFAULT_RUNS)
    out = []
    for label, own in runs:
        load = case_loader(label, PROG)
        sets = list(overrides) + list(own)
        origin = f"{PROG}: the small copy of {label}"
        small = _small(load, sets, origin)
        steps = _steps(small)
        dt = min((dt for dt, _ in initial_dt_limits(small).values()), default=math.inf)
        end = ("time.end", min(small.time.end, steps * dt), f"{PROG}: {steps} steps")
        case = case_at_cells(load, sets + [end], small.grid.cells, origin, prog=PROG)[0]
        out.append(CompileRun(" ".join([label] + list(own)), case, steps))
    return out


def run_plan(runs, backend, say=print):
    """Run each of ``runs`` (:func:`plan`) on ``backend`` into a temporary
    folder (removed after), quietly; ``say`` gets a line a run.  Returns the
    list of ``(label, reason)`` of the runs that failed."""
    from .run import run_case

    failed = []
    with tempfile.TemporaryDirectory(prefix="bubbleflow-compile-") as folder:
        for k, run in enumerate(runs):
            cells = " x ".join(map(str, run.case.grid.cells))
            start = time.perf_counter()
            try:
                code = run_case(run.case, backend, quiet=True, progress=False,
                                outdir=os.path.join(folder, str(k)))
                reason = None if code == 0 else f"the run ended with exit code {code}"
            except Exception as exc:      # noqa: BLE001 - reported, and the others still run
                reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            seconds = time.perf_counter() - start
            state = "failed: " + reason if reason else "done"
            say(f"  {run.label}: {cells} cells, {run.steps} steps, {seconds:.1f} s, {state}")
            if reason:
                failed.append((run.label, reason))
    return failed


def add_subparser(subparsers):
    """Register ``bubbleflow compile`` on the ``subparsers`` of the main parser."""
    p = subparsers.add_parser(
        "compile", help="compile the GPU kernels of runs ahead of the first run",
        description="Run a few steps of a small copy of each case on the GPU, into a "
                    "temporary folder, so that the kernels they call are compiled and kept "
                    "in CuPy's kernel cache on disk before the first real run on this machine "
                    "(which otherwise waits for its compiles).  Without cases: the named flows "
                    "of `bubbleflow bench --flow` in 2-D and 3-D, and the rising bubbles also "
                    "with the implicit viscous stress and with the level set alone.  On a "
                    "machine without a GPU there is nothing to compile.")
    p.add_argument("cases", nargs="*", metavar="CASE",
                   help="mode: flow case files, or named cases: " + ", ".join(NAMED_CASES)
                        + " (default: those, with the variants above)")
    p.add_argument("--set", action="append", metavar="KEY.PATH=VALUE", default=[],
                   help="override a value of every case, as `bubbleflow run --set`")
    p.set_defaults(func=cmd_compile, one_line_errors=True)
    return p


def cmd_compile(args):
    """``bubbleflow compile``: the plan validated, then run on the GPU.

    Returns
    -------
    int
        0, or 1 where a run failed (each said).

    Raises
    ------
    CaseError
        A case or an override is unusable (before any run).
    """
    from ..compute import cuda
    from ..compute.backend import BackendUnavailable, get_backend

    runs = plan(args.cases, args.set)
    try:
        backend = get_backend("cupy")
    except BackendUnavailable as exc:
        print(f"{PROG}: nothing to compile on this machine: no GPU backend ({exc}); "
              "NumPy runs compile no kernels", flush=True)
        return 0
    print(f"{PROG}: {len(runs)} runs of small copies on {backend.device_name}", flush=True)
    start = time.perf_counter()
    failed = run_plan(runs, backend, say=lambda line: print(line, flush=True))
    seconds = time.perf_counter() - start
    if failed:
        for label, reason in failed:
            print(f"error: {PROG}: {label}: {reason}", flush=True)
        return 1
    print(f"{PROG}: kernels of {len(runs)} runs compiled in {seconds:.1f} s; CuPy keeps them in "
          f"{cuda.cache_directory()}, where later runs on this machine find them", flush=True)
    return 0
