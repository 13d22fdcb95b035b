"""A flow step on several ranks, phase by phase, beside a model of it:
``mpiexec -n N bubbleflow bench --flow``.

Every rank steps its slab (:func:`bubbleflow.flow.flow_solver` on the
ranks' communicator) with the phase clock on, as ``bench --flow`` does on
one process; the ranks wait for each other inside a step, so a phase takes
what its slowest rank takes: per step the maximum over the ranks, then the
median over the measured steps; the step is each rank's whole step, the
slowest rank's per step (a rank waiting in one phase for another's earlier
phase is not counted twice), then the median.  The output phase is left
out (on ranks the snapshot is gathered and written by rank 0: ``bubbleflow
run`` measures it).

The model of a step, per phase, is what the rank's share cannot avoid:

* its bytes (:mod:`.flow_floors`, the whole grid's over the ranks; the
  pressure solve's iterations times a rank's bytes per iteration: its
  engine's own count, else :data:`RANK_SOLVE_MODELS`) at the copy bandwidth
  each rank reaches while every rank copies;
* its messages, counted as the step sends them (:class:`CountingComm`
  between the stepper and the communicator; each phase charged with the
  messages sent before its clock mark): a halo swap at the link's latency
  plus its bytes at the link's bandwidth, an all-reduce (or another
  collective) at the all-reduce's latency;

the link measured in the same run (:func:`.ranks_model.measure_link`: swaps
of 8 bytes and of a plane, an all-reduce of one value);

* its issue time: what the phase takes where its bytes are next to none,
  the same case stepped on a small copy of its grid (:func:`small_cells`,
  every axis shrunk alike to :data:`SMALL_SIDE` cells on the shortest) by
  the same ranks, less that copy's messages at the model's rates; the
  pressure solve's per iteration, times the iterations at the full size.
  It is the host's part (launches, Python, synchronisations), which does
  not shrink with the grid, and the device's launch latencies.

A phase's model is its messages plus the larger of its bytes and its issue
time (the device works while the host issues).  Without the issue time
(a grid no larger than its small copy) the model is a lower bound: where a
phase takes many times it, the time goes to the host or to waiting for the
slowest rank.  Messages replayed from a CUDA graph are counted at each
replay.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .flow_floors import SOLVE, SOLVE_MODELS, phase_bytes
from .measure import release

#: A rank's bytes of one pressure iteration where its solver keeps no count,
#: per grid dimension: the 2-D model counts the whole grid (a rank: its
#: share), the 3-D one the solver's own arrays (a rank's: its slab's).
RANK_SOLVE_MODELS = {2: lambda case, solver, ranks: SOLVE_MODELS[2](case, solver) / ranks,
                     3: lambda case, solver, ranks: SOLVE_MODELS[3](case, solver)}

__all__ = ["CountingComm", "MESSAGE_KINDS", "RANKS_COLUMNS", "RANK_SOLVE_MODELS", "SMALL_SIDE",
           "measure_config_ranks", "small_cells", "issue_times", "model_rows",
           "format_ranks_table", "run_ranks_flow_bench"]

#: Cells on the shortest axis of the small copy that measures the issue time.
SMALL_SIDE = 32

#: The CSV's columns: one row per configuration and phase, then its ``step`` row.
RANKS_COLUMNS = ("case", "nx", "ny", "nz", "ranks", "comm", "backend", "phase", "median_ms",
                 "mean_ms", "rank_bytes", "memory_ms", "halo_swaps", "halo_bytes", "reductions",
                 "message_ms", "issue_ms", "model_ms", "ratio_to_model")

#: The communicator's methods a step calls, by the kind of message each is.
MESSAGE_KINDS = {
    "exchange": "halo", "start_exchange": "halo",
    "allreduce_sum": "reduce", "allreduce_into": "reduce", "allreduce_max": "reduce",
    "allreduce_maxima": "reduce", "allreduce_max_into": "reduce", "sum_int": "reduce",
    "gather": "collective", "gather_rows": "collective", "broadcast": "collective",
    "allgather": "collective", "allgather_into": "collective",
}


def _nbytes(a):
    """Bytes of an array argument (8 for a scalar, 0 for None or an object)."""
    if a is None:
        return 0
    if hasattr(a, "nbytes"):
        return int(a.nbytes)
    return 8 if isinstance(a, (int, float, np.number)) else 0


def _message_bytes(name, args):
    """Bytes a call sends: a swap its two planes (those with a neighbour),
    a reduction or a gather its operand."""
    if MESSAGE_KINDS[name] == "halo":
        lower, upper, send_lower, send_upper = args[:4]
        return (_nbytes(send_lower) if lower is not None else 0) + \
            (_nbytes(send_upper) if upper is not None else 0)
    return _nbytes(args[0]) if args else 0


class CountingComm:
    """A communicator that counts the messages passing through it.

    Every attribute is the wrapped communicator's; the methods of
    :data:`MESSAGE_KINDS` are counted (calls and bytes, by kind) before
    they run.  :meth:`take` returns the counts since the last take.  A
    solver that replays its messages from a CUDA graph counts its capture
    with :meth:`counted_during` and each replay with :meth:`replayed` (both
    looked up on the communicator, so a plain one needs neither).
    """

    def __init__(self, comm):
        self._comm = comm
        self._counts = {}

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        kind = MESSAGE_KINDS.get(name)
        if kind is None or not callable(attr):
            return attr

        def counted(*args, **kwargs):
            calls, sent = self._counts.get(kind, (0, 0))
            self._counts[kind] = (calls + 1, sent + _message_bytes(name, args))
            return attr(*args, **kwargs)
        return counted

    def take(self):
        """``{kind: (calls, bytes)}`` since the previous take."""
        out, self._counts = self._counts, {}
        return out

    def counted_during(self, run):
        """Call ``run()`` and return the counts of the calls it made, kept
        out of the running counts: a CUDA graph's capture, whose calls send
        nothing then but at each replay (:meth:`replayed`)."""
        saved, self._counts = self._counts, {}
        try:
            run()
        finally:
            made, self._counts = self._counts, saved
        return made

    def replayed(self, made):
        """Count ``made`` (from :meth:`counted_during`) once more: the
        messages of one replay of the graph captured then."""
        _add(self._counts, made)


def measure_config_ranks(config, bench, comm, say):
    """Step one configuration on the ranks of ``comm``: ``(names, ms,
    messages, figures)``, on every rank its own: ``ms[phase]`` per measured
    step, ``messages[phase][kind]`` the mean ``(calls, bytes)`` a step,
    ``figures`` the mean iterations and dt and a rank's solve bytes a step."""
    from ...flow import flow_solver

    counting = CountingComm(comm)
    flow = flow_solver(config.case, bench.backend, counting)
    flow.clock.enabled = True
    sent = {}
    flow.clock.listeners.append(
        lambda phase: _add(sent.setdefault(phase, {}), counting.take()))
    state = flow.initial_state()
    end = config.case.time.end
    steps = []
    for k in range(bench.skip + bench.steps):
        if state.time >= end:
            break
        counting.take()                             # (between steps: the set-up's, the last's)
        sent.clear()
        with np.errstate(all="ignore"):
            state, report = flow.step(state)
        if k == bench.skip - 1:
            say(f"{bench.skip} warm-up steps done")
        if k >= bench.skip:
            its = int(report.record.iterations)
            per_it = (getattr(report.record, "bytes_per_iteration", None)
                      or RANK_SOLVE_MODELS[config.case.grid.ndim](config.case, flow.pressure,
                                                                  comm.size))
            steps.append(dict(phases=dict(report.phases), sent={p: dict(v) for p, v in
                                                                  sent.items()},
                              iterations=its, dt=report.dt, solve_bytes=per_it * its))
    if not steps:
        raise RuntimeError(f"no step after the first {bench.skip} (the case ends at "
                           f"t = {end:g} s): lower --skip")
    names = list(dict.fromkeys(n for s in steps for n in s["phases"]))
    ms = {n: 1e3 * np.array([s["phases"].get(n, 0.0) for s in steps]) for n in names}
    messages = {}
    for n in names:
        totals = {}
        for s in steps:
            _add(totals, s["sent"].get(n, {}))
        messages[n] = {kind: (calls / len(steps), sent_bytes / len(steps))
                       for kind, (calls, sent_bytes) in totals.items()}
    figures = dict(iterations=float(np.mean([s["iterations"] for s in steps])),
                   dt=float(np.mean([s["dt"] for s in steps])), steps=len(steps),
                   solve_bytes=float(np.mean([s["solve_bytes"] for s in steps])))
    del flow, state
    release(bench.backend)
    return names, ms, messages, figures


