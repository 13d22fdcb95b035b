"""How long snapshots hold up the time loop: synchronous against background writing.

    python3 scripts/snapshot_overlap_timing.py [CASE.yaml] [--set key=value ...]
                                               [--backend B] [--repeat R]

Runs the flow case (default ``cases/bubbly_column_flow.yaml`` at 512 x 1024
cells, ``output.interval`` 0.002 s to ``time.end`` 0.02 s: a snapshot every
few steps) twice per repeat, through ``bubbleflow run``'s own loop, into a
temporary folder: once with every snapshot written before the loop goes on
(``FlowWriter.background = False``, the synchronous reference) and once
with the background writer.  Printed per mode, all measured in the main
thread (what the time loop waits for, not the writer's own time):

* ``step``: median wall time of a loop iteration without a snapshot (the
  step and its diagnostics row);
* ``snap step``: mean (max) wall time of a loop iteration that hands over a
  snapshot: the step plus the ``write_snapshot`` call;
* ``write_snapshot``: mean (max) time the ``write_snapshot`` calls block
  the loop (sync: copy, snapshot file, index and sidecar; background: the
  copy, plus any wait for the previous snapshot still being written);
* ``after snap``: mean wall time of the iteration right after a snapshot
  (background: it runs beside the writer thread);
* ``close``: the final wait for the writer and the last index commit;
* ``wall``: the whole run.

The files of the two modes are compared dataset by dataset (timings aside).
Small CPU size: ``--set grid.nx=128 --set grid.ny=256 --backend numpy``.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import h5py
import numpy as np

from bubbleflow.apps.run import run_case
from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.io.flow_output import FlowWriter

DEFAULT_CASE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "cases", "bubbly_column_flow.yaml")
DEFAULT_SET = ["grid.nx=512", "grid.ny=1024", "output.interval=0.002", "time.end=0.02"]


class _Clock:
    """Main-thread timings of one run: loop iterations, snapshot calls, the final close."""

    def __init__(self):
        self.starts, self.snaps, self.close = [], [], 0.0

    def install(self):
        step, snap, close = FlowSolver.step, FlowWriter.write_snapshot, FlowWriter.close
        clock = self

        def timed_step(solver, state):
            clock.starts.append(time.perf_counter())
            return step(solver, state)

        def timed_snap(writer, *a, **kw):
            t = time.perf_counter()
            snap(writer, *a, **kw)      # (no synchronisation: a queued device copy shows
                                        # in the iteration's time, as the loop pays it)
            clock.snaps.append((len(clock.starts), time.perf_counter() - t))

        def timed_close(writer, *a, **kw):
            t = time.perf_counter()
            close(writer, *a, **kw)
            clock.close = time.perf_counter() - t
            clock.starts.append(t)      # the end of the last iteration

        FlowSolver.step, FlowWriter.write_snapshot, FlowWriter.close = \
            timed_step, timed_snap, timed_close
        return lambda: setattr_all(step, snap, close)

    def summary(self):
        iters = np.diff(self.starts)                 # iteration k: from step k to step k + 1
        snap_at = {k - 1: dt for k, dt in self.snaps if k >= 1}    # (0: before the loop)
        plain = [d for k, d in enumerate(iters) if k not in snap_at and k - 1 not in snap_at]
        with_snap = [iters[k] for k in snap_at if k < len(iters)]
        after = [iters[k + 1] for k in snap_at if k + 1 < len(iters)]
        blocks = [dt for _, dt in self.snaps]
        ms = 1e3
        return {"steps": len(iters), "snapshots": len(self.snaps),
                "step": ms * statistics.median(plain) if plain else float("nan"),
                "snap step": (ms * np.mean(with_snap), ms * np.max(with_snap)),
                "write_snapshot": (ms * np.mean(blocks), ms * np.max(blocks)),
                "after snap": ms * np.mean(after) if after else float("nan"),
                "close": ms * self.close}


def setattr_all(step, snap, close):
    FlowSolver.step, FlowWriter.write_snapshot, FlowWriter.close = step, snap, close


def read_all(index):
    out = {}
    with h5py.File(index, "r") as fh:
        fh.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset)
                      else None)
    return out


def _run(case, backend, background, folder):
    FlowWriter.background = background
    clock = _Clock()
    undo = clock.install()
    t = time.perf_counter()
    try:
        rc = run_case(case, backend, quiet=True, outdir=folder, progress=False, overwrite=True)
    finally:
        undo()
    wall = time.perf_counter() - t
    if rc != 0:
        sys.exit(f"the run failed (exit {rc})")
    out = clock.summary()
    out["wall"] = wall
    return out, read_all(os.path.join(folder, f"{case.name}.h5"))


def _same(a, b):
    return sorted(a) == sorted(b) and all(
        np.array_equal(a[k], b[k]) for k in a if not k.endswith("seconds"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", nargs="?", default=DEFAULT_CASE)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    case = load_case(args.case, DEFAULT_SET + args.set)
    backend = get_backend(args.backend)
    print(f"{case.name}: {case.grid.nx} x {case.grid.ny} cells, snapshot every "
          f"{case.output.interval:g} s to t = {case.time.end:g} s; backend {backend.name} on "
          f"{backend.device_name}; {os.cpu_count()} CPUs")
    head = (f"{'mode':<11}{'steps':>6}{'snaps':>6}{'step ms':>9}{'snap step ms':>18}"
            f"{'write_snapshot ms':>20}{'after snap ms':>15}{'close ms':>10}{'wall s':>8}")
    print(head)
    for r in range(args.repeat):
        files = {}
        for mode, background in (("sync", False), ("background", True)):
            with tempfile.TemporaryDirectory(prefix="bubbleflow-overlap-") as folder:
                s, files[mode] = _run(case, backend, background, folder)
            print(f"{mode:<11}{s['steps']:>6}{s['snapshots']:>6}{s['step']:>9.1f}"
                  f"{s['snap step'][0]:>10.1f} ({s['snap step'][1]:>5.1f})"
                  f"{s['write_snapshot'][0]:>12.1f} ({s['write_snapshot'][1]:>5.1f})"
                  f"{s['after snap']:>15.1f}{s['close']:>10.1f}{s['wall']:>8.2f}")
        print(f"  files identical: {_same(files['sync'], files['background'])}")


if __name__ == "__main__":
    main()
