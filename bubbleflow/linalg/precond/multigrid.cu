// The multigrid cycle's kernels (bubbleflow.linalg.precond.multigrid; twins:
// smooth_restrict, prolong_smooth).  "typedef double T; typedef double TI;"
// (or float) and "#define MG_H degree" precede this text.  2-D cell-centred grid, cells (j, i) row after row, p = j * nx + i;
// face couplings cx (ny, nx - 1) between cells (j, i) and (j, i + 1), cy
// (ny - 1, nx) between (j, i) and (j + 1, i).  A x is the flux form
// (common.cuh's bf_face_flux; summed in another order than the array code's
// apply_faces: results agree to rounding).
#include "common.cuh"


// ---------------------------------------------------------------- fused cycle
// One block smooths a tile of cells from a region MG_H = degree cells wider
// on every side: each Chebyshev step's stencil leaves one more ring of the
// region invalid, so after `degree` steps the tile is exact.  Reading the
// halo again costs L2 traffic; the steps' intermediate vectors never reach
// DRAM.  The region is 32 columns by MG_RY rows: lane l of each warp holds
// column l, warp w the rows w MG_R .. w MG_R + MG_R - 1, every value of a
// cell in registers (the kernels are bound by their instructions: a
// neighbour in the row comes by a shuffle, in the column from the thread's
// own registers, across warps from two rows a warp publishes in shared
// memory, one barrier a step).  The tile is the region less MG_H cells on
// every side, MG_TX x MG_TY cells (both even: a tile holds whole 2 x 2
// aggregates).  The level's input and output (b, and the result of the up
// kernel) are of type TI: on the finest level of a float32 cycle the Krylov
// method's float64 vectors, elsewhere T.  io_scale = [s_in, s_out], powers
// of two (Multigrid.prepare), scale b as it is read and the result as it
// is written, so a float32 cycle holds any right-hand side's range and the
// cycle stays the same operator (1 and 1 on the coarse levels).  coef =
// [1 / theta, a_1, c_1, a_2, c_2, ...] (chebyshev_coefficients).  The
// inverse diagonal is formed from the couplings (D = the sum of the cell's
// couplings).  MG_H is defined by the includer (a compile per degree: the
// region's sizes are constants); MG_WARPS and MG_R may be.
#ifndef MG_WARPS
#define MG_WARPS 8
#define MG_R 5
#endif
#define MG_RX 32
#define MG_RY (MG_WARPS * MG_R)
#define MG_TX (MG_RX - 2 * MG_H)
#define MG_TY (MG_RY - 2 * MG_H)
#define MG_THREADS (32 * MG_WARPS)
#define MG_FULL 0xffffffffu

// A thread's cells: column `lane` of the region, rows row0 .. row0 + MG_R - 1,
// and the grid's cell of the first one (i, j0).  The couplings towards each
// neighbour (zero outside the grid and across walls), D^-1, r, x and d.
struct MgStrip {
    int lane, warp, row0, i, j0;
    T cw[MG_R], ce[MG_R], cs[MG_R], cn[MG_R], dinv[MG_R], r[MG_R], x[MG_R], d[MG_R];
};

// The rows a warp shares with its neighbours: [parity][warp][first, last][lane].
struct MgEdges {
    T v[2][MG_WARPS][2][32];
};

__device__ __forceinline__ bool mg_in(int i, int j, int nx, int ny)
{
    return i >= 0 && i < nx && j >= 0 && j < ny;
}

// Whether row k of the strip is inside the region's outer ring (its
// stencil's neighbours are all in the region).
__device__ __forceinline__ bool mg_inner(const MgStrip& s, int k)
{
    const int row = s.row0 + k;
    return s.lane > 0 && s.lane < MG_RX - 1 && row > 0 && row < MG_RY - 1;
}

