"""Running a case: ``bubbleflow run CASE.yaml``.

``mode: pressure``: build the geometry, assemble the operator, set up the
solver, solve once, write ``OUTDIR/<name>.h5``.  A solve that fails still
writes its file (``/solver/converged`` false), says why, and returns 1.

``mode: flow``: step to ``time.end``, writing snapshots and the index
(:mod:`bubbleflow.io.flow_output`) and tracking the bubbles every
``output.bubbles_every`` steps (:mod:`.bubble_sampling`).  Its last lines are what the file
holds: the final quantities with their units and the gas volume change;
and a run that stops says the whole command that continues it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import shlex
import sys

from .. import __version__
from ..case.config import viscosity_scheme
from ..case.problem import build_pressure_problem
from ..io.compression import Compression
from ..io.flow_output import GAS_VOLUME_TOLERANCE
from ..io.layout import DYNAMIC_PRESSURE, VOLUME_FRACTION
from ..io.result_units import SERIES_UNITS
from ..io.xdmf import pressure_sidecar
from ..linalg.solver import PressureSolver
from .bubble_sampling import BubbleSampling
from .restart import open_restart, restart_tracker
from .run_profile import RunProfile, TimedCalls, pressure_floors
from .stop_signals import StopSignals

__all__ = ["run_case", "run_pressure", "write_pressure_files", "write_run_snapshot",
           "restart_hint", "first_gpu_run_note"]


def _say(quiet, *parts, file=None):
    if not quiet:
        print(*parts, file=file or sys.stdout, flush=True)


def run_case(case, backend, quiet=False, outdir=None, restart=None, progress=True,
             overwrite=False, command=None, profile=False):
    """Run a validated case on ``backend`` in this process; return the
    process exit code (several ranks: :func:`.ranks.run_case_ranks`).

    The output location is checked, locked and protected (see
    :mod:`bubbleflow.io.outdir`) before any work starts.  ``command``: the
    ``bubbleflow run`` words that started the run, without ``--restart``
    (see :func:`restart_hint`), so that a flow run that stops can say what
    to type to continue it.  ``profile``: say at the end where the run's
    time went (:mod:`.run_profile`).
    """
    from ..case.config import CaseError
    from ..io.outdir import RunOutput

    if case.mode != "flow" and restart is not None:
        raise CaseError(case.source, "mode", f"got --restart with mode {case.mode!r}",
                        "mode 'flow' (only time-dependent runs have checkpoints)", value=case.mode)
    outdir = outdir or case.output.directory
    with RunOutput(case, outdir, overwrite=overwrite, restart=restart,
                   flow=case.mode == "flow") as out:
        note = first_gpu_run_note(backend)
        if note:
            _say(quiet, note)
        prof = RunProfile(backend) if profile else None
        if case.mode == "flow":
            return run_flow(case, backend, quiet=quiet, out=out, restart=restart,
                            progress=progress, command=command, profile=prof)
        return run_pressure(case, backend, quiet=quiet, out=out, progress=progress, profile=prof)


def first_gpu_run_note(backend):
    """A line for a GPU run that finds CuPy's kernel cache empty (so it
    compiles its kernels as it reaches them), else None."""
    from ..compute import cuda

    if not getattr(backend, "on_device", False) or not cuda.cache_is_empty():
        return None
    return (f"note: CuPy's kernel cache ({cuda.cache_directory()}) is empty: this first GPU run "
            "on the machine compiles its kernels as it reaches them (seconds); `bubbleflow "
            "compile` compiles them ahead, once per machine")


def _part(profile, name):
    """``profile``'s part ``name`` (:meth:`.run_profile.RunProfile.part`), or nothing."""
    return profile.part(name) if profile is not None else contextlib.nullcontext()