def _add(totals, counts):
    for kind, (calls, sent_bytes) in counts.items():
        c, b = totals.get(kind, (0, 0))
        totals[kind] = (c + calls, b + sent_bytes)


def _message_seconds(kinds, link):
    """The model's time of a phase's messages ``{kind: (calls, bytes)}``."""
    seconds = 0.0
    for kind, (calls, sent_bytes) in kinds.items():
        if kind == "halo":
            seconds += calls * link.latency + sent_bytes / link.bandwidth
        else:
            seconds += calls * link.allreduce
    return seconds


def small_cells(cells, ranks):
    """The small copy's cells per axis (x first): every axis divided by the
    factor that brings the shortest to :data:`SMALL_SIDE`, the slabs' axis
    (the last) kept at 4 planes a rank or more; None where the grid is no
    larger than that already."""
    factor = min(cells) // SMALL_SIDE
    if factor <= 1:
        return None
    small = [max(n // factor, 1) for n in cells]
    small[-1] = max(small[-1], 4 * ranks)
    return tuple(small)


def issue_times(names, slowest_ms, messages, figures, link, iterations):
    """Per phase the issue time in ms (the module docstring) from the small
    copy's slowest-rank ``slowest_ms``, ``messages`` and ``figures`` (its
    iterations) at the ``link``'s rates; the pressure solve's scaled to
    ``iterations`` (the full size's mean)."""
    issue = {}
    for name in names:
        spent = float(np.median(slowest_ms[name])) - 1e3 * _message_seconds(
            messages.get(name, {}), link)
        if name == SOLVE:
            spent *= iterations / max(figures["iterations"], 1.0)
        issue[name] = max(spent, 0.0)
    return issue


def model_rows(case, ranks, names, slowest_ms, messages, figures, link, issue=None,
               step_ms=None):
    """One row per phase and a ``step`` row: the slowest rank's median ms
    beside the model's bytes, messages and (``issue``: per phase, ms, from
    :func:`issue_times`) issue time (the module docstring).  ``step_ms``:
    per step the slowest rank's whole step (:func:`_slowest`); without it
    the sum of the phases' rows."""
    issue = issue or {}
    rows = []
    for name in names:
        if name == SOLVE:
            moved = figures["solve_bytes"]
        else:
            whole = phase_bytes(case, name)
            moved = None if whole is None else whole / ranks
        kinds = messages.get(name, {})
        memory_ms = None if moved is None else 1e3 * moved / link.copy_bandwidth
        message_ms = 1e3 * _message_seconds(kinds, link)
        issue_ms = issue.get(name)
        model = max(memory_ms or 0.0, issue_ms or 0.0) + message_ms
        measured = float(np.median(slowest_ms[name]))
        rows.append(dict(phase=name, median_ms=measured, mean_ms=float(slowest_ms[name].mean()),
                         rank_bytes=moved, memory_ms=memory_ms,
                         halo_swaps=kinds.get("halo", (0, 0))[0],
                         halo_bytes=kinds.get("halo", (0, 0))[1],
                         reductions=sum(c for k, (c, _) in kinds.items() if k != "halo"),
                         message_ms=message_ms, issue_ms=issue_ms, model_ms=model,
                         ratio_to_model=measured / model if model > 0 else None))
    total = sum(slowest_ms.values()) if step_ms is None else np.asarray(step_ms)
    model = sum(r["model_ms"] for r in rows)
    rows.append(dict(phase="step", median_ms=float(np.median(total)), mean_ms=float(total.mean()),
                     rank_bytes=sum(r["rank_bytes"] or 0 for r in rows),
                     memory_ms=sum(r["memory_ms"] or 0 for r in rows),
                     halo_swaps=sum(r["halo_swaps"] for r in rows),
                     halo_bytes=sum(r["halo_bytes"] for r in rows),
                     reductions=sum(r["reductions"] for r in rows),
                     message_ms=sum(r["message_ms"] for r in rows),
                     issue_ms=(sum(r["issue_ms"] or 0 for r in rows) if issue else None),
                     model_ms=model,
                     ratio_to_model=float(np.median(total)) / model if model > 0 else None))
    return rows


def format_ranks_table(title, ranks, comm_name, rows, figures, link):
    """The table of :func:`model_rows`, with its title and the link's figures."""
    lines = [f"# {title} on {ranks} ranks ({comm_name}): {figures['steps']} steps, mean dt "
             f"{figures['dt']:.4g} s, {figures['iterations']:.1f} pressure iterations a step",
             f"# link: latency {1e6 * link.latency:.1f} us, bandwidth "
             f"{link.bandwidth / 1e9:.3g} GB/s, all-reduce {1e6 * link.allreduce:.1f} us; "
             f"a rank's copy {link.copy_bandwidth / 1e9:.3g} GB/s",
             f"{'phase':<18} {'slowest ms':>10} {'swaps':>7} {'MB sent':>8} {'reduces':>7} "
             f"{'bytes ms':>9} {'msgs ms':>8} {'issue ms':>9} {'model ms':>9} {'x model':>8}"]
    for r in rows:
        ratio = f"{r['ratio_to_model']:8.3g}" if r["ratio_to_model"] else f"{'-':>8}"
        memory = f"{r['memory_ms']:9.3g}" if r["memory_ms"] is not None else f"{'-':>9}"
        issue = f"{r['issue_ms']:9.3g}" if r.get("issue_ms") is not None else f"{'-':>9}"
        lines.append(f"{r['phase']:<18} {r['median_ms']:10.3f} {r['halo_swaps']:7.1f} "
                     f"{r['halo_bytes'] / 1e6:8.3f} {r['reductions']:7.1f} {memory} "
                     f"{r['message_ms']:8.3g} {issue} {r['model_ms']:9.3g} {ratio}")
    return "\n".join(lines)


def _issue_of_small_copy(config, bench, comm, say, figures):
    """The issue times of ``config`` (:func:`issue_times`) from its case
    stepped on :func:`small_cells` by the same ranks (rank 0; None
    elsewhere, and where the grid is small already)."""
    from dataclasses import replace

    from ...case.config import case_from_dict
    from .flow_cases import case_at_cells
    from .ranks_model import measure_link

    cells = small_cells(config.case.grid.cells, comm.size)
    if cells is None:
        return None
    data = config.case.to_dict()
    source = f"bench --flow ({config.title}, its small copy)"
    small, _ = case_at_cells(lambda overrides: case_from_dict(data, source, overrides), [],
                             cells, "the small copy")
    copy = replace(config, case=small)
    say(f"its small copy at {' x '.join(map(str, cells))} (the issue time)")
    names, ms, messages, small_figures = measure_config_ranks(copy, bench, comm, say)
    link = measure_link(comm, 8 * int(np.prod(cells[:-1])), bench.backend)
    slowest, _ = _slowest(comm, names, ms)
    most = _most_messages(comm, names, messages)
    if comm.rank != 0:
        return None
    return issue_times(names, slowest, most, small_figures, link, figures["iterations"])


def _slowest(comm, names, ms):
    """``(phases, step)`` on rank 0 (None elsewhere): per phase and step the
    slowest rank's ms, and per step the slowest rank's whole step (the sum
    of its phases).  A rank that waits in one phase for another rank's
    earlier phase is slowest there, the other rank in the earlier phase:
    the sum of the phases' maxima would count that time twice."""
    local = np.stack([ms[n] for n in names])
    gathered = comm.gather(local, root=0)
    if comm.rank != 0:
        return None, None
    ranks = np.stack(list(gathered))                    # ranks x phases x steps
    slowest = np.max(ranks, axis=0)
    return {n: slowest[i] for i, n in enumerate(names)}, np.max(ranks.sum(axis=1), axis=0)


def _most_messages(comm, names, messages):
    """Per phase and kind the most ``(calls, bytes)`` of any rank (rank 0;
    None elsewhere).  Gathered as an array: phases x kinds x (calls, bytes)."""
    kinds = sorted(set(MESSAGE_KINDS.values()))
    local = np.array([[messages.get(n, {}).get(k, (0.0, 0.0)) for k in kinds] for n in names],
                     dtype=np.float64).reshape(len(names), len(kinds), 2)
    gathered = comm.gather(local, root=0)
    if comm.rank != 0:
        return None
    most = np.max(np.stack(list(gathered)), axis=0)
    return {n: {k: (float(most[i, j, 0]), float(most[i, j, 1])) for j, k in enumerate(kinds)
                if most[i, j, 0] > 0} for i, n in enumerate(names)}


def run_ranks_flow_bench(comm, bench, out=None, err=None):
    """Every configuration of ``bench`` on the ranks of ``comm``; rank 0
    prints each table (and writes the CSV); returns ``(rows, failures)``
    on rank 0, ``([], failures)`` elsewhere.  A configuration that fails
    on one rank ends every rank (the caller's handler), as the run does."""
    from ...io.atomic import atomic_text
    from ..tables import csv_text
    from .ranks_model import measure_link

    out = out or sys.stdout
    err = err or sys.stderr
    lead = comm.rank == 0
    rows = []
    t_start = time.perf_counter()
    for i, config in enumerate(bench.configs, 1):
        def say(text, i=i, config=config):
            if bench.progress and lead:
                print(f"bench --flow [{i}/{len(bench.configs)}] {config.title} on {comm.size} "
                      f"ranks: {text} ({time.perf_counter() - t_start:.0f} s)", file=err,
                      flush=True)

        say("started")
        names, ms, messages, figures = measure_config_ranks(config, bench, comm, say)
        g = config.case.grid
        plane = 8 * int(np.prod(g.cells[:-1]))
        link = measure_link(comm, plane, bench.backend)
        slowest, step = _slowest(comm, names, ms)
        most = _most_messages(comm, names, messages)
        issue = _issue_of_small_copy(config, bench, comm, say, figures)
        if not lead:
            continue
        these = model_rows(config.case, comm.size, names, slowest, most, figures, link, issue,
                           step)
        for r in these:
            r.update(case=config.label, nx=g.nx, ny=g.ny, nz=g.nz, ranks=comm.size,
                     comm=comm.name, backend=bench.backend.name)
        rows.extend(these)
        say(f"finished: {these[-1]['median_ms']:.3f} ms per step")
        print("\n" + format_ranks_table(config.title, comm.size, comm.name, these, figures,
                                        link), file=out, flush=True)
        if bench.csv:
            atomic_text(bench.csv, csv_text(RANKS_COLUMNS, rows))
    return rows, 0
