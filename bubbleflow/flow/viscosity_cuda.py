"""CUDA twin of the implicit viscous solve's Chebyshev step (CuPy, float64).

Registered on :func:`bubbleflow.flow.viscosity.chebyshev_step`; the kernel is
``viscosity.cu`` beside this file: one launch per step where the array code
launches about twenty.  Compiled without FMA contraction, in the array code's
order of operations: the same bits.  Another dtype returns ``NotImplemented``
(the array code runs).  CuPy is imported inside the function only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda

__all__ = ["chebyshev_step"]

_OPTIONS = ("--fmad=false",)
_THREADS = 256


@cuda.kernel_cache
def _kernel():
    code = "typedef double T;\n" + cuda.source(__name__, "viscosity.cu")
    return cuda.function(code, "bf_visc_chebyshev_step", options=_OPTIONS)


def chebyshev_step(S, x, r, d, d_new, keep, gain):
    """``x += d; r -= S d; d_new = keep d + gain D^-1 r`` (twin:
    ``viscosity.chebyshev_step``): one launch."""
    arrays = (S.rho_f, S.k_plus, S.k_minus, S.t_plus, S.t_minus, S.inv_diagonal, x, r, d, d_new)
    if any(getattr(a, "dtype", None) != np.float64 for a in arrays) or \
            not all(a.flags.c_contiguous for a in arrays):
        return NotImplemented
    ny, nx = S.shape2d
    n = ny * nx
    blocks = max(1, min(-(-n // _THREADS), 65535))
    _kernel()((blocks,), (_THREADS,),
              (S.rho_f, S.k_plus, S.k_minus, S.t_plus, S.t_minus, S.inv_diagonal,
               x, r, d, d_new, np.int32(ny), np.int32(nx), np.int32(S.component == "u"),
               np.float64(S.s_low), np.float64(S.s_high), np.float64(keep), np.float64(gain)))
    return x
