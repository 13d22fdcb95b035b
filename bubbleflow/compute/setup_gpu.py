"""Raw CUDA kernels for the per-step set-up on the CuPy backend.

Every time step rebuilds, for the new interface, the operator, the
preconditioner and the deflation space.  Written with array operations the
set-up is a few dozen library kernels over the grid, each a full pass over
memory, plus sorts of the cut-face entries; here each piece is one or two
passes.  Every kernel has its twin in plain array code (NumPy or CuPy), the
code the CPU runs, and the tests compare the two on the GPU:

=======================  =============================================  ==========================
kernel                   computes                                       twin
=======================  =============================================  ==========================
``bf_op_diagonals``      the five diagonals from the face ``1/rho``      ``operator._diagonals_from_couplings``
``bf_ips_coefficients``  ``D^-1/2`` and the scaled couplings             ``ScaledIncompletePoisson`` (array code)
``bf_defl_parts``        gas/liquid part of every cell, parts present   ``levelset_subdomain_labels``, ``_block_sums``
``bf_defl_labels``       the vector of every cell (int32)               ``_compact_present``
``bf_defl_rows``         ``(A Z)^T`` in CSR and ``E`` per row (ELL)      ``deflation._face_pieces``
``bf_defl_e``            ``E`` in CSR, exactly symmetric                 ``deflation._face_pieces``
=======================  =============================================  ==========================

The deflation kernels need blocks that tile the grid exactly (the layout of
:meth:`Deflation.from_blocks`): the row of vector ``v`` of ``(A Z)^T`` then
lives in ``v``'s block widened by one cell, which one thread block walks in
row-major order (so the columns come out sorted, with an ordered block-wide
scan), and ``E``'s row has at most ten entries, the two parts of the block
and of its four face neighbours.  Sums run in a fixed order: the results do
not depend on scheduling (the array code adds duplicates with atomics).
"""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["op_diagonals", "ips_coefficients", "deflation_blocks", "raw_deflation_ok"]

_THREADS = 256

