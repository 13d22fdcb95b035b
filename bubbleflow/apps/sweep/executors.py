"""Running points on this machine: in this process, or a process pool with one GPU per worker."""
from __future__ import annotations

import os

from ...case.config import CaseError
from . import point
from .values import one_line

__all__ = ["visible_gpus", "run_inprocess", "run_pool", "failed_row", "record"]


def visible_gpus(requested, file):
    """GPU ids to pin workers to (``CUDA_VISIBLE_DEVICES`` entries); [] on the CPU.

    ``requested`` is a run's ``backend`` setting (auto, numpy or cupy).
    """
    from ...compute.backend import get_backend

    if requested == "numpy":
        return []
    try:
        return get_backend("cupy").visible_devices()
    except Exception as exc:  # noqa: BLE001 - BackendUnavailable, or a broken driver
        if requested == "cupy":
            raise CaseError(file, "backend", "got 'cupy'",
                            f"'auto' or 'numpy' on this machine (cupy unavailable: "
                            f"{one_line(exc)})", value="cupy") from None
        return []


def _init_worker(queue):
    """ProcessPoolExecutor initializer: pin this worker to its GPU, ignore Ctrl-C."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gpu = queue.get()
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)


def failed_row(point, exc):
    return {"run": point["run"], **point.get("params", {}), "status": "failed",
            "file": os.path.basename(point["path"]),
            "error": one_line(f"{type(exc).__name__}: {exc}")}


def record(done, point, result):
    """``done(point, result())``; a worker that died or was lost fails its run."""
    try:
        row = result()
    except Exception as exc:    # noqa: BLE001 - a dead or lost worker fails its run
        row = failed_row(point, exc)
    done(point, row)


def run_inprocess(points, done):
    for p in points:
        done(p, point.run_point(p))


def run_pool(points, done, workers, gpus):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    for i in range(workers):
        queue.put(gpus[i % len(gpus)] if gpus else None)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(queue,))
    try:
        futures = {pool.submit(point.run_point, p): p for p in points}
        for fut in as_completed(futures):
            record(done, futures[fut], fut.result)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
