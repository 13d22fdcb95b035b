// The multigrid cycle's kernels (bubbleflow.linalg.precond.multigrid; twins:
// smooth, residual_restrict, prolong_add).  "typedef double T;" precedes this
// text.  2-D cell-centred grid, cells (j, i) row after row, p = j * nx + i;
// face couplings cx (ny, nx - 1) between cells (j, i) and (j, i + 1), cy
// (ny - 1, nx) between (j, i) and (j + 1, i).  A x is the flux form
// sum over the cell's faces of c (x_p - x_q), as operators.poisson.apply_faces
// (summed in another order: results agree with the array code to rounding).
#include "common.cuh"

__device__ __forceinline__ T flux_apply(const T* __restrict__ cx, const T* __restrict__ cy,
                                        const T* __restrict__ x, int nx, int ny, int j, int i)
{
    const long long p = (long long)j * nx + i;
    const T xp_ = x[p];
    T y = 0.0;
    if (i > 0) y += cx[(long long)j * (nx - 1) + i - 1] * (xp_ - x[p - 1]);
    if (i < nx - 1) y += cx[(long long)j * (nx - 1) + i] * (xp_ - x[p + 1]);
    if (j > 0) y += cy[(long long)(j - 1) * nx + i] * (xp_ - x[p - nx]);
    if (j < ny - 1) y += cy[(long long)j * nx + i] * (xp_ - x[p + nx]);
    return y;
}

// The first Chebyshev step: r = b - A x (r = b without x), d = D^-1 r / theta,
// x_out = x + d (d without x).
extern "C" __global__ void bf_mg_cheb_start(
    const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ inv_d,
    const T* __restrict__ b, const T* __restrict__ x, T* __restrict__ x_out,
    T* __restrict__ r, T* __restrict__ d, const int nx, const int ny, const int has_x,
    const T inv_theta)
{
    BF_CELLS(nx, ny) {
        const long long p = (long long)j * nx + i;
        const T rr = has_x ? b[p] - flux_apply(cx, cy, x, nx, ny, j, i) : b[p];
        const T dd = (inv_d[p] * rr) * inv_theta;
        r[p] = rr;
        d[p] = dd;
        x_out[p] = has_x ? x[p] + dd : dd;
    }
}

// A later step: r -= A d_in, d_out = a d_in + c D^-1 r, x += d_out (each
// thread writes its own cell; d_in is read only).
extern "C" __global__ void bf_mg_cheb_step(
    const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ inv_d,
    const T* __restrict__ d_in, T* __restrict__ d_out, T* __restrict__ r,
    T* __restrict__ x, const int nx, const int ny, const T a, const T c)
{
    BF_CELLS(nx, ny) {
        const long long p = (long long)j * nx + i;
        const T rr = r[p] - flux_apply(cx, cy, d_in, nx, ny, j, i);
        const T dd = a * d_in[p] + c * (inv_d[p] * rr);
        r[p] = rr;
        d_out[p] = dd;
        x[p] += dd;
    }
}

// The residual b - A x summed over each 2 x 2 aggregate: one thread per
// coarse cell (J, I) of the (ncy, ncx) coarse grid.
extern "C" __global__ void bf_mg_residual_restrict(
    const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ b,
    const T* __restrict__ x, T* __restrict__ out, const int nx, const int ny, const int ncx,
    const int ncy)
{
    for (int J = blockIdx.y * blockDim.y + threadIdx.y; J < ncy; J += gridDim.y * blockDim.y)
        for (int I = blockIdx.x * blockDim.x + threadIdx.x; I < ncx; I += gridDim.x * blockDim.x) {
            T s = 0.0;
            for (int a = 0; a < 2; ++a) {
                const int j = 2 * J + a;
                if (j >= ny) break;
                for (int e = 0; e < 2; ++e) {
                    const int i = 2 * I + e;
                    if (i >= nx) break;
                    s += b[(long long)j * nx + i] - flux_apply(cx, cy, x, nx, ny, j, i);
                }
            }
            out[(long long)J * ncx + I] = s;
        }
}

// x_out = x + scale * xc[aggregate of the cell].
extern "C" __global__ void bf_mg_prolong_add(
    const T* __restrict__ x, const T* __restrict__ xc, T* __restrict__ x_out, const int nx,
    const int ny, const int ncx, const T scale)
{
    BF_CELLS(nx, ny) {
        const long long p = (long long)j * nx + i;
        x_out[p] = x[p] + scale * xc[(long long)(j >> 1) * ncx + (i >> 1)];
    }
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
        b[p] = b[p] - flux_apply(cx, cy, x, nx, ny, j, i);
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