// Whether row k of the strip is a tile cell.
__device__ __forceinline__ bool mg_tile_cell(const MgStrip& s, int k)
{
    const int row = s.row0 + k;
    return s.lane >= MG_H && s.lane < MG_H + MG_TX && row >= MG_H && row < MG_H + MG_TY;
}

// The strip's couplings and D^-1 from the grid (levels hold fewer than 2^31
// cells: multigrid_cuda.covered); returns b scaled by s_in (zero outside)
// into s.r.
__device__ __forceinline__ void mg_load(MgStrip& s, const T* __restrict__ cx,
                                        const T* __restrict__ cy, const TI* __restrict__ b,
                                        TI s_in, int nx, int ny)
{
#pragma unroll
    for (int k = 0; k < MG_R; ++k) {
        const int i = s.i, j = s.j0 + k;
        const bool in = mg_in(i, j, nx, ny);
        const T w = in && i > 0 ? cx[j * (nx - 1) + i - 1] : T(0);
        const T e = in && i < nx - 1 ? cx[j * (nx - 1) + i] : T(0);
        const T so = in && j > 0 ? cy[(j - 1) * nx + i] : T(0);
        const T n = in && j < ny - 1 ? cy[j * nx + i] : T(0);
        const T centre = (w + e) + (so + n);
        s.cw[k] = w;
        s.ce[k] = e;
        s.cs[k] = so;
        s.cn[k] = n;
        s.dinv[k] = centre > 0 ? T(1) / centre : T(0);
        s.r[k] = in ? T(b[j * nx + i] * s_in) : T(0);
    }
}

// (A u) of every row of the strip (out), u the strip's values of a field:
// its first and last rows published in edges (parity), one barrier, the
// neighbours' rows read.  Rows on the region's ring get values from
// missing neighbours (the shuffles' own, the strip's end): never used.
__device__ __forceinline__ void mg_apply(const MgStrip& s, const T* u, MgEdges& edges,
                                         int parity, T* out)
{
    edges.v[parity][s.warp][0][s.lane] = u[0];
    edges.v[parity][s.warp][1][s.lane] = u[MG_R - 1];
    __syncthreads();
    const T below = s.warp > 0 ? edges.v[parity][s.warp - 1][1][s.lane] : u[0];
    const T above = s.warp < MG_WARPS - 1 ? edges.v[parity][s.warp + 1][0][s.lane]
                                           : u[MG_R - 1];
#pragma unroll
    for (int k = 0; k < MG_R; ++k) {
        const T uq = u[k];
        const T uw = __shfl_up_sync(MG_FULL, uq, 1);
        const T ue = __shfl_down_sync(MG_FULL, uq, 1);
        const T us = k > 0 ? u[k - 1] : below;
        const T un = k < MG_R - 1 ? u[k + 1] : above;
        out[k] = s.cw[k] * (uq - uw) + s.ce[k] * (uq - ue) + s.cs[k] * (uq - us)
               + s.cn[k] * (uq - un);
    }
}

// The Chebyshev steps after the first: r -= A d, d' = a d + c D^-1 r,
// x += d' (on the region but its ring, whose values are not used).
__device__ __forceinline__ int mg_steps(MgStrip& s, MgEdges& edges, int parity,
                                        const T* __restrict__ coef)
{
#pragma unroll
    for (int step = 1; step < MG_H; ++step) {
        const T a = coef[2 * step - 1], c = coef[2 * step];
        T ad[MG_R];
        mg_apply(s, s.d, edges, parity, ad);
        parity ^= 1;
#pragma unroll
        for (int k = 0; k < MG_R; ++k) {
            if (!mg_inner(s, k)) continue;
            const T rq = s.r[k] - ad[k];
            const T dq = a * s.d[k] + c * (s.dinv[k] * rq);
            s.r[k] = rq;
            s.d[k] = dq;
            s.x[k] += dq;
        }
    }
    return parity;
}

