"""The dense product ``e = K g`` through cuBLAS, equal bit for bit to ``cupy.dot``.

The dense coarse solve of deflation (:class:`bubbleflow.linalg.deflation.coarse.CoarseSolver`)
and the fused GPU iteration (:mod:`bubbleflow.linalg.fused.engine`) multiply
by a stored ``k x k`` inverse every iteration.  ``cupy.dot`` wraps that
product in checks that cost more than the product at those sizes, and it
cannot be held by a CUDA graph.  Here the same ``gemmEx`` call is made with
the arguments ``cupy.dot`` passes (so the same bits): through CuPy's wrapper,
or through cuBLAS's C entry points on a handle of its own, whose library is
the one CuPy loaded, found among the process's mappings (Linux
``/proc/self/maps``, as :mod:`bubbleflow.compute.blas` finds OpenBLAS); the
latter may be captured in a CUDA graph.  Each call is used only where a few
products, and their replay from a graph, give ``cupy.dot``'s bits.

A handle's stream and workspace are set before each call, so a handle is
never shared between threads (a flow's warm-up steps a small copy of the
case in threads of its own, :mod:`bubbleflow.flow.warm_up`): each thread
builds and checks its own, as CuPy keeps a cuBLAS handle per thread.
"""
from __future__ import annotations

import threading

import numpy as np

from .truth import any_true

__all__ = ["dense_product", "dense_gemm", "gemm_operand", "GemmCall", "GEMM_WORKSPACE"]

# The host scalars of the dense coarse product (cuBLAS reads them at the call;
# a CUDA graph holds their values at the capture).
_ONE, _ZERO = np.ones(1), np.zeros(1)
#: Bytes of the workspace of the capturable product (cuBLAS's own default
#: workspace on Hopper is this size).
GEMM_WORKSPACE = 32 * 2 ** 20


def gemm_operand(a):
    """Can :func:`dense_product` pass ``a`` to cuBLAS as it is (float64,
    C-contiguous)?"""
    return a.dtype == np.float64 and a.flags.c_contiguous


class GemmCall:
    """One product ``e = K g`` with fixed arguments (:func:`dense_product`):
    a callable; a CUDA graph may hold it where ``capturable``."""

    __slots__ = ("gemm", "args")

    def __init__(self, gemm, args):
        self.gemm, self.args = gemm, args

    @property
    def capturable(self):
        return self.gemm.capturable

    def __call__(self):
        self.gemm.call(self.args)


class _CupyGemm:
    """``gemmEx`` through CuPy's wrapper (which sets the handle's stream to
    the current one, and refuses to run during a stream capture)."""

    capturable = False

    def __init__(self, gemmex, handle):
        self.gemmex, self.handle = gemmex, handle

    def call(self, args):
        self.gemmex(self.handle, *args)


class _DirectGemm:
    """``cublasGemmEx`` through cuBLAS's C entry points on a handle of its
    own, whose stream is set to the current one (the capturing stream
    during a capture) and whose workspace to a buffer of its own before
    every call (setting the stream resets it to cuBLAS's pool, which would
    allocate during a capture): a CUDA graph may hold the call."""

    capturable = True

    def __init__(self, lib, handle, workspace):
        self.lib, self.handle, self.workspace = lib, handle, workspace

    def call(self, args):
        import cupy

        lib, handle, ws = self.lib, self.handle, self.workspace
        status = (lib.cublasSetStream_v2(handle, cupy.cuda.get_current_stream().ptr)
                  or lib.cublasSetWorkspace_v2(handle, ws.data.ptr, ws.nbytes)
                  or lib.cublasGemmEx(handle, *args))
        if status:
            raise RuntimeError(f"cuBLAS status {status} in the dense coarse product")


def dense_product(K, g, e):
    """``e = K g`` (``K`` a ``k x k`` C-contiguous float64 matrix, ``g`` and
    ``e`` contiguous): a callable that makes the call ``cupy.dot(K, g,
    out=e)`` makes, cuBLAS ``gemmEx`` with the same arguments (so the same
    bits), without CuPy's checks around it (they cost more than the product
    at the sizes of a coarse solve): a :class:`GemmCall`, capturable where
    :func:`dense_gemm` found cuBLAS's entry points.  Where neither call can
    be made here, or gives other bits than ``cupy.dot``, ``cupy.dot`` (not
    captured)."""
    import cupy

    gemm = dense_gemm()
    if gemm is None or not (gemm_operand(K) and g.flags.c_contiguous and e.flags.c_contiguous):
        dot = cupy.dot
        return lambda: dot(K, g, out=e)
    return GemmCall(gemm, _gemm_args(K, g, e))


