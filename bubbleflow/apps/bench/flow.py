"""Where a flow time step's time goes, phase by phase, beside each phase's floor: ``bubbleflow bench --flow``.

::

    bubbleflow bench --flow [--cases hysing,column,rising3d,column3d,CASE.yaml]
                            [--sizes NX|NXxNY|NXxNYxNZ ...] [--steps N] [--skip K]
                            [--set KEY=VALUE ...] [--backend auto|numpy|cupy] [--copy-mib M]
                            [--csv FILE|FOLDER] [--no-progress]

Each configuration is a case at a size, 2-D or 3-D: a named case of
:data:`.flow_cases.NAMED_CASES` at its default sizes (on the GPU Hysing case
1 at nx = 80, 160, 320, the bubbly-column flow at nx = 512, 1024, 2048, the
3-D rising bubble and 3-D bubbly column at nx = 128, 256, 512; the other
axes from the case's aspect; smaller on the CPU) or at ``--sizes``, or a
case file's path.  Each runs ``K + N`` steps of its
:class:`~bubbleflow.flow.navier_stokes.FlowSolver` with the phase clock on
(every phase ends with a device synchronisation, so each is charged with its
own device work; the step is slower than an unprofiled one), then ``N`` more
with the clock off, each timed whole (one synchronisation a step, as a run
paces itself): the step as a run takes it.  The
first ``K`` steps (compilation, first use) are not measured.  The phases are
those the steps report (:attr:`StepReport.phases`), plus ``output``: one
snapshot written through :class:`~bubbleflow.io.flow_output.FlowWriter` into
a temporary folder (the density computed and every field copied to the host
and written, as a run does), amortised per step by the case's
``output.interval`` over the mean time step, plus the per-step row each
step adds to the writer.

Each phase is set beside its bandwidth floor (:mod:`.flow_floors`): the
bytes it must move over the copy bandwidth measured in the same run (the
device's; the host's for the output).  A phase moves whole-grid fields (all
the grid's cells, 2-D or 3-D), each input read once and each output written
once, their count per phase from the case (a component per axis for a
velocity, CLSVOF's volume fraction where the case uses it); the pressure
solve moves its iterations times the solver's bytes per iteration; the
output, the snapshot's fields written once on the host.  A phase the flow
reports that :data:`.flow_floors.PHASE_FIELDS` does not list gets no floor.

Exit codes: 0 when every configuration ran, 1 when one failed (it is
recorded and the others go on), 2 for bad arguments (one ``error:`` line,
nothing run).
"""
from __future__ import annotations

import dataclasses
import math
import os
import sys
import tempfile
import time

import numpy as np

from ..run import write_run_snapshot
from .flow_cases import subdomain_counts, uses_subdomains
from .flow_floors import OUTPUT, SOLVE, phase_floors, solve_bytes_per_iteration
from .flow_report import FLOW_COLUMNS, format_flow_table, write_flow_csv
from .measure import copy_bandwidth, device_info, machine_lines, release

__all__ = ["run_flow_bench", "measure_config", "SNAPSHOT_REPEAT"]

#: Snapshots timed after the measured steps (the median is used).
SNAPSHOT_REPEAT = 3


def _writer(case, backend, flow, folder):
    """A :class:`FlowWriter` in ``folder`` with the run's header, as ``bubbleflow run`` makes it."""
    from ... import __version__
    from ...io.flow_output import FlowWriter
    from ...io.result_header import header_attrs

    attrs = header_attrs(version=__version__, case_yaml=case.to_yaml(), backend=backend.name,
                         device=backend.device_name, precision=case.precision,
                         face_density=case.operator.face_density)
    return FlowWriter.create(os.path.join(folder, f"{case.name}.h5"), attrs, flow.grid)


def _snapshot(flow, writer, state, backend):
    """One snapshot as a run writes it (:func:`..run.write_run_snapshot`: the
    density, the fields to the host, file, index, sidecar).

    Returns ``(loop seconds, seconds until written)``: the time the call holds
    up the step loop, and until the snapshot is on disk (the same for a
    writer that writes in the calling thread; more for one that writes in
    the background, whose :meth:`wait` it waits for).
    """
    wait = getattr(writer, "wait", None)
    if wait is not None:
        wait()                                   # the previous snapshot, untimed
    t0 = backend.clock()
    write_run_snapshot(writer, flow, state, backend)
    t1 = backend.clock()
    if wait is not None:
        wait()
    return t1 - t0, time.perf_counter() - t0


