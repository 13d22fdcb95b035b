"""Fused CUDA kernels for the CuPy backend, each with a NumPy twin.

Kernels are module-level source templates, compiled once per dtype and
memoised.  Every kernel here has a plain NumPy implementation in the module
that uses it; the tests compare the two on the GPU.
"""
from __future__ import annotations

import functools

_CTYPE = {"float64": "double", "float32": "float"}

_STENCIL5_DIAGONALS = r"""
extern "C" __global__
void bubbleflow_stencil5_diagonals(const T* __restrict__ S, const T* __restrict__ W,
                                   const T* __restrict__ C, const T* __restrict__ E,
                                   const T* __restrict__ N, const T* __restrict__ x,
                                   T* __restrict__ y, const int nx, const int ny)
{
    const long long n = (long long)nx * ny;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(p % nx);
        const int j = (int)(p / nx);
        T acc = C[p] * x[p];
        if (i > 0)      acc += W[p] * x[p - 1];
        if (i < nx - 1) acc += E[p] * x[p + 1];
        if (j > 0)      acc += S[p] * x[p - nx];
        if (j < ny - 1) acc += N[p] * x[p + nx];
        y[p] = acc;
    }
}
"""

_STENCIL5_FACES = r"""
extern "C" __global__
void bubbleflow_stencil5_faces(const T* __restrict__ cx, const T* __restrict__ cy,
                               const T* __restrict__ x, T* __restrict__ y,
                               const int nx, const int ny)
{
    // cx: (ny, nx-1) couplings on vertical faces; cy: (ny-1, nx) on horizontal faces.
    const long long n = (long long)nx * ny;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(p % nx);
        const int j = (int)(p / nx);
        const T xp = x[p];
        T acc = 0;
        if (i > 0)      acc += cx[(long long)j * (nx - 1) + i - 1] * (xp - x[p - 1]);
        if (i < nx - 1) acc += cx[(long long)j * (nx - 1) + i] * (xp - x[p + 1]);
        if (j > 0)      acc += cy[(long long)(j - 1) * nx + i] * (xp - x[p - nx]);
        if (j < ny - 1) acc += cy[(long long)j * nx + i] * (xp - x[p + nx]);
        y[p] = acc;
    }
}
"""


@functools.lru_cache(maxsize=None)
def _raw_kernel(source: str, name: str, dtype: str):
    import cupy

    code = f"typedef {_CTYPE[dtype]} T;\n" + source
    return cupy.RawKernel(code, name)