_SRC = r"""
typedef double T;
#define NC 10

__device__ __forceinline__ int warp_sum_int(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ unsigned warp_or(unsigned v) {
    for (int o = 16; o > 0; o >>= 1) v |= __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// beta of a face: the value given, or 1 / rho when given densities.
__device__ __forceinline__ T face(const T v, const int reciprocal) {
    return reciprocal ? 1.0 / v : v;
}

// S, W, C, E, N of -div(beta grad) from beta_x (ny, nx-1) and beta_y (ny-1, nx):
// couplings beta / h^2 (divided, as the array code does), zero across the walls,
// C summed in the order S, W, E, N (bit for bit the array code's C).
extern "C" __global__ void bf_op_diagonals(const T* __restrict__ beta_x,
        const T* __restrict__ beta_y, const T hx2, const T hy2, T* __restrict__ S,
        T* __restrict__ W, T* __restrict__ C, T* __restrict__ E, T* __restrict__ N,
        const int nx, const int ny, const int reciprocal)
{
    // Grid (columns / blockDim, rows): no index division.
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx) return;
    for (int j = blockIdx.y; j < ny; j += gridDim.y) {
        const long long p = (long long)j * nx + i;
        const long long fx = (long long)j * (nx - 1) + i;
        T c = 0.0;
        T s = 0.0, w = 0.0, e = 0.0, nn = 0.0;
        if (j > 0)      { s = face(beta_y[p - nx], reciprocal) / hy2; c = s; }
        if (i > 0)      { w = face(beta_x[fx - 1], reciprocal) / hx2; c += w; }
        if (i < nx - 1) { e = face(beta_x[fx], reciprocal) / hx2;     c += e; }
        if (j < ny - 1) { nn = face(beta_y[p], reciprocal) / hy2;     c += nn; }
        S[p] = j > 0 ? -s : 0.0;
        W[p] = i > 0 ? -w : 0.0;
        E[p] = i < nx - 1 ? -e : 0.0;
        N[p] = j < ny - 1 ? -nn : 0.0;
        C[p] = c;
    }
}

// Scaled incomplete Poisson: s = 1 / sqrt(C) and the couplings scaled by the
// s of both cells, multiplied in the array code's order ((a * s_p) * s_q).
extern "C" __global__ void bf_ips_coefficients(const T* __restrict__ S, const T* __restrict__ W,
        const T* __restrict__ C, const T* __restrict__ E, const T* __restrict__ N,
        T* __restrict__ s_out, T* __restrict__ Ss, T* __restrict__ Ws, T* __restrict__ Es,
        T* __restrict__ Ns, const int nx, const int ny)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx) return;
    for (int j = blockIdx.y; j < ny; j += gridDim.y) {
        const long long p = (long long)j * nx + i;
        const T s = 1.0 / sqrt(C[p]);
        s_out[p] = s;
        T v = S[p] * s;
        if (j > 0) v *= 1.0 / sqrt(C[p - nx]);
        Ss[p] = v;
        v = W[p] * s;
        if (i > 0) v *= 1.0 / sqrt(C[p - 1]);
        Ws[p] = v;
        v = E[p] * s;
        if (i < nx - 1) v *= 1.0 / sqrt(C[p + 1]);
        Es[p] = v;
        v = N[p] * s;
        if (j < ny - 1) v *= 1.0 / sqrt(C[p + nx]);
        Ns[p] = v;
    }
}

// One thread block per subdomain block: part = (phi < 0), and which parts of
// the block are present: present[2 B] (liquid), present[2 B + 1] (gas).
extern "C" __global__ void bf_defl_parts(const T* __restrict__ phi, signed char* __restrict__ part,
        bool* __restrict__ present, const int nx, const int bx, const int by, const int px)
{
    __shared__ int shm[32];
    const int B = blockIdx.x, bj = B / px, bi = B - bj * px;
    int cnt = 0;
    for (int w = threadIdx.x; w < bx * by; w += blockDim.x) {
        const int r = w / bx;
        const long long p = (long long)(bj * by + r) * nx + bi * bx + (w - r * bx);
        const signed char g = phi[p] < 0.0;
        part[p] = g;
        cnt += g;
    }
    cnt = warp_sum_int(cnt);
    if ((threadIdx.x & 31) == 0) shm[threadIdx.x >> 5] = cnt;
    __syncthreads();
    if (threadIdx.x == 0) {
        int t = 0;
        for (int q = 0; q < (int)(blockDim.x >> 5); q++) t += shm[q];
        present[2 * B] = t < bx * by;
        present[2 * B + 1] = t > 0;
    }
}

// The vector of every cell: slot[nparts * block + part] (int32).
extern "C" __global__ void bf_defl_labels(const signed char* __restrict__ part,
        const long long* __restrict__ slot, int* __restrict__ lab, const int nx, const int ny,
        const int bx, const int by, const int px, const int nparts)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx) return;
    for (int j = blockIdx.y; j < ny; j += gridDim.y) {
        const long long p = (long long)j * nx + i;
        const int B = (j / by) * px + i / bx;
        const int P = nparts == 2 ? (int)part[p] : 0;
        lab[p] = (int)slot[(long long)B * nparts + P];
    }
}

// Face couplings: east of (j, i) is cx[j * sx + i], north is cy[j * nx + i];
// sign -1 when they are read from the (negative) E and N diagonals.
__device__ __forceinline__ T cpl(const T* __restrict__ a, const long long q, const T sign) {
    return sign * a[q];
}

// Row v of (A Z)^T and of E, one thread block per vector.  The row's cells lie
// in v's block widened by one cell (corners excluded): a cell p of v has the
// entry sum c over its faces to cells outside v, a cell p outside v has
// -sum c over its faces into v; a cell without such a face has none.  The
// block walks the window in row-major order, rounds of blockDim cells, so the
// entries are found in increasing cell order.  fill = 0: counts (entries of the
// row, and E's entries: the diagonal and every candidate with a face).  fill =
// 1: writes the row at azt_ptr[v] (an ordered block scan per round) and E's
// row as 10 candidates (direction S, W, self, E, N x part) with their sums.
extern "C" __global__ void bf_defl_rows(const int* __restrict__ lab,
        const signed char* __restrict__ part, const long long* __restrict__ original,
        const long long* __restrict__ slot, const int nparts,
        const T* __restrict__ cx, const int sx, const T* __restrict__ cy, const T sign,
        const int nx, const int ny, const int bx, const int by, const int px, const int py,
        int* __restrict__ azt_cnt, int* __restrict__ e_cnt,
        const int* __restrict__ azt_ptr, int* __restrict__ azt_idx, T* __restrict__ azt_val,
        T* __restrict__ ell_val, int* __restrict__ ell_col, const int fill)
{
    __shared__ int wsum[32];
    __shared__ unsigned wmask[32];
    __shared__ T wacc[NC][32];
    const int v = blockIdx.x;
    const long long o = original[v];
    const int B = (int)(o / nparts), P = (int)(o - (long long)(o / nparts) * nparts);
    const int bj = B / px, bi = B - bj * px;
    const int jb0 = bj * by, ib0 = bi * bx;
    const int j0 = jb0 > 0 ? jb0 - 1 : 0, j1 = jb0 + by < ny ? jb0 + by : ny - 1;
    const int i0 = ib0 > 0 ? ib0 - 1 : 0, i1 = ib0 + bx < nx ? ib0 + bx : nx - 1;
    const int wd = i1 - i0 + 1, total = wd * (j1 - j0 + 1);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int rowstart = fill ? azt_ptr[v] : 0;
    int cnt = 0, base = 0;
    unsigned mask = 0;
    T acc[NC];
    #pragma unroll
    for (int c = 0; c < NC; c++) acc[c] = 0.0;
    for (int r0 = 0; r0 < total; r0 += blockDim.x) {
        const int w = r0 + threadIdx.x;
        bool has = false;
        T val = 0.0;
        long long p = 0;
        if (w < total) {
            const int r = w / wd;
            const int j = j0 + r, i = i0 + (w - r * wd);
            const bool inj = j >= jb0 && j < jb0 + by, ini = i >= ib0 && i < ib0 + bx;
            if (inj || ini) {
                p = (long long)j * nx + i;
                const bool inv = lab[p] == v;
                T sum = 0.0;
                if (j > 0 && ((lab[p - nx] != v) == inv)) { sum += cpl(cy, p - nx, sign); has = true; }
                if (i > 0 && ((lab[p - 1] != v) == inv)) {
                    sum += cpl(cx, (long long)j * sx + i - 1, sign); has = true; }
                if (i < nx - 1 && ((lab[p + 1] != v) == inv)) {
                    sum += cpl(cx, (long long)j * sx + i, sign); has = true; }
                if (j < ny - 1 && ((lab[p + nx] != v) == inv)) { sum += cpl(cy, p, sign); has = true; }
                if (has) {
                    val = inv ? sum : -sum;
                    const int d = !inj ? (j < jb0 ? 0 : 4) : (!ini ? (i < ib0 ? 1 : 3) : 2);
                    const int c = 2 * d + (nparts == 2 ? (int)part[p] : 0);
                    if (!inv) mask |= 1u << c;
                    if (fill) {
                        #pragma unroll
                        for (int q = 0; q < NC; q++) if (q == c) acc[q] += val;
                    }
                    cnt++;
                }
            }
        }
        if (fill) {
            const unsigned bal = __ballot_sync(0xffffffffu, has);
            if (lane == 0) wsum[warp] = __popc(bal);
            __syncthreads();
            int off = 0, tot = 0;
            for (int q = 0; q < nwarps; q++) {
                const int c = wsum[q];
                off += q < warp ? c : 0;
                tot += c;
            }
            if (has) {
                const int pos = rowstart + base + off + __popc(bal & ((1u << lane) - 1u));
                azt_idx[pos] = (int)p;
                azt_val[pos] = val;
            }
            base += tot;
            __syncthreads();
        }
    }
    // Reductions in a fixed order (warp butterflies, then the warps in turn).
    cnt = warp_sum_int(cnt);
    mask = warp_or(mask);
    if (lane == 0) { wsum[warp] = cnt; wmask[warp] = mask; }
    if (fill) {
        #pragma unroll
        for (int c = 0; c < NC; c++) {
            const T a = warp_sum(acc[c]);
            if (lane == 0) wacc[c][warp] = a;
        }
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    int tcnt = 0;
    unsigned tmask = 1u << (4 + P);                 // the diagonal is always stored
    for (int q = 0; q < nwarps; q++) { tcnt += wsum[q]; tmask |= wmask[q]; }
    if (!fill) {
        azt_cnt[v] = tcnt;
        e_cnt[v] = __popc(tmask);
        return;
    }
    const int nb[5] = {bj > 0 ? B - px : -1, bi > 0 ? B - 1 : -1, B,
                       bi < px - 1 ? B + 1 : -1, bj < py - 1 ? B + px : -1};
    for (int c = 0; c < NC; c++) {
        T a = 0.0;
        for (int q = 0; q < nwarps; q++) a += wacc[c][q];
        const int d = c >> 1, pp = c & 1;
        const bool on = (tmask >> c) & 1u;
        ell_col[(long long)v * NC + c] = on ? (int)slot[(long long)nb[d] * nparts + pp] : -1;
        ell_val[(long long)v * NC + c] = a;
    }
}

// E in CSR from the candidate rows: the entry (v, w) is the mean of v's sum
// and w's (the same faces, summed in two orders): exactly symmetric.  The
// candidates of a row are in increasing vector order (blocks S < W < self <
// E < N, parts 0 < 1), so are the columns.
extern "C" __global__ void bf_defl_e(const T* __restrict__ ell_val, const int* __restrict__ ell_col,
        const long long* __restrict__ original, const int nparts, const int* __restrict__ e_ptr,
        int* __restrict__ e_idx, T* __restrict__ e_val, const int k)
{
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= k) return;
    const int P = (int)(original[v] % nparts);
    int pos = e_ptr[v];
    for (int c = 0; c < NC; c++) {
        const int w = ell_col[(long long)v * NC + c];
        if (w < 0) continue;
        T a = ell_val[(long long)v * NC + c];
        if (w != v) {
            const int m = 2 * (4 - (c >> 1)) + P;   // v among w's candidates
            a = 0.5 * (a + ell_val[(long long)w * NC + m]);
        }
        e_idx[pos] = w;
        e_val[pos] = a;
        pos++;
    }
}
"""


