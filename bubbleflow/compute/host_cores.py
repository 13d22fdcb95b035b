"""The host cores this process may use for work beside its own thread."""
from __future__ import annotations

import os

__all__ = ["spare_cores"]


def spare_cores():
    """Threads for work beside the caller's own (compressing a field's
    chunks, compiling kernels): every core this process may run on (its
    affinity, where the system tells it) but one, at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores - 1)