def run_pressure(case, backend, quiet=False, outdir=None, out=None, progress=True, profile=None,
                 **_):
    """One pressure solve of the first projection step; returns 0 or 1.
    ``profile``: a :class:`.run_profile.RunProfile` the parts go to."""
    from ..case.config import CaseError

    path = out.path if out is not None else os.path.join(outdir or case.output.directory,
                                                         f"{case.name}.h5")
    try:
        with _part(profile, "case build"):
            prob = build_pressure_problem(case, backend)
    except ValueError as exc:          # random bubbles that do not fit their region
        raise CaseError.from_runtime(
            case, "geometry.random_bubbles", str(exc),
            "fewer or smaller bubbles, a smaller min_gap or a larger region") from None
    g = prob.grid
    s = case.solver
    contrast = case.fluids.liquid.density / case.fluids.gas.density
    _say(quiet, f"{case.name}: {' x '.join(map(str, g.cells))} cells, {len(prob.circles)} "
                f"{'circles' if g.ndim == 2 else 'spheres'}, "
                f"density contrast {contrast:g}, face density {case.operator.face_density}")
    with _part(profile, "pressure set-up"):
        solver = PressureSolver.from_config(prob.A, s, phi=prob.phi, precision=case.precision)
    ndefl = solver.deflation.k if solver.deflation is not None else 0
    variant = f" ({s.variant})" if s.method == "dpcg" else ""
    _say(quiet, f"solver: {s.method}{variant}, preconditioner {s.preconditioner.type}, "
                f"deflation {s.deflation.type} ({ndefl} vectors), rtol {s.rtol:g}; "
                f"backend {backend.name} on {backend.device_name}")
    with _SolveProgress(enabled=progress and not quiet, rtol=s.rtol) as shown, \
            _part(profile, "pressure solve"):
        p, record = solver.solve(prob.rhs, progress=shown if shown.enabled else None)
    p = prob.gauged(prob.whole_pressure(p))
    with _part(profile, "output"):
        written = write_pressure_files(
            case.name, path, case_yaml=case.to_yaml(), version=__version__,
            backend=backend.name, device=backend.device_name, precision=case.precision,
            face_density=case.operator.face_density, grid=g, phi=prob.phi,
            rho=prob.phases.rho, p=p, record=record,
            compression=Compression.for_output(case.output, "pressure"))
    if profile is not None:
        pressure_floors(profile, case, prob, solver, record)
        print(profile.table(), flush=True)
    if not written:
        return 1
    if record.converged:
        _say(quiet, f"{record.summary()}")
        _say(quiet, f"pressure range {float(p.min()):.6g} .. {float(p.max()):.6g} Pa; wrote {path}")
        return 0
    print(f"error: {case.name}: pressure solve failed: reason {record.reason} after "
          f"{record.iterations} iterations, true relative residual {record.residual:.3e} "
          f"(rtol {s.rtol:g}); wrote {path}", file=sys.stderr, flush=True)
    return 1


def write_pressure_files(name, path, *, grid, **result):
    """The pressure result ``path`` and its XDMF sidecar, both in place or neither changed.

    A failed write (a full disk, a quota, a file too large, an I/O error) is
    one line on stderr naming the file and why; the previous result and
    sidecar, if any, stay.  Only when the sidecar alone fails, once the new
    result is in place, is the old sidecar removed (it describes the old
    result).  Returns whether both were written.

    Parameters
    ----------
    name : str
        The case name, for the error line.
    path : str
        The result file.
    grid : Grid
    **result
        The other arguments of :func:`bubbleflow.io.result_writer.write_pressure_result`.
    """
    from ..io.result_writer import write_pressure_result

    written = False
    try:
        with pressure_sidecar(path, grid) as sidecar:
            write_pressure_result(path, grid=grid, **result)
            written = True
    except OSError as exc:
        if written:
            with contextlib.suppress(OSError):
                os.unlink(sidecar)
            state = "the result is written, without its sidecar"
        else:
            state = "the previous result is kept" if os.path.exists(path) else "no result written"
        print(f"error: {name}: {_write_error_text(exc, path)} ({state})", file=sys.stderr,
              flush=True)
        return False
    return True