@functools.lru_cache(maxsize=None)
def _module():
    import cupy

    return cupy.RawModule(code=_SRC, options=("-std=c++14",))


def _fn(name):
    return _module().get_function(name)


def _rows_grid(nx, ny, threads=_THREADS):
    """Grid of the per-cell kernels: blocks along a row, a grid row per grid
    line (the kernels loop when there are more than 65535 lines)."""
    return (-(-nx // threads), min(ny, 65535))


def op_diagonals(beta_x, beta_y, hx, hy, reciprocal=False):
    """The five diagonals ``(S, W, C, E, N)`` (CuPy, float64) from the face
    ``beta = 1/rho`` (or from ``rho`` with ``reciprocal``): one pass (twin:
    ``operator._diagonals_from_couplings`` of ``beta / h**2``, equal bit for
    bit)."""
    import cupy as cp

    beta_x = cp.ascontiguousarray(beta_x, dtype=cp.float64)
    beta_y = cp.ascontiguousarray(beta_y, dtype=cp.float64)
    ny, nx = beta_x.shape[0], beta_x.shape[1] + 1
    out = [cp.empty((ny, nx), dtype=cp.float64) for _ in range(5)]
    _fn("bf_op_diagonals")(_rows_grid(nx, ny), (_THREADS,),
                           (beta_x, beta_y, np.float64(float(hx) ** 2), np.float64(float(hy) ** 2),
                            *out, np.int32(nx), np.int32(ny), np.int32(bool(reciprocal))))
    return tuple(out)


def ips_coefficients(S, W, C, E, N):
    """``(s, S~, W~, E~, N~)`` of the scaled incomplete Poisson preconditioner
    (CuPy, float64) in one pass (twin: the array code of
    ``ScaledIncompletePoisson``, equal bit for bit)."""
    import cupy as cp

    ny, nx = C.shape
    arrays = [cp.ascontiguousarray(a, dtype=cp.float64) for a in (S, W, C, E, N)]
    out = [cp.empty((ny, nx), dtype=cp.float64) for _ in range(5)]
    _fn("bf_ips_coefficients")(_rows_grid(nx, ny), (_THREADS,),
                               (*arrays, *out, np.int32(nx), np.int32(ny)))
    return tuple(out)


def raw_deflation_ok(A, px, py):
    """Can :func:`deflation_blocks` build this deflation space?  CuPy, the
    float64 grid operator, blocks tiling the grid exactly, 32-bit cell
    indices."""
    backend = getattr(A, "backend", None)
    if backend is None or backend.name != "cupy" or not hasattr(A, "grid_shape"):
        return False
    if np.dtype(getattr(A, "dtype", None)) != np.float64:
        return False
    if getattr(A, "storage", None) not in ("diagonals", "matrix_free"):
        return False
    ny, nx = A.grid_shape
    return ny % py == 0 and nx % px == 0 and nx * ny < 2 ** 31 - 1


def deflation_blocks(A, phi, px, py, size, present_table):
    """Labels, ``(A Z)^T`` and ``E`` of the block deflation space on the GPU.

    ``phi`` None: ``px x py`` blocks; else every block split into its liquid
    (``phi >= 0``) and gas part.  ``size`` (host) are the cells per block and
    ``present_table(present)`` the caller's compaction (returns ``k, slot,
    original`` on the device).  Returns ``(pieces, part, present)``, with
    ``pieces`` a dict of ``labels`` (int32, grid-flat), ``k``, ``slot``,
    ``original``, ``AZT`` and ``E`` (CuPy CSR).  Host synchronisations: ``k``
    (levelset only) and the two entry counts.  ``size`` is only used
    without ``phi`` (with it the blocks tile the grid: all the same size).
    """
    import cupy as cp
    import cupyx.scipy.sparse as csp

    ny, nx = A.grid_shape
    by, bx = ny // py, nx // px
    nblocks = px * py
    n = nx * ny
    i32 = np.int32
    if phi is None:
        nparts = 1
        part = cp.zeros((ny, nx), dtype=cp.int8)
        present = size > 0                                   # host: no sync
    else:
        nparts = 2
        phi = cp.ascontiguousarray(phi, dtype=cp.float64).reshape(ny, nx)
        part = cp.empty((ny, nx), dtype=cp.int8)
        present = cp.empty(2 * nblocks, dtype=cp.bool_)
        _fn("bf_defl_parts")((nblocks,), (_THREADS,),
                             (phi, part, present, i32(nx), i32(bx), i32(by), i32(px)))
    k, slot, original = present_table(present)
    slot = cp.ascontiguousarray(cp.asarray(slot), dtype=cp.int64)
    original = cp.ascontiguousarray(cp.asarray(original), dtype=cp.int64)
    labels = cp.empty(n, dtype=cp.int32)
    _fn("bf_defl_labels")(_rows_grid(nx, ny), (_THREADS,),
                          (part, slot, labels, i32(nx), i32(ny), i32(bx), i32(by), i32(px),
                           i32(nparts)))
    if getattr(A, "storage", None) == "matrix_free":
        cx, sx, cy, sign = A.cx, nx - 1, A.cy, 1.0
    else:
        S, W, C, E, N = A.diagonals
        cx, sx, cy, sign = E, nx, N, -1.0
    cx = cp.ascontiguousarray(cx, dtype=cp.float64)
    cy = cp.ascontiguousarray(cy, dtype=cp.float64)
    azt_cnt = cp.empty(k, dtype=cp.int32)
    e_cnt = cp.empty(k, dtype=cp.int32)
    null_i = cp.zeros(1, dtype=cp.int32)
    null_f = cp.zeros(1, dtype=cp.float64)
    rows = _fn("bf_defl_rows")
    common = (labels, part, original, slot, i32(nparts), cx, i32(sx), cy, np.float64(sign),
              i32(nx), i32(ny), i32(bx), i32(by), i32(px), i32(py))
    if k:
        rows((k,), (_THREADS,), common + (azt_cnt, e_cnt, null_i, null_i, null_f, null_f,
                                          null_i, i32(0)))
    azt_ptr = cp.zeros(k + 1, dtype=cp.int32)
    e_ptr = cp.zeros(k + 1, dtype=cp.int32)
    cp.cumsum(azt_cnt, out=azt_ptr[1:])
    cp.cumsum(e_cnt, out=e_ptr[1:])
    nnz_azt, nnz_e = (int(v) for v in cp.stack([azt_ptr[-1], e_ptr[-1]]).get())
    azt_idx = cp.empty(nnz_azt, dtype=cp.int32)
    azt_val = cp.empty(nnz_azt, dtype=cp.float64)
    ell_val = cp.empty(10 * k, dtype=cp.float64)
    ell_col = cp.empty(10 * k, dtype=cp.int32)
    e_idx = cp.empty(nnz_e, dtype=cp.int32)
    e_val = cp.empty(nnz_e, dtype=cp.float64)
    if k:
        rows((k,), (_THREADS,), common + (azt_cnt, e_cnt, azt_ptr, azt_idx, azt_val, ell_val,
                                          ell_col, i32(1)))
        _fn("bf_defl_e")(((k + _THREADS - 1) // _THREADS,), (_THREADS,),
                         (ell_val, ell_col, original, i32(nparts), e_ptr, e_idx, e_val, i32(k)))
    AZT = csp.csr_matrix((azt_val, azt_idx, azt_ptr), shape=(k, n))
    Eb = csp.csr_matrix((e_val, e_idx, e_ptr), shape=(k, k))
    pieces = dict(labels=labels, k=k, slot=slot, original=original, AZT=AZT, E=Eb)
    return pieces, part, present
