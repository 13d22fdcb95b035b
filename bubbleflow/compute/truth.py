"""Whole-array truth tests: every value finite, any value true.

Each returns a 0-d boolean array on the arrays' backend, so that a caller can
combine several before one transfer to the host.

On CuPy, ``a.all()`` and ``a.any()`` go to CuPy's CUB reductions, whose
first use on a machine compiles for 1.7 to 2.9 s per module
(docs/performance.md: a 2-D flow's first run spent 14 s on six of them; a
``ReductionKernel`` in their place compiled for 2.3 s).  The CuPy variants
here are one small kernel each, without CuPy's headers: every thread reads a
stretch of the array and only a thread that finds the answer writes it, so
the array is read once and nothing is summed.

>>> import numpy as np
>>> bool(all_finite(np.array([1.0, np.inf]))), bool(any_true(np.array([False, True])))
(False, True)
"""
from __future__ import annotations

import numpy as np

from . import cuda
from .backend import array_module
from .twins import twin

__all__ = ["all_finite", "any_true"]


@twin
def all_finite(a):
    """Whether every value of ``a`` is finite (a 0-d boolean array)."""
    return array_module(a).isfinite(a).all()


@twin
def any_true(a):
    """Whether any value of the boolean array ``a`` is true (a 0-d boolean array)."""
    return array_module(a).any(a)


@cuda.kernel_cache
def _kernel(name):
    """The kernel ``name`` of ``truth.cu`` (fetched at every check: memoised
    on its name)."""
    return cuda.function(cuda.source(__name__, "truth.cu"), name)


def _flag(a, dtype, kernel_name, start):
    """The 0-d flag set to ``start``, then to ``not start`` by any thread of
    ``kernel_name`` that finds its value in ``a``; NotImplemented for another
    dtype or a layout that is not contiguous."""
    import cupy

    if a.dtype != dtype or not a.flags.c_contiguous:
        return NotImplemented
    flag = cupy.full((), start, dtype=bool)
    if a.size:
        cuda.launch_1d(_kernel(kernel_name), a.size, (a, np.int64(a.size), flag))
    return flag


@all_finite.register("cupy")
def _all_finite_cuda(a):
    return _flag(a, np.float64, "bf_flag_non_finite", True)


@any_true.register("cupy")
def _any_true_cuda(a):
    return _flag(a, np.bool_, "bf_flag_true", False)
