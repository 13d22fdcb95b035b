"""Triangular sweeps of the block incomplete Cholesky preconditioner.

Grid arrays are 2-D, shape ``(ny, nx)``, C order; cell ``(j, i)`` is row ``j``
(y index), column ``i`` (x index).  The rows are grouped into IC blocks of
``m`` consecutive rows (block ``b`` = rows ``b*m .. b*m+m-1``); couplings
between blocks are dropped.  Inside a block the forward (lower) sweep is ::

    u[j,i] = (r[j,i] - W[j,i]*u[j,i-1] - S[j,i]*u[j-1,i]) * invd[j,i]

with ``W[j,0]`` and ``S`` on the first row of every block (``j % m == 0``)
treated as zero, whatever the arrays hold there.  The backward sweep
(``reverse=True``) walks each block the other way::

    u[j,i] = (r[j,i] - W[j,i]*u[j,i+1] - S[j,i]*u[j+1,i]) * invd[j,i]

with ``W[j,nx-1]`` and ``S`` on the last row of every block
(``j % m == m-1``) treated as zero (the caller passes the east couplings as
``W`` and the north couplings as ``S``).

NumPy (the reference)
    Loops over the columns (outer) and the rows of a block (inner),
    vectorised over the blocks.

CuPy: a parallel scan over the columns
    For one IC block let ``v_i`` be the ``m``-vector of ``u`` over the block's
    rows at column ``i``.  The sweep of column ``i`` is the affine map
    ``v_i = A_i v_{i-1} + c_i`` with ``A_i`` lower triangular (row ``l``
    depends on row ``l-1`` of the same column and on row ``l`` of the previous
    column), and affine maps compose associatively.  One CUDA thread block
    handles one IC block with ``T`` threads (32..256).  It walks the columns
    in tiles of ``T*K`` (``K = max(1, 8 // m)`` columns per thread, so the
    loads of a warp are contiguous), and for each tile:

    1. each thread composes the maps of its ``K`` columns, ``(P, q)`` with
       ``P`` lower triangular (kept packed in registers); thread 0 starts from
       the constant map ``(0, carry)``, ``carry`` the state leaving the
       previous tile (zero before column 0, where ``W`` is masked anyway);
    2. an inclusive Hillis-Steele scan of the ``T`` maps in shared memory
       (``log2 T`` steps) gives every thread the state entering its columns,
       and thread 0 the carry into the next tile;
    3. each thread re-walks its columns from that state with the plain
       substitution formula and writes ``u`` (its loads hit the cache: the
       tile was just read).

    The entries of ``A_i`` are products of ``-W*invd`` and ``-S*invd``, below
    one in magnitude for the diagonally dominant M-matrices of the pressure
    equation, so the composed maps decay and the scan is stable; the result
    matches sequential substitution to rounding.  The block height is a
    compile-time constant (one kernel per ``(height, dtype, direction)``,
    memoised).  The kernel handles heights up to ``MAX_KERNEL_M = 8``; a taller
    IC block is swept as ``ceil(m / 8)`` sub-blocks of at most 8 rows, one
    launch each, every launch taking the south (north) neighbour row of its
    first row from the sub-block swept before it.  That is still parallel
    over blocks and columns, just ``ceil(m / 8)`` times as many passes.

    Each IC block gets one thread block, so a grid with very few IC blocks
    (``ny / m`` much less than the number of SMs) and very many columns
    under-uses the GPU; the bubbleflow grids have hundreds of IC blocks.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from ...compute.backend import backend_of, gpu_median_ms
from ...compute.twins import twin

__all__ = ["block_sweep", "MAX_KERNEL_M"]

#: Largest block height one kernel launch handles; taller blocks are split.
MAX_KERNEL_M = 8

_SHARED_BYTES = 48 * 1024       # static limit of dynamic shared memory without opt-in
_MAX_THREADS = 256


# --------------------------------------------------------------------------- #
# Public entry point
# --------------------------------------------------------------------------- #
def block_sweep(r, W, S, invd, m, reverse=False, out=None):
    """Forward (or backward) triangular solve of the block IC factor.

    Parameters
    ----------
    r, W, S, invd : arrays of shape (ny, nx), all NumPy or all CuPy
        Right-hand side, west (east for ``reverse``) coupling, south (north for
        ``reverse``) coupling and inverse pivots.  ``W`` on the first (last)
        column and ``S`` on the first (last) row of each block are ignored.
    m : int
        Rows per IC block; ``m >= 1`` and ``m`` divides ``ny``.
    reverse : bool, default False
        ``False``: the lower sweep, grid traversed from ``(0, 0)``.
        ``True``: the upper sweep, each block traversed from its last row and
        the last column.
    out : array, optional
        C-contiguous ``(ny, nx)`` array of the result dtype to write into;
        must not share memory with the inputs.

    Returns
    -------
    u : array of shape (ny, nx)
        float64 (float32 if every input is float32), on the inputs' backend.
    """
    r_, W_, S_, invd_ = r, W, S, invd
    backend = backend_of(r, W, S, invd, *(() if out is None else (out,)))
    xp = backend.xp
    m = int(m)
    if r.ndim != 2:
        raise ValueError(f"block_sweep: r must be 2-D (ny, nx), got shape {r.shape}")
    ny, nx = r.shape
    for name, a in (("W", W), ("S", S), ("invd", invd)):
        if a.shape != r.shape:
            raise ValueError(f"block_sweep: {name} has shape {a.shape}, expected {r.shape}")
    if m < 1 or ny % m != 0:
        raise ValueError(f"block_sweep: block height m={m} must be >= 1 and divide ny={ny}")
    dtype = _result_dtype(r, W, S, invd)
    r, W, S, invd = (xp.ascontiguousarray(xp.asarray(a, dtype=dtype)) for a in (r, W, S, invd))
    if out is None:
        out = xp.empty((ny, nx), dtype=dtype)
    else:
        if backend_of(out) is not backend or out.shape != (ny, nx) or out.dtype != dtype \
                or not out.flags.c_contiguous:
            raise ValueError(f"block_sweep: out must be a C-contiguous {dtype} array of shape "
                             f"{(ny, nx)} on the inputs' backend")
        for name, a in (("r", r_), ("W", W_), ("S", S_), ("invd", invd_)):
            if type(a) is type(out) and _may_share_memory(xp, out, a):
                raise ValueError(f"block_sweep: out must not share memory with {name}")
    if ny == 0 or nx == 0:
        return out
    _sweep(r, W, S, invd, m, bool(reverse), out)
    return out


def _result_dtype(*arrays):
    dtype = np.result_type(*(a.dtype for a in arrays))
    if dtype.kind == "c":
        raise TypeError(f"block_sweep: complex input ({dtype}) is not supported")
    if dtype not in (np.float32, np.float64):
        dtype = np.result_type(dtype, np.float32)     # float16 -> float32, ints -> float64
    return np.dtype(dtype)


def _may_share_memory(xp, a, b):
    try:
        return bool(xp.may_share_memory(a, b))
    except (AttributeError, TypeError, NotImplementedError):
        # Address-range overlap of the two buffers (conservative).
        lo_a, lo_b = a.data.ptr, b.data.ptr
        return lo_a < lo_b + b.nbytes and lo_b < lo_a + a.nbytes


# --------------------------------------------------------------------------- #
# NumPy reference
# --------------------------------------------------------------------------- #
@twin
def _sweep(r, W, S, invd, m, reverse, out):
    """The sweep into ``out``: :func:`_block_sweep_numpy` (array code), on
    CuPy :func:`_block_sweep_cupy` (the tiled scan kernel)."""
    return _block_sweep_numpy(r, W, S, invd, m, reverse, out)


def _block_sweep_numpy(r, W, S, invd, m, reverse, out):
    """Column-by-column, row-by-row substitution, vectorised over the blocks."""
    ny, nx = r.shape
    nb = ny // m
    rb, Wb, Sb, ib = (a.reshape(nb, m, nx) for a in (r, W, S, invd))
    ub = out.reshape(nb, m, nx)                      # a view: out is C-contiguous
    step = -1 if reverse else 1
    cols = range(nx - 1, -1, -1) if reverse else range(nx)
    rows = range(m - 1, -1, -1) if reverse else range(m)
    for i in cols:
        i_prev = i - step                            # the column swept before i
        for l in rows:
            l_prev = l - step                        # the row swept before l
            val = rb[:, l, i]
            if 0 <= i_prev < nx:
                val = val - Wb[:, l, i] * ub[:, l, i_prev]
            if 0 <= l_prev < m:
                val = val - Sb[:, l, i] * ub[:, l_prev, i]
            ub[:, l, i] = val * ib[:, l, i]
    return out


# --------------------------------------------------------------------------- #
# CuPy: tiled parallel scan over the columns
# --------------------------------------------------------------------------- #
def _kernel_name(M, dtype, reverse):
    return f"bubbleflow_block_sweep_m{M}_{'bwd' if reverse else 'fwd'}_{dtype}"


def _columns_per_thread(M):
    """Columns a thread takes per tile: 8 cells' worth of work between scans."""
    return max(1, 8 // M)


@cuda.kernel_cache
def _scan_kernel(M: int, dtype: str, reverse: bool):
    """The compiled kernel for sub-block height ``M`` (``block_sweep.cu``,
    memoised by :mod:`bubbleflow.compute.cuda`)."""
    if not 1 <= M <= MAX_KERNEL_M:
        raise ValueError(f"block_sweep kernel height {M} outside 1..{MAX_KERNEL_M}")
    name = _kernel_name(M, dtype, reverse)
    code = (f"typedef {cuda.CTYPE[dtype]} T;\n"
            + cuda.defines(M=M, K=_columns_per_thread(M), REVERSE=int(reverse), NAME=name)
            + cuda.source(__name__, "block_sweep.cu"))
    return cuda.raw_kernel(code, name)


def _scan_threads(M, itemsize, nx):
    """Threads per IC block: a power of two in 32..256 that fits the shared memory.

    Fewer threads when a tile of ``threads * K`` columns would exceed ``nx``.
    Returns ``(threads, shared-memory bytes)``.
    """
    per_thread = (M * (M + 1) // 2 + M) * itemsize
    K = _columns_per_thread(M)
    nt = _MAX_THREADS
    while nt > 32 and (nt * per_thread > _SHARED_BYTES or nt * K > nx):
        nt //= 2
    return nt, nt * per_thread


def _sub_blocks(m):
    """Heights of the ``ceil(m / MAX_KERNEL_M)`` sub-blocks a block of ``m`` rows is swept in."""
    n = -(-m // MAX_KERNEL_M)
    base, extra = divmod(m, n)
    return [base + 1] * extra + [base] * (n - extra)


@_sweep.register("cupy")
def _block_sweep_cupy(r, W, S, invd, m, reverse, out):
    ny, nx = r.shape
    nb = ny // m
    dtype = str(r.dtype)
    L0 = 0
    for M in _sub_blocks(m):
        kernel = _scan_kernel(M, dtype, reverse)
        nt, shared = _scan_threads(M, r.dtype.itemsize, nx)
        kernel((nb,), (nt,), (r, W, S, invd, out, np.int32(nx), np.int32(m), np.int32(L0)),
               shared_mem=shared)
        L0 += M
    return out


# --------------------------------------------------------------------------- #
# Timing (CuPy): python -m bubbleflow.linalg.precond.block_sweep [ny nx m]
# --------------------------------------------------------------------------- #
def _time_gpu(fn):
    return gpu_median_ms(fn, repeat=30, warmup=3)


def _main(argv):
    import cupy

    ny, nx, m = (int(a) for a in argv[:3]) if len(argv) >= 3 else (4096, 4096, 2)
    rng = np.random.default_rng(0)
    Wh = -(10.0 ** rng.uniform(-6, 0, (ny, nx)))
    Sh = -(10.0 ** rng.uniform(-6, 0, (ny, nx)))
    dh = 1.5 * (np.abs(Wh) + np.abs(Sh)) + 1e-3
    r, W, S, invd = (cupy.asarray(a) for a in (rng.standard_normal((ny, nx)), Wh, Sh, 1.0 / dh))
    u = cupy.empty_like(r)
    copy_buf = cupy.empty_like(r)
    t_copy = _time_gpu(lambda: cupy.copyto(copy_buf, r))
    t_fwd = _time_gpu(lambda: block_sweep(r, W, S, invd, m, out=u))
    t_bwd = _time_gpu(lambda: block_sweep(r, W, S, invd, m, reverse=True, out=u))
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    gb = r.nbytes / 1e9
    print(f"block_sweep on {name}: {ny}x{nx} float64, m={m} ({ny // m} IC blocks)")
    for M in sorted(set(_sub_blocks(m))):
        k = _scan_kernel(M, "float64", False)
        nt, shared = _scan_threads(M, 8, nx)
        print(f"  kernel {k.name}: {nt} threads, {shared} B shared, {k.num_regs} registers, "
              f"{k.local_size_bytes} B local (spill)")
    print(f"  cupy copy     : {t_copy:8.3f} ms  ({2 * gb / t_copy * 1e3:7.1f} GB/s)")
    print(f"  forward sweep : {t_fwd:8.3f} ms  ({t_fwd / t_copy:5.2f} x copy)")
    print(f"  backward sweep: {t_bwd:8.3f} ms  ({t_bwd / t_copy:5.2f} x copy)")
    if ny * nx <= 4096 * 4096:
        ref = _block_sweep_numpy(*(cupy.asnumpy(a) for a in (r, W, S, invd)), m, False,
                                 np.empty((ny, nx)))
        got = cupy.asnumpy(block_sweep(r, W, S, invd, m))
        print(f"  max |gpu - numpy| / max |numpy| = "
              f"{np.max(np.abs(got - ref)) / np.max(np.abs(ref)):.2e}")


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
