"""Run ``bubbleflow`` (one process or a rank under ``mpiexec``) and log when
its stop signals are in place and what each poll returns.

    python stop_signals_run.py LOGDIR [HOLD_POLL HOLD_SECONDS] -- bubbleflow arguments...

Each process appends to ``LOGDIR/rank<R>.log`` (R: its launcher rank), one
line an event, ``time.monotonic()`` (one clock for every process of the
machine) second::

    enter PID T     the run's SIGTERM / SIGINT handlers are in place
    polling T       a poll begins (the ranks' collective follows)
    poll T NAME     the poll that began at T returned NAME (``-`` for None)
    exit T          the run is about to put the previous handlers back

With ``HOLD_POLL HOLD_SECONDS``, rank 0 waits ``HOLD_SECONDS`` before its
poll number ``HOLD_POLL`` (from 1), as a slow rank would: the other ranks
wait in that poll's collective meanwhile.

The signals' handling is the package's own: the log is written around
:class:`bubbleflow.apps.stop_signals.StopSignals`'s methods, which run
unchanged.  A test sends the signal to the PID at an instant of its choosing
and reads from the log which polls came after it.
"""
import os
import sys
import time

from bubbleflow.apps import cli
from bubbleflow.apps.stop_signals import StopSignals
from bubbleflow.compute.comm import launcher_rank

logdir = sys.argv[1]
hold = sys.argv[2:sys.argv.index("--")]
hold_poll, hold_seconds = (int(hold[0]), float(hold[1])) if hold else (0, 0.0)
args = sys.argv[sys.argv.index("--") + 1:]
rank = launcher_rank()
log_path = os.path.join(logdir, f"rank{rank}.log")
polls = {"n": 0}


def log(text):
    with open(log_path, "a") as fh:
        fh.write(text + "\n")
        fh.flush()


enter, poll, leave = StopSignals.__enter__, StopSignals.poll, StopSignals.__exit__


def logged_enter(self):
    entered = enter(self)
    log(f"enter {os.getpid()} {time.monotonic():.6f}")
    return entered


def logged_poll(self):
    polls["n"] += 1
    if rank == 0 and polls["n"] == hold_poll:
        time.sleep(hold_seconds)
    began = time.monotonic()
    log(f"polling {began:.6f}")
    name = poll(self)
    log(f"poll {began:.6f} {name or '-'}")
    return name


def logged_exit(self, *exc):
    log(f"exit {time.monotonic():.6f}")
    return leave(self, *exc)


StopSignals.__enter__, StopSignals.poll, StopSignals.__exit__ = logged_enter, logged_poll, \
    logged_exit

sys.exit(cli.main(args))
