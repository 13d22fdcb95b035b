"""Run ``bubbleflow`` and SIGKILL itself at a chosen instant (a real kill, no hook in the package).

    python killed_run.py WHERE N -- bubbleflow arguments...

WHERE is where the N-th event kills the process:

* ``solve``: inside the N-th pressure solve (mid-step, between snapshots);
* ``snapshot``: while the N-th snapshot file is half written;
* ``before-index``: after the N-th snapshot file is in place, before the
  index that lists it is written;
* ``index``: while the N-th index file is half written.
"""
import os
import signal
import sys

import h5py

from bubbleflow.apps import cli
from bubbleflow.linalg.solver import PressureSolver

where, target = sys.argv[1], int(sys.argv[2])
args = sys.argv[sys.argv.index("--") + 1:]
count = {"n": 0}


def die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def tick():
    count["n"] += 1
    return count["n"] == target


if where == "solve":
    solve = PressureSolver.solve

    def killing_solve(self, *a, **kw):
        if tick():
            die()
        return solve(self, *a, **kw)

    PressureSolver.solve = killing_solve
else:
    create = h5py.Group.create_dataset

    def killing_create(self, name, *a, **kw):
        fname = os.path.basename(self.file.filename)
        if where == "snapshot" and fname.startswith(".step_") and name == "u" and tick():
            die()
        if where == "index" and not fname.startswith(".step_") and name == "residual_history" \
                and tick():
            die()
        return create(self, name, *a, **kw)

    h5py.Group.create_dataset = killing_create
    if where == "before-index":
        import bubbleflow.io.flow_output as fo

        write = fo.FlowWriter.write_snapshot
        commit = fo.FlowWriter.commit

        def counting_snapshot(self, *a, **kw):
            count["in_snapshot"] = True
            try:
                return write(self, *a, **kw)
            finally:
                count["in_snapshot"] = False

        def counting_commit(self, *a, **kw):
            if count.get("in_snapshot"):
                count["snap_done"] = count.get("snap_done", 0) + 1
                if count["snap_done"] >= target:
                    die()
            return commit(self, *a, **kw)

        fo.FlowWriter.write_snapshot = counting_snapshot
        fo.FlowWriter.commit = counting_commit

sys.exit(cli.main(args))