def _run_steps(flow, state, writer, bench, say):
    """The warm-up and measured steps: per-step phases, solves, dts, writer rows."""
    steps = []
    end = flow.case.time.end
    gas = _gas(writer)
    for k in range(bench.skip + bench.steps):
        if state.time >= end:
            break
        with np.errstate(all="ignore"):
            state, report = flow.step(state)
        t0 = time.perf_counter()
        writer.write_step(report)
        row_s = time.perf_counter() - t0
        if k == bench.skip - 1:
            say(f"{bench.skip} warm-up steps done")
        if k >= bench.skip:
            per_it = solve_bytes_per_iteration(flow.case, report.record, flow.pressure)
            its = int(report.record.iterations)
            steps.append(dict(phases=dict(report.phases), dt=report.dt, row_s=row_s,
                              iterations=its, solve_bytes=per_it * its,
                              per_it=per_it, converged=bool(report.record.converged)))
        _check_bounds(flow, report, gas)
    return state, steps


def _gas(writer):
    """The gas's area or volume at the start (None: no gas, nothing to check)."""
    size = writer.diag["area" if "area" in writer.diag else "volume"]
    return size[0] if size and size[0] > 0 else None


def _check_bounds(flow, report, gas):
    """The run's check (flow/bounds.py): a flow outside its physical bounds is
    no flow to time."""
    broken = flow.bounds.broken(report, gas)
    if broken:
        raise FloatingPointError(f"the flow left its physical bounds at step {report.step} "
                                 f"(t = {report.time:.6g}): {broken}")


def _run_unclocked(flow, state, writer, bench):
    """``bench.steps`` more steps with the phase clock off, each with its
    writer row, timed whole (the device synchronised at each end): ms a step."""
    flow.clock.enabled = False
    backend, end, gas = flow.backend, flow.case.time.end, _gas(writer)
    out = []
    try:
        for _ in range(bench.steps):
            if state.time >= end:
                break
            t0 = backend.clock()
            with np.errstate(all="ignore"):
                state, report = flow.step(state)
            writer.write_step(report)
            out.append(1e3 * (backend.clock() - t0))
            _check_bounds(flow, report, gas)
    finally:
        flow.clock.enabled = True
    return state, np.array(out)


def measure_config(config, bench, say):
    """Run one configuration: ``(phase names, {phase: per-step ms array}, summary dict)``."""
    from ...flow.navier_stokes import FlowSolver, StepReport

    case, backend = config.case, bench.backend
    flow = FlowSolver(case, backend)
    flow.clock.enabled = True
    state = flow.initial_state()
    with tempfile.TemporaryDirectory(prefix="bubbleflow-bench-flow-") as folder:
        writer = _writer(case, backend, flow, folder)
        try:
            first = StepReport(step=0, time=0.0, dt=0.0, record=None, setup_seconds=0.0,
                               divergence=0.0, diagnostics=flow.diagnostics(state))
            writer.write_step(first, initial=True)
            _snapshot(flow, writer, state, backend)       # untimed: first use of HDF5
            t0 = time.perf_counter()
            state, steps = _run_steps(flow, state, writer, bench, say)
            loop_s = time.perf_counter() - t0
            if not steps:
                raise RuntimeError(f"no step after the first {bench.skip} (the case ends at "
                                   f"t = {case.time.end:g} s): lower --skip")
            state, unclocked = _run_unclocked(flow, state, writer, bench)
            snaps = [_snapshot(flow, writer, dataclasses.replace(state, step=state.step + i),
                               backend) for i in range(SNAPSHOT_REPEAT)]
        finally:
            writer.close()                # (a background writer: waits for it, then stops)
        files = os.listdir(writer.folder)
        snapshot_bytes = sum(os.path.getsize(os.path.join(writer.folder, f))
                             for f in files) / max(len(files), 1)
    del flow, state, writer
    release(backend)
    return _summarise(case, steps, snaps, loop_s, snapshot_bytes, unclocked)


