"""One point of a study: run its case, read its file back into a summary row."""
from __future__ import annotations

import contextlib
import io
import math
import os
import re
import socket
import time

from ...case.config import CaseError, case_from_dict
from .summary import BENCHMARK
from .values import one_line

__all__ = ["run_point"]


def run_point(point):
    """Run one point of a study; return its summary row (never raises, bar Ctrl-C).

    Parameters
    ----------
    point : dict
        ``run``, ``params``, ``case`` (a resolved case dict), ``path`` (its
        HDF5 file), ``mode``; one of :attr:`Study.points`.

    Returns
    -------
    dict
        The row: ``run``, the parameter values, ``status`` and the results.
    """
    from ...compute.backend import get_backend
    from ...compute.host_memory import keep_freed_memory
    from ..run import run_case

    keep_freed_memory()             # a worker process's own allocator (compute/host_memory.py)
    t0 = time.perf_counter()
    row = {"run": point["run"], **point.get("params", {}), "status": "failed",
           "host": socket.gethostname(), "file": os.path.basename(point["path"]), "error": ""}
    path = point["path"]
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)         # a stale file from an interrupted attempt is not this run's
    log = io.StringIO()
    try:
        case = case_from_dict(point["case"], source=point["run"])
        backend = get_backend(case.backend)
        row["backend"], row["device"] = backend.name, backend.device_name
        row["gpu"] = backend.device_id()
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            rc = run_case(case, backend, quiet=True, progress=False)
        if rc in (128 + 2, 128 + 15):
            # A flow point stopped cleanly by Ctrl-C / SIGTERM: stop the sweep
            # too (its file is restartable; --resume runs the point again).
            raise KeyboardInterrupt
        if not os.path.isfile(path):
            raise RuntimeError(f"the run returned {rc} without writing {path}")
        row.update(_read_results(path, case.mode))
        row["status"] = "ok" if rc == 0 else "not_converged"
        if rc != 0:
            msgs = [ln for ln in log.getvalue().splitlines() if ln.strip()]
            err = next((ln for ln in msgs if ln.startswith("error:")), msgs[-1] if msgs else "")
            err = err.removeprefix("error:")
            err = re.sub(r";\s*wrote \S+\s*$", "", err.strip())    # the file is in `file`
            row["error"] = one_line(err) or f"exit code {rc}"
    except Exception as exc:    # noqa: BLE001 - a failed run is a row, not a crash
        row["status"] = "failed"
        msg = str(exc) if isinstance(exc, CaseError) else f"{type(exc).__name__}: {exc}"
        row["error"] = one_line(msg)
    row["wall_seconds"] = time.perf_counter() - t0
    return row


def _read_results(path, mode):
    """The result columns of one run's file (:func:`bubbleflow.io.result_reader.read_run`)."""
    import numpy as np

    from ...io.result_reader import read_run
    from ..validation import benchmark_quantities, summarise_run

    raw = read_run(path, fields=False)
    s = raw["solver"] or {}

    def series(name, dtype):
        values = s.get(name)
        return values if values is not None else np.zeros(0, dtype)

    its, res = series("iterations", np.int64), series("residual", np.float64)
    conv = series("converged", np.bool_)
    reasons = s.get("reason") or []
    bad = [r for r, c in zip(reasons, conv) if not c]
    out = {"residual": float(np.max(res)) if len(res) else math.nan,
           "converged": bool(np.all(conv)) if len(conv) else False,
           "reason": bad[0] if bad else (reasons[-1] if reasons else ""),
           "setup_seconds": float(np.sum(series("setup_seconds", np.float64))),
           "solve_seconds": float(np.sum(series("solve_seconds", np.float64)))}
    if mode != "flow":
        out["iterations"] = int(its[0]) if len(its) else None
        return out
    run = summarise_run(raw, path)
    out.update(iterations_mean=float(np.mean(its)) if len(its) else math.nan,
               iterations_max=int(np.max(its)) if len(its) else 0,
               pressure_solves=len(its), steps=int(run["solver"]["steps"]))
    q = benchmark_quantities(**run["diagnostics"])
    out.update({k: float(q[k]) for k in BENCHMARK if k in q})
    return out