def _gemm_args(K, g, e):
    """``gemmEx``'s arguments after the handle for ``e = K g``: C^T = g^T K^T
    with K^T read column-major, as ``cupy.dot`` passes them
    (``cupy._core._routines_linalg.tensordot_core_v11``)."""
    from cupy_backends.cuda.api import runtime
    from cupy_backends.cuda.libs import cublas
    import cupy

    k = int(K.shape[0])
    algo = (cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP
            if int(cupy.cuda.Device().compute_capability) >= 80 else cublas.CUBLAS_GEMM_DEFAULT)
    r64 = runtime.CUDA_R_64F
    return (1, 0, 1, k, k, _ONE.ctypes.data, g.data.ptr, r64, k, K.data.ptr, r64, k,
            _ZERO.ctypes.data, e.data.ptr, r64, 1, cublas.CUBLAS_COMPUTE_64F, algo)


#: Per thread, device -> its gemm (or None).
_DENSE_GEMM = threading.local()


def dense_gemm():
    """The ``gemmEx`` of :func:`dense_product` on this device for this
    thread (built and checked once): cuBLAS's entry points on a handle of
    its own (``capturable``), else CuPy's wrapper, each only where it gives
    ``cupy.dot``'s bits on a few products (the first also replayed from a
    CUDA graph); None where neither does."""
    import cupy

    dev = cupy.cuda.Device().id
    found = _DENSE_GEMM.__dict__.setdefault("by_device", {})
    if dev not in found:
        found[dev] = None
        for make in (_direct_gemm, _cupy_gemm):
            try:
                gemm = make()
                if _gives_dot_bits(gemm):
                    found[dev] = gemm
                    break
            except Exception:            # not here (another CuPy, or no entry points)
                continue
    return found[dev]


def _cupy_gemm():
    import cupy
    from cupy_backends.cuda.libs import cublas

    return _CupyGemm(cublas.gemmEx, cupy.cuda.device.get_cublas_handle())


def _direct_gemm():
    import ctypes

    import cupy
    from cupy_backends.cuda.libs import cublas

    cupy.cuda.device.get_cublas_handle()         # cuBLAS loaded: find the library CuPy uses
    with open("/proc/self/maps") as maps:
        paths = [line.split()[-1] for line in maps if "/libcublas.so" in line]
    lib = ctypes.CDLL(paths[0])
    vp, i = ctypes.c_void_p, ctypes.c_int
    lib.cublasSetStream_v2.argtypes = [vp, vp]
    lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
    lib.cublasGemmEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, vp, i, i, vp, vp, i, i, i, i]
    for fn in (lib.cublasSetStream_v2, lib.cublasSetWorkspace_v2, lib.cublasGemmEx):
        fn.restype = i
    return _DirectGemm(lib, cublas.create(), cupy.empty(GEMM_WORKSPACE, dtype=cupy.uint8))


def _gives_dot_bits(gemm):
    """Does ``gemm`` give ``cupy.dot``'s bits (called, and replayed from a
    CUDA graph where it is capturable)?"""
    import cupy

    rng = np.random.default_rng(0)
    stream = cupy.cuda.Stream(non_blocking=True) if gemm.capturable else None
    for k in (37, 300, 900):
        K = cupy.asarray(rng.standard_normal((k, k)))
        g = cupy.asarray(rng.standard_normal(k))
        want = cupy.dot(K, g)
        got = cupy.full(k, np.nan)
        call = GemmCall(gemm, _gemm_args(K, g, got))
        call()
        if bool(any_true(want != got)):
            return False
        if stream is not None:
            with stream:
                stream.begin_capture()
                try:
                    call()
                finally:
                    graph = stream.end_capture()
            got.fill(np.nan)
            graph.launch()
            if bool(any_true(want != got)):
                return False
    return True