def _summarise(case, steps, snaps, loop_s, snapshot_bytes, unclocked):
    """Per-phase ms arrays (output included) and the configuration's figures."""
    names = []
    for s in steps:
        names += [n for n in s["phases"] if n not in names]
    ms = {n: 1e3 * np.array([s["phases"].get(n, 0.0) for s in steps]) for n in names}
    dts = np.array([s["dt"] for s in steps])
    mean_dt = float(dts.mean())
    interval = case.output.interval
    # Snapshots per step: one per output interval, or the start and the end only.
    rate = min(1.0, mean_dt / interval) if interval else min(1.0, 2 * mean_dt / case.time.end)
    snap_ms = 1e3 * np.array([loop for loop, _ in snaps])
    written_ms = 1e3 * np.array([written for _, written in snaps])
    rows_ms = 1e3 * np.array([s["row_s"] for s in steps])
    ms[OUTPUT] = rows_ms + rate * float(snap_ms.mean())
    its = np.array([s["iterations"] for s in steps])
    solve_ms = ms.get(SOLVE)
    summary = dict(
        steps=len(steps), dt_mean=mean_dt, snapshot_ms=float(np.median(snap_ms)),
        snapshot_written_ms=float(np.median(written_ms)),
        snapshots_per_step=rate, snapshot_bytes=snapshot_bytes,
        output_median_ms=float(np.median(rows_ms) + rate * np.median(snap_ms)),
        iterations_mean=float(its.mean()), iterations_max=int(its.max()),
        ms_per_iteration=(float(solve_ms.sum() / its.sum()) if solve_ms is not None
                          and its.sum() else None),
        bytes_per_iteration=int(np.median([s["per_it"] for s in steps])),
        solve_bytes=float(np.mean([s["solve_bytes"] for s in steps])),
        unconverged=int(sum(not s["converged"] for s in steps)), loop_s=loop_s,
        # The step with the clock off, its snapshots amortised as the output phase's.
        unclocked_ms=(np.asarray(unclocked) + rate * float(snap_ms.mean())
                      if len(unclocked) else None))
    return names + [OUTPUT], ms, summary


def _header(bench, out):
    info = device_info(bench.backend)
    bench.device = info["device"]
    gpu = bench.backend.on_device
    mib = bench.copy_mib or (512 if gpu else 64)
    bench.copy_bw, found = copy_bandwidth(bench.backend, mib * 2 ** 20)
    if gpu:
        from ...compute.backend import get_backend

        bench.host_bw = copy_bandwidth(get_backend("numpy"), 64 * 2 ** 20)[0]
    else:
        bench.host_bw = bench.copy_bw
    print("# bubbleflow bench --flow: where a flow step's time goes, phase by phase, beside "
          "each phase's bandwidth floor", file=out)
    print("\n".join(machine_lines(
        info, bench.backend, mib, bench.copy_bw, found,
        f"; host {bench.host_bw / 1e9:.0f} GB/s (the output's floor)" if gpu else "")), file=out)
    print(f"# {bench.steps} measured steps after {bench.skip} warm-up steps per configuration; "
          "phase clock on (a device synchronisation after every phase)"
          + (f"; --set {' '.join(bench.overrides)}" if bench.overrides else ""), file=out)
    out.flush()


