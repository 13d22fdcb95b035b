// The multigrid cycle's kernels (bubbleflow.linalg.precond.multigrid; twins:
// smooth_restrict, prolong_smooth).  "typedef double T; typedef double TI;"
// (or float) and "#define MG_H degree" precede this text.  2-D cell-centred grid, cells (j, i) row after row, p = j * nx + i;
// face couplings cx (ny, nx - 1) between cells (j, i) and (j, i + 1), cy
// (ny - 1, nx) between (j, i) and (j + 1, i).  A x is the flux form
// (common.cuh's bf_face_flux; summed in another order than the array code's
// apply_faces: results agree to rounding).
#include "common.cuh"


// ---------------------------------------------------------------- fused cycle
// One block smooths a tile of MG_TX x MG_TY cells (even: a tile holds whole
// 2 x 2 aggregates) from a region MG_H = degree cells wider on every side,
// in shared memory: each Chebyshev step's stencil leaves one more ring of
// the region invalid, so after `degree` steps the tile is exact.  Reading
// the halo again costs L2 traffic; the steps' intermediate vectors never
// reach DRAM.  The level's input and output (b, and the result of the up
// kernel) are of type TI: on the finest level of a float32 cycle the Krylov
// method's float64 vectors, elsewhere T.  io_scale = [s_in, s_out], powers
// of two (Multigrid.prepare), scale b as it is read and the result as it
// is written, so a float32 cycle holds any right-hand side's range and the
// cycle stays the same operator (1 and 1 on the coarse levels).  coef =
// [1 / theta, a_1, c_1, a_2, c_2, ...] (chebyshev_coefficients).  The
// inverse diagonal is formed from the couplings (D = the sum of the cell's
// couplings).  MG_H is defined by
// the includer (a compile per degree: the region's sizes are constants).
#define MG_TX 32
#define MG_TY 16
#define MG_THREADS 256
#define MG_RX (MG_TX + 2 * MG_H)
#define MG_RY (MG_TY + 2 * MG_H)
#define MG_SIZE (MG_RX * MG_RY)

// The shared arrays of a tile: east and north couplings, D^-1, r, x and
// two d (a step reads one and writes the other: one barrier per step).
struct MgTile {
    int i0, j0;
    T *ce, *cn, *dinv, *r, *x, *d, *dn;
};

__device__ __forceinline__ MgTile mg_tile(unsigned char* smem)
{
    MgTile t;
    t.i0 = blockIdx.x * MG_TX - MG_H;
    t.j0 = blockIdx.y * MG_TY - MG_H;
    T* base = reinterpret_cast<T*>(smem);
    t.ce = base;
    t.cn = base + MG_SIZE;
    t.dinv = base + 2 * MG_SIZE;
    t.r = base + 3 * MG_SIZE;
    t.x = base + 4 * MG_SIZE;
    t.d = base + 5 * MG_SIZE;
    t.dn = base + 6 * MG_SIZE;
    return t;
}

// Region cell q from global memory: its couplings and D^-1 into the tile
// (zero outside the grid and across walls), and its b scaled by s_in (zero
// outside); *in: whether q is in the grid, *p: its index there.
__device__ __forceinline__ T mg_load(const MgTile& t, const T* __restrict__ cx,
                                     const T* __restrict__ cy, const TI* __restrict__ b,
                                     const double* __restrict__ io_scale, int nx, int ny,
                                     int q, bool* in, long long* p)
{
    const int i = t.i0 + q % MG_RX, j = t.j0 + q / MG_RX;
    *in = i >= 0 && i < nx && j >= 0 && j < ny;
    *p = (long long)j * nx + i;
    T w = 0.0, e = 0.0, s = 0.0, n = 0.0;
    if (*in) {
        const long long fx = (long long)j * (nx - 1) + i;
        if (i > 0) w = cx[fx - 1];
        if (i < nx - 1) e = cx[fx];
        if (j > 0) s = cy[(long long)(j - 1) * nx + i];
        if (j < ny - 1) n = cy[(long long)j * nx + i];
    }
    const T centre = (w + e) + (s + n);
    t.ce[q] = e;
    t.cn[q] = n;
    t.dinv[q] = centre > 0 ? T(1) / centre : T(0);
    return *in ? T(b[*p] * TI(io_scale[0])) : T(0);
}

// (A u)_q from the region's shared arrays (q not on the region's edge).
__device__ __forceinline__ T mg_stencil(const MgTile& t, const T* u, int q)
{
    const T uq = u[q];
    return t.ce[q - 1] * (uq - u[q - 1]) + t.ce[q] * (uq - u[q + 1])
         + t.cn[q - MG_RX] * (uq - u[q - MG_RX]) + t.cn[q] * (uq - u[q + MG_RX]);
}

__device__ __forceinline__ bool mg_inner(int q)
{
    const int li = q % MG_RX, lj = q / MG_RX;
    return li > 0 && li < MG_RX - 1 && lj > 0 && lj < MG_RY - 1;
}