def _write_error_text(exc, path):
    """An OSError met writing ``path`` as ``cannot write FILE: REASON``."""
    from ..io.atomic import OutputWriteError

    if isinstance(exc, OutputWriteError):
        return str(exc)
    return f"cannot write {exc.filename or path}: {exc.strerror or exc}"


class _SolveProgress:
    """One terminal line, rewritten at the solver's host checks: iteration and residual."""

    def __init__(self, enabled, rtol):
        self.enabled = enabled and sys.stderr.isatty()
        self.rtol = rtol
        self.shown = False

    def __enter__(self):
        return self

    def __call__(self, iteration, residual):
        if not self.enabled:
            return
        sys.stderr.write(f"\r  iteration {iteration}: relative residual {residual:.3e} "
                         f"(rtol {self.rtol:g})   ")
        sys.stderr.flush()
        self.shown = True

    def __exit__(self, *exc):
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
        return False


def run_flow(case, backend, quiet=False, outdir=None, out=None, restart=None, progress=True,
             comm=None, command=None, profile=None):
    """Time-dependent run; returns 0, 1 if a pressure solve failed or the flow
    blew up, 128 + signal number when stopped by SIGTERM / SIGINT.  With
    ``comm`` of several ranks each steps its slab (every rank calls this;
    ``out`` is rank 0's, which writes the output).  ``command``: as
    :func:`run_case`'s.

    Its last lines state the relative change of the gas volume from the
    initial state (a warning on stderr beyond
    :data:`~bubbleflow.io.flow_output.GAS_VOLUME_TOLERANCE`), as its file does.
    ``profile``: a :class:`.run_profile.RunProfile` the parts go to (one
    process)."""
    path = out.path if out is not None else os.path.join(outdir or case.output.directory,
                                                         f"{case.name}.h5")
    ranks = comm.size if comm is not None else 1
    if command is not None and ranks > 1:
        # The ranks' run goes on with as many ranks (the slabs are theirs).
        command = ["mpiexec", "-n", str(ranks), *command]
    hint = restart_hint(command, path)
    # From the start: a SIGTERM while the first kernels compile must not kill
    # the run before its first snapshot is written.
    with StopSignals(comm) as stop:
        return _run_flow(case, backend, quiet, path, out, restart, progress, stop, comm, hint,
                         profile)


def restart_hint(command, path):
    """What to type to continue a flow run from its index ``path``.

    Parameters
    ----------
    command : sequence of str or None
        The words that started the run, ``--restart`` left out (e.g.
        ``["bubbleflow", "run", "case.yaml", "-o", "out", "--set",
        "grid.nx=80"]``); None when they are not known.

    Returns
    -------
    str
        ``command`` with ``--restart PATH``, quoted for a POSIX shell; only
        ``--restart PATH`` without ``command``.
    """
    words = [*(command or ()), "--restart", os.fspath(path)]
    return shlex.join(words)


def _flow_solver(case, backend, comm, restart):
    """``(solver, state)`` of a flow run: one stepper for one process and
    for the ranks (on ranks the checkpoint read on the host, the slab's part
    moved to the backend); ``state`` None for a new run."""
    from ..compute.backend import get_backend
    from ..flow import flow_solver, warm_up
    from ..flow.partition import slab_state

    solver = flow_solver(case, backend, comm)
    if comm is None or comm.size == 1:
        # On one device the step's kernels compile beside the case build.
        warm_up.start(case, backend)
    if restart is None:
        return solver, None
    if solver.slab is None:
        return solver, open_restart(case, restart, backend, solver)
    whole = open_restart(case, restart, get_backend("numpy"), solver)
    return solver, slab_state(whole, solver.slab, backend.xp)