def run_flow_bench(bench, out=None, err=None):
    """Run every configuration of ``bench`` (a :class:`FlowBench`); returns ``(rows, failures)``.

    Prints the header, then each configuration's table as it finishes, on
    ``out``; a line as each configuration starts and finishes on ``err``.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    _header(bench, out)
    rows, failures = [], 0
    total = len(bench.configs)
    t_start = time.perf_counter()
    try:
        for i, config in enumerate(bench.configs, 1):
            def say(text, i=i, config=config):
                if bench.progress:
                    print(f"bench --flow [{i}/{total}] {config.title}: {text} "
                          f"({time.perf_counter() - t_start:.0f} s)", file=err, flush=True)

            say(f"started; {config.subdomains_note}")
            try:
                names, ms, summary = measure_config(config, bench, say)
            except Exception as exc:
                failures += 1
                release(bench.backend)
                reason = f"failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                these = [_failed_row(config, bench, reason)]
                say(reason)
                print(f"\n# {config.title}: {reason}", file=out, flush=True)
            else:
                these = _rows(config, bench, names, ms, summary)
                say(f"finished: {these[-1]['mean_ms']:.3f} ms per step")
                print("\n" + format_flow_table(config, bench, these), file=out, flush=True)
            rows.extend(these)
            if bench.csv:
                write_flow_csv(bench.csv, rows)
    finally:
        if bench.csv and rows:
            write_flow_csv(bench.csv, rows)
            print(f"\n# wrote {bench.csv} ({len(rows)} rows, {len(FLOW_COLUMNS)} columns)",
                  file=out, flush=True)
    return rows, failures


def _base_row(config, bench):
    case = config.case
    g = case.grid
    d = case.solver.deflation
    return dict(
        case=config.label, name=case.name, nx=g.nx, ny=g.ny, nz=g.nz, cells=math.prod(g.cells),
        h=min(length / n for length, n in zip(g.lengths, g.cells)),
        interface=case.levelset.method, deflation=d.type,
        subdomains=("x".join(map(str, subdomain_counts(case))) if uses_subdomains(case)
                    else None),
        backend=bench.backend.name, device=bench.device, copy_gb_s=bench.copy_bw / 1e9,
        host_copy_gb_s=bench.host_bw / 1e9, skip=bench.skip, time_end=case.time.end,
        output_interval=case.output.interval)


def _failed_row(config, bench, reason):
    row = {c: None for c in FLOW_COLUMNS}
    row.update(_base_row(config, bench), status=reason)
    return row


def _rows(config, bench, names, ms, summary):
    """One CSV row per phase, then the ``step`` row (every phase, output included)."""
    case = config.case
    floors = phase_floors(case, names, summary["solve_bytes"], bench.copy_bw, bench.host_bw)
    rate = summary["snapshots_per_step"]
    total = sum(ms.values())
    total_mean = float(total.mean())
    base = _base_row(config, bench)
    wall_per_sim = total_mean / 1e3 / summary["dt_mean"]
    base.update(
        steps=summary["steps"], dt_mean=summary["dt_mean"],
        iterations_mean=summary["iterations_mean"], iterations_max=summary["iterations_max"],
        ms_per_iteration=summary["ms_per_iteration"],
        bytes_per_iteration=summary["bytes_per_iteration"],
        unconverged_solves=summary["unconverged"], snapshot_ms=summary["snapshot_ms"],
        snapshot_written_ms=summary["snapshot_written_ms"],
        snapshots_per_step=rate, snapshot_bytes=summary["snapshot_bytes"],
        step_ms=total_mean, ns_per_cell=1e6 * total_mean / base["cells"],
        wall_s_per_sim_s=wall_per_sim,
        projected_wall_s=wall_per_sim * case.time.end, status="ok")
    rows, floor_sum = [], 0.0
    for name in names:
        mean = float(ms[name].mean())
        median = (summary["output_median_ms"] if name == OUTPUT else float(np.median(ms[name])))
        moved, floor = floors.get(name, (None, None))
        if name == OUTPUT:
            moved, floor = moved * rate, floor * rate
        floor_sum += floor or 0.0
        rows.append(dict(base, phase=name, median_ms=median, mean_ms=mean,
                         share=mean / total_mean if total_mean else None, bytes_per_step=moved,
                         floor_ms=floor, ratio_to_floor=mean / floor if floor else None))
    mean = sum(r["mean_ms"] for r in rows)
    unclocked = summary.get("unclocked_ms")
    if unclocked is not None:
        # The configuration's step with the clock off, on each of its rows.
        off = dict(clock_off_median_ms=float(np.median(unclocked)),
                   clock_off_mean_ms=float(unclocked.mean()),
                   clock_off_ratio_to_floor=float(unclocked.mean()) / floor_sum
                   if floor_sum else None)
        for r in rows:
            r.update(off)
        base = dict(base, **off)
    rows.append(dict(base, phase="step", median_ms=float(np.median(total)), mean_ms=mean,
                     share=1.0, bytes_per_step=sum(r["bytes_per_step"] or 0 for r in rows),
                     floor_ms=floor_sum, ratio_to_floor=mean / floor_sum if floor_sum else None))
    return rows