__device__ __forceinline__ MgStrip mg_strip()
{
    MgStrip s;
    s.lane = threadIdx.x & 31;
    s.warp = threadIdx.x >> 5;
    s.row0 = s.warp * MG_R;
    s.i = blockIdx.x * MG_TX - MG_H + s.lane;
    s.j0 = blockIdx.y * MG_TY - MG_H + s.row0;
    return s;
}

// Down the cycle: x = S(b) from zero (Chebyshev of degree MG_H) on the
// tile, and the residual b - A x summed over each aggregate into bc (ncx).
extern "C" __global__ void __launch_bounds__(MG_THREADS) bf_mg_down(
    const T* __restrict__ cx, const T* __restrict__ cy, const TI* __restrict__ b,
    const double* __restrict__ io_scale, const T* __restrict__ coef, T* __restrict__ x,
    T* __restrict__ bc, const int nx, const int ny, const int ncx, const int ncy,
    const double* __restrict__ stop)
{
    if (stop[0] != 0.0) return;         // the Krylov solve has converged: nothing to do
    __shared__ MgEdges edges;
    __shared__ T rtile[MG_RY][MG_RX];
    MgStrip s = mg_strip();
    const T inv_theta = coef[0];
    mg_load(s, cx, cy, b, TI(io_scale[0]), nx, ny);
#pragma unroll
    for (int k = 0; k < MG_R; ++k) {
        const T dq = (s.dinv[k] * s.r[k]) * inv_theta;
        s.d[k] = dq;
        s.x[k] = dq;
    }
    int parity = mg_steps(s, edges, 0, coef);
    T ad[MG_R];
    mg_apply(s, s.d, edges, parity, ad);
#pragma unroll
    for (int k = 0; k < MG_R; ++k) {
        if (!mg_tile_cell(s, k)) continue;
        const T rq = s.r[k] - ad[k];
        rtile[s.row0 + k][s.lane] = rq;
        const int j = s.j0 + k;
        if (s.i < nx && j < ny) x[j * nx + s.i] = s.x[k];
    }
    __syncthreads();
    for (int k = threadIdx.x; k < (MG_TX / 2) * (MG_TY / 2); k += MG_THREADS) {
        const int ci = blockIdx.x * (MG_TX / 2) + k % (MG_TX / 2);
        const int cj = blockIdx.y * (MG_TY / 2) + k / (MG_TX / 2);
        if (ci >= ncx || cj >= ncy) continue;
        const int li = 2 * (k % (MG_TX / 2)) + MG_H, lj = 2 * (k / (MG_TX / 2)) + MG_H;
        bc[cj * ncx + ci] = (rtile[lj][li] + rtile[lj][li + 1])
                          + (rtile[lj + 1][li] + rtile[lj + 1][li + 1]);
    }
}

// Up the cycle: out = S(b) from x + scale P xc (Chebyshev of degree MG_H),
// plus first where it is given (bf_mg_up_sum: a W level's coarse level
// visited the second time, first the first visit's result, summed as it is
// written).  Inlined into each kernel, so first's test is resolved there.
__device__ __forceinline__ void mg_up(
    const T* __restrict__ cx, const T* __restrict__ cy, const TI* __restrict__ b,
    const double* __restrict__ io_scale, const T* __restrict__ x, const T* __restrict__ xc,
    const T* __restrict__ coef, TI* __restrict__ out, const T* __restrict__ first,
    const int nx, const int ny, const int ncx, const T scale)
{
    __shared__ MgEdges edges;
    MgStrip s = mg_strip();
    const T inv_theta = coef[0];
    mg_load(s, cx, cy, b, TI(io_scale[0]), nx, ny);
#pragma unroll
    for (int k = 0; k < MG_R; ++k) {
        const int i = s.i, j = s.j0 + k;
        s.x[k] = mg_in(i, j, nx, ny) ? x[j * nx + i] + scale * xc[(j >> 1) * ncx + (i >> 1)]
                                     : T(0);
    }
    T ax[MG_R];
    mg_apply(s, s.x, edges, 0, ax);
#pragma unroll
    for (int k = 0; k < MG_R; ++k) {
        const T rq = mg_inner(s, k) ? s.r[k] - ax[k] : T(0);
        s.d[k] = (s.dinv[k] * rq) * inv_theta;
        s.r[k] = rq;
        s.x[k] += s.d[k];
    }
    mg_steps(s, edges, 1, coef);
    const TI s_out = TI(io_scale[1]);
#pragma unroll
    for (int k = 0; k < MG_R; ++k) {
        const int j = s.j0 + k;
        if (mg_tile_cell(s, k) && s.i < nx && j < ny) {
            const int p = j * nx + s.i;
            const TI value = TI(s.x[k]) * s_out;
            out[p] = first != nullptr ? value + TI(first[p]) : value;
        }
    }
}

