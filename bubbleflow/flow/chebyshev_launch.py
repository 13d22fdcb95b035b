"""A Chebyshev sweep's launches on the device, and a rank's sweeps replayed
from CUDA graphs.

A sweep of the implicit viscous systems (:func:`.viscosity_cuda.chebyshev_sweep`,
:func:`.viscosity3_cuda.chebyshev_sweep`) is one launch a Chebyshev step of
a kernel that reads every system's arrays from a table of pointers and its
step's two coefficients from a schedule, both on the device.
:class:`SweepPlan` holds the two tables on the host and the launch; a
sweep uploads the tables and runs it.

On a rank's slab every step also waits for the exchange of the systems'
directions with the neighbours (:func:`.viscosity_cuda.slab_chebyshev_sweep`):
a few dozen NCCL groups a sweep, whose calls cost the host more than the
kernels take.  :class:`SlabSweepGraphs` keeps the slab's work arrays from
sweep to sweep and replays a sweep of the same step counts from one CUDA
graph, the tables uploaded into the buffers the graph reads.  CuPy is
imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute.held_capture import CAPTURABLE

__all__ = ["SweepPlan", "sweep", "SlabSweepGraphs", "GRAPHS_KEPT"]

#: Graphs kept for one set of slab shapes (a flow's sweeps settle on one or
#: two step counts: the oldest goes first).
GRAPHS_KEPT = 4


class SweepPlan:
    """A sweep's launches: ``kernel`` on ``grid`` x ``block`` once a step
    for ``steps`` steps, reading the device copies of ``table`` (the
    pointers of the arrays ``keep``, as bytes; the plan keeps them alive)
    and ``schedule`` (systems x width x 2)."""

    def __init__(self, kernel, grid, block, table, schedule, steps, keep):
        self.kernel, self.grid, self.block = kernel, grid, block
        self.table, self.schedule, self.steps = table, schedule, int(steps)
        self.keep = keep

    def upload(self):
        """New device copies of the two tables."""
        import cupy as cp

        return cp.asarray(self.table), cp.asarray(self.schedule)

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


def sweep(plan_of, systems, xs, rs, ds, schedules):
    """A one-process sweep: ``plan_of(systems, xs, rs, ds, spare,
    schedules)``'s plan (a module's ``sweep_plan``) on new spare directions,
    its tables uploaded and its launches run; ``xs``, or NotImplemented
    where the plan is."""
    import cupy as cp

    spare = [cp.empty_like(d) for d in ds]
    plan = plan_of(systems, xs, rs, ds, spare, schedules)
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
            entry = self._entries[key] = {"tables": plan.upload(), "graph": None, "seen": 0}
        else:
            for buffer, host in zip(entry["tables"], (plan.table, plan.schedule)):
                buffer.set(host)            # (in stream order: after the last replay's reads)
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