// The Chebyshev steps after the first: r -= A d, d' = a d + c D^-1 r,
// x += d' (on the region but its edge, whose values are not used).
__device__ __forceinline__ void mg_steps(MgTile& t, const T* __restrict__ coef)
{
#pragma unroll
    for (int s = 1; s < MG_H; ++s) {
        const T a = coef[2 * s - 1], c = coef[2 * s];
        __syncthreads();
        for (int q = threadIdx.x; q < MG_SIZE; q += MG_THREADS) {
            if (!mg_inner(q)) continue;
            const T rq = t.r[q] - mg_stencil(t, t.d, q);
            const T dq = a * t.d[q] + c * (t.dinv[q] * rq);
            t.r[q] = rq;
            t.dn[q] = dq;
            t.x[q] += dq;
        }
        T* swap = t.d;
        t.d = t.dn;
        t.dn = swap;
    }
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
    extern __shared__ __align__(16) unsigned char smem[];
    MgTile t = mg_tile(smem);
    const T inv_theta = coef[0];
    for (int q = threadIdx.x; q < MG_SIZE; q += MG_THREADS) {
        bool in;
        long long p;
        const T bq = mg_load(t, cx, cy, b, io_scale, nx, ny, q, &in, &p);
        const T dq = (t.dinv[q] * bq) * inv_theta;
        t.r[q] = bq;
        t.d[q] = dq;
        t.x[q] = dq;
    }
    mg_steps(t, coef);
    __syncthreads();
    for (int k = threadIdx.x; k < MG_TX * MG_TY; k += MG_THREADS) {
        const int q = (k / MG_TX + MG_H) * MG_RX + k % MG_TX + MG_H;
        t.r[q] -= mg_stencil(t, t.d, q);
        const int i = t.i0 + MG_H + k % MG_TX, j = t.j0 + MG_H + k / MG_TX;
        if (i < nx && j < ny) x[(long long)j * nx + i] = t.x[q];
    }
    __syncthreads();
    for (int k = threadIdx.x; k < (MG_TX / 2) * (MG_TY / 2); k += MG_THREADS) {
        const int ci = blockIdx.x * (MG_TX / 2) + k % (MG_TX / 2);
        const int cj = blockIdx.y * (MG_TY / 2) + k / (MG_TX / 2);
        if (ci >= ncx || cj >= ncy) continue;
        const int q = (2 * (k / (MG_TX / 2)) + MG_H) * MG_RX + 2 * (k % (MG_TX / 2)) + MG_H;
        bc[(long long)cj * ncx + ci] = (t.r[q] + t.r[q + 1]) + (t.r[q + MG_RX] + t.r[q + MG_RX + 1]);
    }
}

// Up the cycle: out = S(b) from x + scale P xc (Chebyshev of degree MG_H).
extern "C" __global__ void __launch_bounds__(MG_THREADS) bf_mg_up(
    const T* __restrict__ cx, const T* __restrict__ cy, const TI* __restrict__ b,
    const double* __restrict__ io_scale, const T* __restrict__ x, const T* __restrict__ xc,
    const T* __restrict__ coef, TI* __restrict__ out, const int nx, const int ny,
    const int ncx, const T scale, const double* __restrict__ stop)
{
    if (stop[0] != 0.0) return;
    extern __shared__ __align__(16) unsigned char smem[];
    MgTile t = mg_tile(smem);
    const T inv_theta = coef[0];
    for (int q = threadIdx.x; q < MG_SIZE; q += MG_THREADS) {
        bool in;
        long long p;
        t.r[q] = mg_load(t, cx, cy, b, io_scale, nx, ny, q, &in, &p);
        const int i = t.i0 + q % MG_RX, j = t.j0 + q / MG_RX;
        t.x[q] = in ? x[p] + scale * xc[(long long)(j >> 1) * ncx + (i >> 1)] : T(0);
    }
    __syncthreads();
    for (int q = threadIdx.x; q < MG_SIZE; q += MG_THREADS) {
        const T rq = mg_inner(q) ? t.r[q] - mg_stencil(t, t.x, q) : T(0);
        const T dq = (t.dinv[q] * rq) * inv_theta;
        t.r[q] = rq;
        t.d[q] = dq;
    }
    __syncthreads();
    for (int q = threadIdx.x; q < MG_SIZE; q += MG_THREADS) t.x[q] += t.d[q];
    mg_steps(t, coef);
    __syncthreads();
    for (int k = threadIdx.x; k < MG_TX * MG_TY; k += MG_THREADS) {
        const int i = t.i0 + MG_H + k % MG_TX, j = t.j0 + MG_H + k / MG_TX;
        if (i < nx && j < ny)
            out[(long long)j * nx + i] =
                TI(t.x[(k / MG_TX + MG_H) * MG_RX + k % MG_TX + MG_H]) * TI(io_scale[1]);
    }
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