extern "C" __global__ void __launch_bounds__(MG_THREADS) bf_mg_up(
    const T* __restrict__ cx, const T* __restrict__ cy, const TI* __restrict__ b,
    const double* __restrict__ io_scale, const T* __restrict__ x, const T* __restrict__ xc,
    const T* __restrict__ coef, TI* __restrict__ out, const int nx, const int ny,
    const int ncx, const T scale, const double* __restrict__ stop)
{
    if (stop[0] != 0.0) return;
    mg_up(cx, cy, b, io_scale, x, xc, coef, out, nullptr, nx, ny, ncx, scale);
}

extern "C" __global__ void __launch_bounds__(MG_THREADS) bf_mg_up_sum(
    const T* __restrict__ cx, const T* __restrict__ cy, const TI* __restrict__ b,
    const double* __restrict__ io_scale, const T* __restrict__ x, const T* __restrict__ xc,
    const T* __restrict__ coef, TI* __restrict__ out, const T* __restrict__ first,
    const int nx, const int ny, const int ncx, const T scale, const double* __restrict__ stop)
{
    if (stop[0] != 0.0) return;
    mg_up(cx, cy, b, io_scale, x, xc, coef, out, first, nx, ny, ncx, scale);
}

// dst = src between the level's type and the finest level's TI (n values).
extern "C" __global__ void bf_mg_to_level(const TI* __restrict__ src, T* __restrict__ dst,
                                          const long long n)
{
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x)
        dst[k] = T(src[k]);
}

extern "C" __global__ void bf_mg_from_level(const T* __restrict__ src, TI* __restrict__ dst,
                                            const long long n)
{
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x)
        dst[k] = TI(src[k]);
}

// x = M b for the coarsest level's dense inverse M (n x n, row-major): a warp
// per row, fixed summation order.
extern "C" __global__ void bf_mg_dense_matvec(
    const T* __restrict__ M, const T* __restrict__ b, T* __restrict__ x, const int n)
{
    const int lane = threadIdx.x & 31;
    const int warps = (gridDim.x * blockDim.x) >> 5;
    for (int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < n; row += warps) {
        T s = 0.0;
        for (int c = lane; c < n; c += 32) s += M[(long long)row * n + c] * b[c];
        s = warp_sum(s);
        if (lane == 0) x[row] = s;
    }
}

// b -= A x on one level (each thread reads and writes its own b: in place).
extern "C" __global__ void bf_mg_residual_inplace(
    const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ x,
    T* __restrict__ b, const int nx, const int ny)
{
    BF_CELLS(nx, ny) {
        const long long p = (long long)j * nx + i;
        b[p] = b[p] - bf_face_flux(cx, cy, x, nx, ny, j, i);
    }
}

// out = a + b, elementwise over n values (out may be a or b).
extern "C" __global__ void bf_mg_add(const T* a, const T* b, T* out, const long long n)
{
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x)
        out[k] = a[k] + b[k];
}

// dst = src, elementwise over n values.
extern "C" __global__ void bf_mg_copy(const T* __restrict__ src, T* __restrict__ dst,
                                      const long long n)
{
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x)
        dst[k] = src[k];
}
