"""Run ``bubbleflow`` and SIGKILL itself at a chosen instant (a real kill, no hook in the package).

    python killed_run.py WHERE N -- bubbleflow arguments...

WHERE is where the N-th event kills the process:

* ``solve``: inside the time loop's N-th pressure solve (mid-step, between snapshots),
  once the snapshot writes handed to the background writer are done (the
  instant of a run with nothing in flight);
* ``writing``: inside the first pressure solve after the N-th snapshot was
  handed to the writer, while that snapshot is still being written (the
  writer is held before it writes the file: the time loop has gone on);
* ``snapshot``: while the N-th snapshot file is half written;
* ``before-index``: after the N-th snapshot file is in place, before the
  index that lists it is written;
* ``index``: while the N-th index file is half written.

The snapshot files and the index are written by the background writer
thread: the kills there come from that thread, while the time loop goes on
in the main thread (a SIGKILL from any thread ends the whole process).
"""
import os
import signal
import sys
import threading

import h5py

from bubbleflow.apps import cli
from bubbleflow.io import flow_output, result_writer
from bubbleflow.linalg.solver import PressureSolver

where, target = sys.argv[1], int(sys.argv[2])
args = sys.argv[sys.argv.index("--") + 1:]
count = {"n": 0}
lock = threading.Lock()
writers = []
held = threading.Event()


def die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def tick():
    with lock:
        count["n"] += 1
        return count["n"] == target


# Every writer of the run, so that "solve" can wait for them.
init = flow_output.FlowWriter.__init__


def recording_init(self, *a, **kw):
    init(self, *a, **kw)
    writers.append(self)


flow_output.FlowWriter.__init__ = recording_init

if where in ("solve", "writing"):
    solve = PressureSolver.solve

    def killing_solve(self, *a, **kw):
        # The time loop's solves only: on a GPU the warm-up steps a small
        # copy of the case in threads of its own, whose solves would shift
        # the count by however many of them had run by then.
        main = threading.current_thread() is threading.main_thread()
        if where == "solve" and main and tick():
            for w in writers:
                w.wait()
            die()
        if where == "writing" and held.is_set():
            die()
        return solve(self, *a, **kw)

    PressureSolver.solve = killing_solve

if where in ("writing", "before-index"):
    write = result_writer.write_snapshot

    def hooked_write(*a, **kw):
        if where == "writing" and tick():
            held.set()
            threading.Event().wait()        # held until the kill
        write(*a, **kw)
        if where == "before-index" and tick():
            die()

    result_writer.write_snapshot = hooked_write

if where in ("snapshot", "index"):
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

sys.exit(cli.main(args))
