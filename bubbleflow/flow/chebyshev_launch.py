"""A Chebyshev sweep's launches on the device, and a rank's sweeps replayed
from CUDA graphs.

A sweep of the implicit viscous systems (:func:`.viscosity_cuda.chebyshev_sweep`,
:func:`.viscosity3_cuda.chebyshev_sweep`) is one launch a Chebyshev step of
a kernel that reads every system's arrays from a table of pointers and its
step's two coefficients from a schedule, both on the device: the schedule
as the plan's kernel wrote it (:func:`chebyshev_plan`, where the solve's
scalars are), the table written by launches
(:func:`~bubbleflow.compute.launch_tables.device_table`), so that a sweep
is launches alone and a caller's CUDA graph can hold it.  :class:`SweepPlan`
holds the table on the host, the schedule and the launch.

On a rank's slab every step also waits for the exchange of the systems'
directions with the neighbours (:func:`.viscosity_cuda.slab_chebyshev_sweep`):
a few dozen NCCL groups a sweep, whose calls cost the host more than the
kernels take.  :class:`SlabSweepGraphs` keeps the slab's work arrays from
sweep to sweep and replays a sweep of the same step counts from one CUDA
graph, the tables written into the buffers the graph reads.  A sweep that
a caller captures (:func:`capturing`) takes arrays of its own, which the
caller's graph holds.  CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda
from ..compute.held_capture import CAPTURABLE
from ..compute.launch_tables import device_table

__all__ = ["SweepPlan", "sweep", "SlabSweepGraphs", "GRAPHS_KEPT", "chebyshev_plan",
           "device_schedule", "capturing"]

#: Graphs kept for one set of slab shapes (a flow's sweeps settle on one or
#: two step counts: the oldest goes first).
GRAPHS_KEPT = 4


class SweepPlan:
    """A sweep's launches: ``kernel`` on ``grid`` x ``block`` once a step
    for ``steps`` steps, reading the device copy of ``table`` (the
    pointers of the arrays ``keep``, as bytes; the plan keeps them alive)
    and the device array ``schedule`` (systems x width x 2, contiguous)."""

    def __init__(self, kernel, grid, block, table, schedule, steps, keep):
        self.kernel, self.grid, self.block = kernel, grid, block
        self.table, self.schedule, self.steps = table, schedule, int(steps)
        self.keep = keep

    def upload(self):
        """The tables the launches read: a new device copy of the table,
        written by launches, and the schedule."""
        return device_table(self.table, self.schedule), self.schedule

    def run(self, table_d, schedule_d, ds, spare, before_step=None):
        """The launches on the current stream.  ``before_step(k,
        directions)``, where given, runs before step ``k`` with each
        system's direction of that step (``ds`` on even steps, ``spare`` on
        odd ones: the kernel writes the next direction into the other)."""
        width = np.int32(self.schedule.shape[1])
        for k in range(self.steps):
            if before_step is not None:
                before_step(k, ds if k % 2 == 0 else spare)
            self.kernel(self.grid, self.block, (table_d, schedule_d, width, np.int32(k)))


def sweep(plan_of, systems, xs, rs, ds, schedule, steps):
    """A one-process sweep: ``plan_of(systems, xs, rs, ds, spare,
    schedule, steps)``'s plan (a module's ``sweep_plan``) on new spare
    directions, its table written and its launches run; ``xs``, or
    NotImplemented where the plan is."""
    import cupy as cp

    spare = [cp.empty_like(d) for d in ds]
    plan = plan_of(systems, xs, rs, ds, spare, schedule, steps)
    if plan is NotImplemented:
        return plan
    if plan.steps:
        plan.run(*plan.upload(), ds, spare)
    # (spare, the tables and the plan's arrays go back to CuPy's pool, whose
    # reuse is ordered on this stream, after the launches.)
    return xs


class SlabSweepGraphs:
    """A rank's slab sweeps: the work arrays of each system on its planes
    ``ext`` (``x``, ``r``, the direction and its spare), kept while the
    shapes stay; per step counts the tables' device buffers and a CUDA
    graph of the sweep's launches and exchanges, captured at the second
    sweep of those counts (the first is launched: NCCL sets up its
    connections at a call's first use, which a capture cannot hold) and
    replayed from the third.  Every rank sees the same step counts (the
    plans come from scalars summed over the ranks), so they capture and
    replay together, as their NCCL calls must."""

    def __init__(self):
        self._shapes, self.work, self._entries = None, [], {}
        #: Sweeps launched, captured and replayed (for the tests and benches).
        self.counts = {"launched": 0, "captured": 0, "replayed": 0}

    def arrays(self, shapes):
        """Per shape in ``shapes`` (one a system) its four flat float64 work
        arrays, zero where made; new shapes drop the graphs."""
        import cupy as cp

        shapes = tuple(tuple(s) for s in shapes)
        if shapes != self._shapes:
            self._drop(list(self._entries))
            self._shapes = shapes
            self.work = [[cp.zeros(int(np.prod(s)), dtype=np.float64) for _ in range(4)]
                         for s in shapes]
        return self.work

    def run(self, comm, plan, ds, spare, exchange, steps):
        """The sweep of ``plan`` on the kept arrays (``ds`` and ``spare``
        among them), its steps preceded by ``exchange``: replayed, captured
        then replayed, or launched.  ``steps``: each system's step count
        (which systems ``exchange`` swaps at a step).  The step counts are
        the graph's key: the shapes, and so the launch's grid and the
        tables' sizes, are those of :meth:`arrays`."""
        key = tuple(steps)
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= GRAPHS_KEPT:
                self._drop([next(iter(self._entries))])
            table, schedule = plan.upload()
            entry = self._entries[key] = {"tables": (table, schedule.copy()), "graph": None,
                                          "seen": 0}
        else:
            # (In stream order: after the last replay's reads.)
            table, schedule = entry["tables"]
            device_table(plan.table, table, out=table)
            schedule[...] = plan.schedule
        tables = entry["tables"]
        entry["seen"] += 1
        if (entry["graph"] is None and entry["seen"] == 2
                and getattr(comm, "name", None) in CAPTURABLE):
            entry["graph"] = self._capture(comm, plan, entry, ds, spare, exchange)
            if entry["graph"] is not None:
                self.counts["captured"] += 1
        if entry["graph"] is None:
            self.counts["launched"] += 1
            plan.run(*tables, ds, spare, exchange)
            return
        self.counts["replayed"] += 1
        entry["graph"].launch()
        replayed = getattr(comm, "replayed", None)
        if replayed is not None:
            replayed(entry["counts"])

    def _drop(self, keys):
        """Forget the graphs and tables of ``keys``, once the device is done
        with the work queued before (a replay may still be reading them)."""
        if keys:
            import cupy as cp

            cp.cuda.get_current_stream().synchronize()
        for key in keys:
            del self._entries[key]

    def _capture(self, comm, plan, entry, ds, spare, exchange):
        """One CUDA graph of the sweep (nothing run) on ``entry``'s tables;
        None on every rank where any rank could not capture."""
        import cupy as cp

        graph, tables = None, entry["tables"]
        stream = cp.cuda.Stream(non_blocking=True)
        # A counting communicator (the ranks' bench) counts the captured
        # calls apart and again at each replay; a plain one has no hook.
        counted = getattr(comm, "counted_during", lambda run: run())
        try:
            with stream:
                stream.begin_capture()
                try:
                    entry["counts"] = counted(lambda: plan.run(*tables, ds, spare, exchange))
                finally:
                    graph = stream.end_capture()
        except Exception:                   # capture unsupported here: launches
            graph = None
        if comm.sum_int(0 if graph is not None else 1):
            graph = None
        return comm.hold_graph(graph)


def device_schedule(schedule, systems):
    """A sweep's schedule as the table kernels read it (contiguous float64,
    ``systems`` x width x 2 on the device), or None."""
    import cupy as cp

    if not isinstance(schedule, cp.ndarray) or schedule.dtype != np.float64 \
            or schedule.ndim != 3 or schedule.shape[0] != systems or schedule.shape[2] != 2:
        return None
    return cp.ascontiguousarray(schedule)


def capturing():
    """Whether the current stream is being captured into a CUDA graph (a
    caller's: the sweep is then launched into it, on arrays it holds)."""
    import cupy as cp

    return cp.cuda.get_current_stream().is_capturing()


_plan_kernel = cuda.float64_kernels(__name__, "chebyshev_plan.cu", ("--fmad=false",))


def chebyshev_plan(totals, rtol, width, max_steps):
    """Twin of ``viscosity_chebyshev.chebyshev_plan``: one launch, a thread
    a system, where the scalars are."""
    import cupy as cp

    if totals.dtype != np.float64 or totals.ndim != 2 or totals.shape[1] != 5:
        return NotImplemented
    totals = cp.ascontiguousarray(totals)
    n = totals.shape[0]
    schedule = cp.empty((n, width, 2), dtype=np.float64)
    first, needed = cp.empty(n, dtype=np.float64), cp.empty(n, dtype=np.float64)
    _plan_kernel("bf_chebyshev_plan")((1,), (max(n, 1),), (
        totals, np.float64(rtol), np.int32(n), np.int32(width), np.int32(max_steps),
        schedule, first, needed))
    return schedule, first, needed
