"""Running points on a Dask distributed cluster (a scheduler, or a LocalCluster with pinned GPUs)."""
from __future__ import annotations

import contextlib
import os

from ...case.config import CaseError
from . import point
from .executors import record
from .values import one_line

__all__ = ["dask_distributed", "dask_connect", "run_dask"]


def dask_distributed():
    try:
        import distributed
    except ImportError as exc:
        raise CaseError("--executor dask", None, f"dask.distributed is not installed ({exc})",
                        "pip install bubbleflow[dask]") from None
    return distributed


class _PinGpu:
    """Dask worker plugin: pin each LocalCluster worker to one GPU (by worker name)."""

    name = "bubbleflow-pin-gpu"

    def __init__(self, gpus):
        self.gpus = list(gpus)

    def setup(self, worker):
        try:
            idx = int(worker.name)
        except (TypeError, ValueError):
            idx = abs(hash(worker.name))
        os.environ["CUDA_VISIBLE_DEVICES"] = str(self.gpus[idx % len(self.gpus)])

    def teardown(self, worker):
        pass


def dask_connect(scheduler, workers, gpus):
    """``(client, cluster)``: a client of ``scheduler``, or of a new LocalCluster."""
    import logging

    distributed = dask_distributed()
    if scheduler:
        try:
            return distributed.Client(scheduler, timeout="20s"), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise CaseError(f"--scheduler {scheduler}", None,
                            f"cannot connect ({one_line(exc)})",
                            "the address of a running dask scheduler, e.g. tcp://host:8786") from None
    cluster = distributed.LocalCluster(n_workers=workers, processes=True, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=logging.ERROR)
    client = distributed.Client(cluster)
    if gpus:
        from distributed.diagnostics.plugin import WorkerPlugin

        plugin = type("PinGpu", (_PinGpu, WorkerPlugin), {})(gpus)
        register = getattr(client, "register_plugin", None) or client.register_worker_plugin
        register(plugin)
    return client, cluster


def run_dask(points, done, client):
    distributed = dask_distributed()
    futures = client.map(point.run_point, points, pure=False)
    by_key = {f.key: p for f, p in zip(futures, points)}
    try:
        for fut in distributed.as_completed(futures):
            record(done, by_key[fut.key], fut.result)
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(futures)
        raise