def _tracking(case, backend, comm, restart):
    """``(every, tracker)``: the steps between the bubble tracker's samples
    (:func:`~bubbleflow.flow.bubble_tracking.sample_interval`) and the
    tracker a restart continues (rank 0's; None for a new run, without
    tracking, or where the checkpoint holds none)."""
    from ..flow.bubble_tracking import sample_interval

    every = sample_interval(case.output.bubbles_every, backend)
    if restart is None or not every or (comm is not None and comm.rank):
        return every, None
    return every, restart_tracker(restart)


def _flow_writer(case, backend, comm, restart, path, grid):
    """The run's writer, with the file's header: new or resumed; on several
    ranks rank 0's behind the gathering :class:`.rank_writer.RankWriter`."""
    from ..io.flow_output import FlowWriter
    from ..io.result_header import header_attrs

    ranks = comm.size if comm is not None else 1
    device = backend.device_name if ranks == 1 else f"{ranks} ranks, {backend.device_name}"
    # (The writer adds mode, run status and run id.)
    attrs = header_attrs(version=__version__, case_yaml=case.to_yaml(), backend=backend.name,
                         device=device, precision=case.precision,
                         face_density=case.operator.face_density)
    writer = None
    s = case.solver
    # /solver described as a pressure result's is (io/layout.py, SOLVER_ATTRS).
    described = dict(levelset_method=case.levelset.method,
                     compression=Compression.for_output(case.output, "flow"), solver_attrs={
        "method": s.method, "variant": s.variant if s.method == "dpcg" else "",
        "preconditioner": s.preconditioner.type, "deflation": s.deflation.type,
        "rtol": float(s.rtol)})
    if comm is None or comm.rank == 0:
        writer = (FlowWriter.resume(path, restart, attrs, grid, **described)
                  if restart is not None else FlowWriter.create(path, attrs, grid, **described))
    if comm is None or comm.size == 1:
        return writer
    from .rank_writer import RankWriter

    return RankWriter(comm, writer)