def launch_1d(kernel, n, args, threads=256):
    """Launch a grid-stride kernel over ``n`` items."""
    blocks = max(1, min((n + threads - 1) // threads, 65535 * 8))
    kernel((blocks,), (threads,), args)


def stencil5_diagonals(diagonals, x, y, nx, ny):
    """y = A x for A stored as five diagonals ``(S, W, C, E, N)`` (CuPy)."""
    import numpy as np

    k = _raw_kernel(_STENCIL5_DIAGONALS, "bubbleflow_stencil5_diagonals", str(x.dtype))
    S, W, C, E, N = diagonals
    launch_1d(k, nx * ny, (S, W, C, E, N, x, y, np.int32(nx), np.int32(ny)))
    return y


def stencil5_faces(cx, cy, x, y, nx, ny):
    """y = A x applied matrix-free from the face couplings (CuPy)."""
    import numpy as np

    k = _raw_kernel(_STENCIL5_FACES, "bubbleflow_stencil5_faces", str(x.dtype))
    launch_1d(k, nx * ny, (cx, cy, x, y, np.int32(nx), np.int32(ny)))
    return y


_TILE_PART_SUMS = r"""
// The sums of r over the two parts (part 0 / 1) of every BY x BX tile, one
// block per tile, in a fixed order: sums[2 * tile + part].
extern "C" __global__
void bubbleflow_tile_part_sums(const T* __restrict__ r, const signed char* __restrict__ part,
                               T* __restrict__ sums, const int nx, const int BX, const int BY)
{
    __shared__ T shm[2][32];
    const int tile = blockIdx.x, ntx = nx / BX;
    const long long i0 = (long long)(tile % ntx) * BX, j0 = (long long)(tile / ntx) * BY;
    T a[2] = {0, 0};
    for (int c = threadIdx.x; c < BX * BY; c += blockDim.x) {
        const long long q = (j0 + c / BX) * nx + i0 + c % BX;
        a[part[q] != 0 ? 1 : 0] += r[q];
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int k = 0; k < 2; ++k) {
        for (int o = 16; o > 0; o >>= 1) a[k] += __shfl_down_sync(0xffffffffu, a[k], o);
        if (lane == 0) shm[k][warp] = a[k];
    }
    __syncthreads();
    if (warp == 0) {
        for (int k = 0; k < 2; ++k) {
            T v = lane < nwarps ? shm[k][lane] : (T)0;
            for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
            if (lane == 0) sums[2 * tile + k] = v;
        }
    }
}
"""


def tile_part_sums(r, part, block_shape):
    """``(ntiles * 2,)``: the sums of ``r`` over part 0 and part 1 of every
    block of ``block_shape`` (row-major blocks; CuPy).  Its twin is
    :meth:`bubbleflow.linalg.deflation.Deflation._block_sums` (array code)."""
    import cupy
    import numpy as np

    ny, nx = part.shape
    by, bx = block_shape
    ntiles = (ny // by) * (nx // bx)
    k = _raw_kernel(_TILE_PART_SUMS, "bubbleflow_tile_part_sums", str(r.dtype))
    sums = cupy.empty(2 * ntiles, dtype=r.dtype)
    k((ntiles,), (256,), (cupy.ascontiguousarray(r.reshape(ny, nx)), part, sums, np.int32(nx),
                          np.int32(bx), np.int32(by)))
    return sums


_CSR_MATVEC = r"""
// y = A x for A in CSR, every row summed in one fixed order, so that the
// product is the same bit for bit in every run.
// One thread per row, the row's entries in order (short rows).
extern "C" __global__
void bubbleflow_csr_matvec_thread(const int* __restrict__ indptr, const int* __restrict__ indices,
                                  const T* __restrict__ data, const T* __restrict__ x,
                                  T* __restrict__ y, const long long nrows)
{
    for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < nrows;
         row += (long long)gridDim.x * blockDim.x) {
        T acc = 0;
        for (int c = indptr[row]; c < indptr[row + 1]; ++c) acc += data[c] * x[indices[c]];
        y[row] = acc;
    }
}

// One block per row (long rows): strided partial sums, then the warps' sums
// in warp order.
extern "C" __global__
void bubbleflow_csr_matvec_block(const int* __restrict__ indptr, const int* __restrict__ indices,
                                 const T* __restrict__ data, const T* __restrict__ x,
                                 T* __restrict__ y, const long long nrows)
{
    __shared__ T shm[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (long long row = blockIdx.x; row < nrows; row += gridDim.x) {
        T acc = 0;
        for (int c = indptr[row] + threadIdx.x; c < indptr[row + 1]; c += blockDim.x)
            acc += data[c] * x[indices[c]];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        __syncthreads();
        if (lane == 0) shm[warp] = acc;
        __syncthreads();
        if (warp == 0) {
            T v = lane < nwarps ? shm[lane] : (T)0;
            for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
            if (lane == 0) y[row] = v;
        }
    }
}
"""

#: Rows with at least this many entries on average get a block each.
CSR_BLOCK_ROW_NNZ = 32


def csr_matvec(A, x):
    """``A @ x`` for a CuPy CSR matrix, bit for bit the same in every run.

    CuPy's own product adds in an order that varies from run to run (seen
    with ``(A Z)^T``: docs/performance.md), which made restarted solves
    irreproducible.  One thread per row,
    or one block per row where rows average :data:`CSR_BLOCK_ROW_NNZ`
    entries or more.  Its twin is ``A @ x`` (SciPy or CuPy).
    """
    import cupy
    import numpy as np

    nrows = int(A.shape[0])
    dtype = np.result_type(A.dtype, x.dtype)
    if str(dtype) not in _CTYPE or A.nnz >= 2 ** 31:
        return A @ x
    indptr = A.indptr if A.indptr.dtype == np.int32 else A.indptr.astype(np.int32)
    indices = A.indices if A.indices.dtype == np.int32 else A.indices.astype(np.int32)
    data = A.data.astype(dtype, copy=False)
    xv = cupy.ascontiguousarray(x.astype(dtype, copy=False)).ravel()
    y = cupy.empty(nrows, dtype=dtype)
    if nrows == 0:
        return y
    args = (indptr, indices, data, xv, y, np.int64(nrows))
    if A.nnz >= CSR_BLOCK_ROW_NNZ * nrows:
        k = _raw_kernel(_CSR_MATVEC, "bubbleflow_csr_matvec_block", str(dtype))
        k((min(nrows, 65535 * 8),), (128,), args)
    else:
        k = _raw_kernel(_CSR_MATVEC, "bubbleflow_csr_matvec_thread", str(dtype))
        launch_1d(k, nrows, args)
    return y