def _run_flow(case, backend, quiet, path, out, restart, progress, stop, comm, hint,
              profile=None):
    import time as _time

    import numpy as np

    from ..io.flow_output import SnapshotWriteError
    from ..io.layout import WALL_SECONDS

    ranks = comm.size if comm is not None else 1
    loud = comm is None or comm.rank == 0           # one rank reports
    # The solver and the checkpoint before anything is moved aside: a bad
    # restart leaves the previous result where it was.
    with _part(profile, "case build"):
        solver, state = _flow_solver(case, backend, comm, restart)
    every, tracker = _tracking(case, backend, comm, restart)
    aside = out.set_aside() if out is not None else None
    if aside:
        _say(quiet, f"{case.name}: the previous result is kept as {aside} until this run finishes")
    writer = _profiled(profile, solver, _flow_writer(case, backend, comm, restart, path, solver.grid))
    with _part(profile, "case build"):
        state, previous_wall = _first_state(case, solver, state, writer, restart, quiet)
    bubbles = _sampling(profile, every, solver, writer, loud, tracker)
    g = solver.grid
    size = writer.diag["area" if "area" in writer.diag else "volume"]
    gas = size[0] > 0 if size else True
    _say(quiet, _opening_line(case, g, backend, gas, getattr(solver, "slab", None)))
    bar = _flow_bar(case, state, progress and not quiet)
    interval = case.output.interval
    t_wall = _time.perf_counter()
    failures, worst, iters, blown, status = 0, 0.0, [], False, "running"
    rep, reported = None, False
    try:
        if restart is None:
            bubbles.sample(state)
            write_run_snapshot(writer, solver, state, backend, bubbles.state())
        while state.time < case.time.end and stop.poll() is None:
            try:
                # Overflow on the way to a blow-up is detected and reported
                # below as one line; numpy's warnings would only add noise.
                with np.errstate(all="ignore"):
                    state, rep = solver.step(state)
            except (FloatingPointError, ValueError, ArithmeticError) as exc:
                if ranks > 1 and not getattr(exc, "agreed", False):
                    raise           # one rank's: the ranks end (run_case_ranks)
                # A blown-up flow: say so in one line; the completed
                # snapshots and rows stay in the files.
                _err(loud, f"error: {case.name}: the flow failed at step {state.step + 1} "
                      f"(t = {state.time:.6g}): {exc}")
                failures += 1
                blown = True
                break
            writer.write_step(rep)
            if profile is not None:
                profile.add_step(rep, case, solver)
            rec = rep.record
            iters.append(rec.iterations)
            worst = max(worst, rec.residual)
            if not rec.converged:
                failures += 1
                _err(loud, f"error: {case.name}: pressure solve failed at step {rep.step} "
                      f"(t = {rep.time:.6g}): reason {rec.reason}, {rec.iterations} iterations, "
                      f"true relative residual {rec.residual:.3e}")
            # A state outside the physical bounds (flow/bounds.py) is a blow-up,
            # finite or not; without gas the bubble quantities go unchecked.
            broken = solver.bounds.broken(rep, size[0] if gas else None)
            if broken:
                _err(loud, f"error: {case.name}: the flow left its physical bounds at step "
                      f"{rep.step} (t = {rep.time:.6g}): {broken}")
                failures += 1
                blown = True
                break
            bubbles.sample(state)
            on_snapshot = interval is not None and abs(rep.time / interval - round(rep.time / interval)) < 1e-9
            if on_snapshot or state.time >= case.time.end:
                write_run_snapshot(writer, solver, state, backend, bubbles.state())
            if bar is not None:
                bar.set_postfix_str(f"step {rep.step} dt {rep.dt:.2e} it {rec.iterations}", refresh=False)
                bar.update(rep.dt)
        if blown:
            status = "failed"
        elif state.time >= case.time.end:
            status = "finished"
        else:
            status = "stopped"
            if writer.last_snapshot_step != state.step:
                write_run_snapshot(writer, solver, state, backend, bubbles.state())
    except SnapshotWriteError as exc:
        reported = _write_failed(case.name, exc, path, hint, loud)
        failures, status = failures + 1, "failed"
    finally:
        if bar is not None:
            bar.close()
        wall = _time.perf_counter() - t_wall
        writer.set_attrs(**{WALL_SECONDS: previous_wall + wall})
        # Normal end, SIGTERM / SIGINT, a failure: the writer is waited for,
        # then the final index is committed.  On an exception (a second
        # Ctrl-C, an error) the snapshot in flight is finished and the index
        # on disk left as it is: it ends at the last snapshot, where a
        # restart goes on.
        if status != "running":
            status, failures = _close_writer(writer, status, case.name, path, hint,
                                              reported or not loud, failures)
        else:
            writer.wait(raise_error=False)
    if status == "finished" and out is not None:
        out.finished()
    if profile is not None:
        print(profile.table(), flush=True)
    gas_line = _gas_volume_line(case.name, case.levelset.method, g.ndim, gas, state.time,
                                writer.gas_volume_change, judged=failures == 0)
    if status == "stopped":
        return _say_stopped(case.name, quiet, loud, stop, state, hint, gas_line)
    _say_summary(quiet, state, wall, iters, worst, path, rep if failures == 0 and gas else None,
                 bubbles.gas_text(state.time))
    _say_gas_volume(quiet, gas_line)
    return 1 if failures else 0


def _say_stopped(name, quiet, loud, stop, state, hint, gas_line):
    """What a run stopped by a signal says (the gas volume, where it stopped
    and the command that continues it); its exit status, 128 + the signal."""
    import signal

    _say_gas_volume(quiet, gas_line)
    _err(loud, f"{name}: stopped by {stop.received} at t = {state.time:.6g} (step {state.step}); "
          f"state written; continue with: {hint}")
    return 128 + int(getattr(signal, stop.received))


def _say_summary(quiet, state, wall, iters, worst, path, last, gas=None):
    """The run's summary line, then the last report's diagnostics (``last``;
    None: none to say), named the whole gas phase's where the gas was
    several regions (``gas``, :meth:`.BubbleSampling.gas_text`)."""
    _say(quiet, f"{state.step} steps to t = {state.time:g} s in {wall:.1f} s; pressure iterations "
                f"mean {sum(iters) / max(len(iters), 1):.1f}, max {max(iters, default=0)}; "
                f"worst true residual {worst:.2e}; wrote {path}")
    if iters and last is not None:
        _say(quiet, _final_line(last.diagnostics, gas))


def _profiled(profile, solver, writer):
    """With a profile: the stepper's phase clock on, and the writer's calls
    timed as the output."""
    if profile is not None:
        solver.clock.enabled = True
    return _timed(profile, "output", writer, "write_step", "write_snapshot", "write_bubbles",
                  "close", "wait", "commit")


def _sampling(profile, every, solver, writer, lead, tracker):
    """The run's :class:`.bubble_sampling.BubbleSampling`, its samples timed
    as the profile's bubble tracking."""
    return _timed(profile, "bubble tracking",
                  BubbleSampling(every, solver, writer, lead=lead, tracker=tracker), "sample")


def _timed(profile, part, obj, *methods):
    """``obj`` with its ``methods`` timed as ``profile``'s ``part``
    (:class:`.run_profile.TimedCalls`); ``obj`` itself without a profile."""
    return obj if profile is None else TimedCalls(obj, profile, part, methods)


def _final_line(diagnostics, gas=None):
    """``final: area 0.19 m^2, ..., circularity 0.98 (-)``: the last
    diagnostics, each with its unit (``(-)``: dimensionless); ``final, the
    whole gas phase (GAS): ...`` where the gas is several regions."""
    def unit(name):
        u = SERIES_UNITS.get(name, "")
        return " (-)" if u == "1" else f" {u}" if u else ""
    head = "final: " if gas is None else f"final, the whole gas phase ({gas}): "
    return head + ", ".join(f"{k} {v:.6g}{unit(k)}" for k, v in diagnostics.items())


def _gas_volume_line(name, method, ndim, gas, time, change, judged=True):
    """``(text, warn)`` stating the gas volume ``change`` (None where the
    writer has no rows: on the ranks but 0).  ``warn`` beyond the tolerance,
    unless ``judged`` is False: a failed run's error line is what matters,
    this one is then information."""
    if change is None:
        return None
    what = "gas volume" if ndim == 3 else "gas volume (area in 2-D)"
    if not gas:
        return f"{what}: none (the flow has no gas)", False
    if not math.isfinite(change):
        return f"{what} change: not finite at t = {time:.6g} s", False
    text = (f"{what} changed by {100.0 * change:+.3g} % (relative change {change:+.2e}) from the "
            f"initial state to t = {time:.6g} s with levelset.method {method}")
    if abs(change) > GAS_VOLUME_TOLERANCE and judged:
        return f"warning: {name}: {text}, beyond {GAS_VOLUME_TOLERANCE:g}", True
    return f"{text} (tolerance {GAS_VOLUME_TOLERANCE:g})", False


def _say_gas_volume(quiet, line):
    """The gas volume line: on stdout, or on stderr as a warning."""
    if line is not None:
        text, warn = line
        _say(quiet, text, file=sys.stderr if warn else None)


def _first_state(case, solver, state, writer, restart, quiet):
    """``(state, wall seconds before)``: the checkpoint's on a restart, else
    the initial state, its row written."""
    from ..flow.navier_stokes import StepReport
    from ..io.layout import WALL_SECONDS

    if restart is not None:
        _say(quiet, f"{case.name}: restarting from {restart} at t = {state.time:g} (step {state.step})")
        return state, float(writer.attrs.get(WALL_SECONDS, 0.0))
    state = solver.initial_state()
    first = StepReport(step=0, time=0.0, dt=0.0, record=None, setup_seconds=0.0,
                       divergence=0.0, diagnostics=solver.diagnostics(state))
    writer.write_step(first, initial=True)
    return state, 0.0


def _flow_bar(case, state, enabled):
    """The progress bar of a flow run on a terminal (None otherwise)."""
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=case.time.end, initial=state.time, unit="s", unit_scale=False,
                bar_format="{l_bar}{bar}| t={n:.4f}/{total:g} s [{elapsed}<{remaining}] {postfix}",
                file=sys.stderr, dynamic_ncols=True)


def _opening_line(case, g, backend, gas, slab=None):
    """What a flow run does, in one line: grid, solver, how viscosity (saying
    so when ``auto`` chose it) and gravity enter, backend (and ranks: rank
    0's ``slab``)."""
    scheme = viscosity_scheme(case)
    viscosity = f"{scheme} (auto)" if case.momentum.viscosity == "auto" else scheme
    return (f"{case.name}: flow on {' x '.join(map(str, g.cells))} cells to t = {case.time.end:g} s; "
            f"solver {case.solver.method} + {case.solver.preconditioner.type} + "
            f"{case.solver.deflation.type}; viscosity {viscosity}, gravity "
            f"{case.momentum.gravity}; backend {backend.name} on {backend.device_name}"
            + ("" if gas else "; no gas: no bubble diagnostics")
            + (f"; {slab.size} ranks (slabs of {slab.hi - slab.lo} planes on rank 0)"
               if slab is not None else ""))


def write_run_snapshot(writer, solver, state, backend, tracker=None):
    """Hand the state to the writer: its fields are copied now and written in the background.

    ``p`` in the file is the whole pressure; with reduced gravity the
    dynamic pressure the solver carries is stored beside it, ``p_dynamic``,
    and a CLSVOF run's volume fraction ``c``: a restart reads both back (bit
    for bit), as it reads the bubble tracker's state ``tracker``
    (:meth:`.bubble_sampling.BubbleSampling.state`; None: none).  The
    solver's next step starts as a restart from it would
    (:meth:`.navier_stokes.FlowSolver.restart_point`)."""
    solver.restart_point()
    rho = solver.properties(state.phi)[1]
    total = solver.total_pressure(state.p, rho)
    extra = {} if state.c is None else {VOLUME_FRACTION: state.c}
    if total is not state.p:
        extra[DYNAMIC_PRESSURE] = state.p
        state = dataclasses.replace(state, p=total)
    writer.write_snapshot(state, rho, backend.to_host, extra=extra or None, tracker=tracker)


def _write_failed(name, exc, path, hint, loud=True):
    """One line for a failed write of the output (the run then ends as failed),
    with the command that continues it from its last checkpoint; True."""
    more = f"; continue from its last checkpoint with: {hint}" if os.path.exists(path) else ""
    _err(loud, f"error: {name}: {exc}{more}")
    return True


def _err(loud, text):
    if loud:
        print(text, file=sys.stderr, flush=True)


def _close_writer(writer, status, name, path, hint, reported, failures):
    """Wait for the writer, then commit the index with the final status.

    A write error (of the last snapshot, or of this commit) is reported in
    one line, unless one was already, and the run ends as failed; the index
    is then committed as failed if the disk allows (else the one on disk
    stays, ending at its last checkpoint).  Returns ``(status, failures)``.
    """
    from ..io.flow_output import SnapshotWriteError

    for final in (status, "failed"):
        try:
            writer.close(final)
            return final, failures + (final != status)
        except SnapshotWriteError as exc:
            if not reported:
                reported = _write_failed(name, exc, path, hint)
    return "failed", failures + (status != "failed")
