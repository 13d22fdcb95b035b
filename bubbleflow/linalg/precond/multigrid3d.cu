// The 3-D multigrid cycle's smoothing and transfers, one kernel per
// Chebyshev step (bubbleflow.linalg.precond.multigrid_cuda; twins:
// multigrid.smooth_restrict and multigrid.prolong_smooth, array code).
// T is defined before this text.  Arrays hold the axes reversed, (nz, ny,
// nx) with x fastest; the couplings cx (nz, ny, nx-1), cy (nz, ny-1, nx),
// cz (nz-1, ny, nx) are positive, so (A v)_p = sum_f c_f (v_p - v_q).
// Aggregates are 2 x 2 x 2 cells (the last one of an odd axis alone).

__device__ __forceinline__ long long mg3_coarse(int i, int j, int k, int ncx, int ncy)
{
    return ((long long)(k >> 1) * ncy + (j >> 1)) * ncx + (i >> 1);
}

// v at cell p: x[p], + scale * xc[aggregate of p] where ncx > 0 (a coarse xc given).
__device__ __forceinline__ T mg3_value(const T* __restrict__ x, const T* __restrict__ xc,
                                       T scale, long long p, int i, int j, int k, int ncx,
                                       int ncy)
{
    T v = x[p];
    if (ncx > 0) v += scale * xc[mg3_coarse(i, j, k, ncx, ncy)];
    return v;
}

__device__ __forceinline__ T mg3_apply(const T* __restrict__ cx, const T* __restrict__ cy,
                                       const T* __restrict__ cz, const T* __restrict__ x,
                                       const T* __restrict__ xc, T scale, long long p, int i,
                                       int j, int k, int nx, int ny, int nz, int ncx, int ncy)
{
    const long long plane = (long long)nx * ny;
    const T v = mg3_value(x, xc, scale, p, i, j, k, ncx, ncy);
    T acc = 0;
    const long long rx = ((long long)k * ny + j) * (nx - 1);
    if (i > 0)      acc += cx[rx + i - 1] * (v - mg3_value(x, xc, scale, p - 1, i - 1, j, k, ncx, ncy));
    if (i < nx - 1) acc += cx[rx + i] * (v - mg3_value(x, xc, scale, p + 1, i + 1, j, k, ncx, ncy));
    const long long ry = (long long)k * (ny - 1) * nx;
    if (j > 0)      acc += cy[ry + (long long)(j - 1) * nx + i] * (v - mg3_value(x, xc, scale, p - nx, i, j - 1, k, ncx, ncy));
    if (j < ny - 1) acc += cy[ry + (long long)j * nx + i] * (v - mg3_value(x, xc, scale, p + nx, i, j + 1, k, ncx, ncy));
    if (k > 0)      acc += cz[(long long)(k - 1) * plane + (long long)j * nx + i] * (v - mg3_value(x, xc, scale, p - plane, i, j, k - 1, ncx, ncy));
    if (k < nz - 1) acc += cz[(long long)k * plane + (long long)j * nx + i] * (v - mg3_value(x, xc, scale, p + plane, i, j, k + 1, ncx, ncy));
    return acc;
}

// The first Chebyshev step from x0 = x (+ scale P xc where ncx > 0), or from
// zero where has_x is 0 (x and xc then any arrays, not read):
// r = b - A x0, d = inv_theta D^-1 r, x_out = x0 + d.
extern "C" __global__
void bf_mg3_start(const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ cz,
                  const T* __restrict__ inv_diagonal, const T* __restrict__ b,
                  const T* __restrict__ x, const T* __restrict__ xc, const T scale,
                  const T inv_theta, T* __restrict__ r, T* __restrict__ d,
                  T* __restrict__ x_out, const int nx, const int ny, const int nz,
                  const int ncx, const int ncy, const int has_x)
{
    const long long plane = (long long)nx * ny;
    const long long n = plane * nz;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(p % nx);
        const int j = (int)((p / nx) % ny);
        const int k = (int)(p / plane);
        T res = b[p];
        T x0 = 0;
        if (has_x) {
            res -= mg3_apply(cx, cy, cz, x, xc, scale, p, i, j, k, nx, ny, nz, ncx, ncy);
            x0 = mg3_value(x, xc, scale, p, i, j, k, ncx, ncy);
        }
        const T step = inv_theta * (inv_diagonal[p] * res);
        r[p] = res;
        d[p] = step;
        x_out[p] = x0 + step;
    }
}

// A later Chebyshev step: r -= A d_in, d_out = a d_in + c D^-1 r, x += d_out.
extern "C" __global__
void bf_mg3_step(const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ cz,
                 const T* __restrict__ inv_diagonal, const T* __restrict__ d_in,
                 T* __restrict__ r, T* __restrict__ x, T* __restrict__ d_out, const T a,
                 const T c, const int nx, const int ny, const int nz)
{
    const long long plane = (long long)nx * ny;
    const long long n = plane * nz;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(p % nx);
        const int j = (int)((p / nx) % ny);
        const int k = (int)(p / plane);
        const T res = r[p] - mg3_apply(cx, cy, cz, d_in, d_in, (T)0, p, i, j, k, nx, ny, nz, 0, 0);
        const T step = a * d_in[p] + c * (inv_diagonal[p] * res);
        r[p] = res;
        d_out[p] = step;
        x[p] += step;
    }
}

// bc = P^T (b - A x): the residual summed over each aggregate, one thread a coarse cell.
extern "C" __global__
void bf_mg3_residual_restrict(const T* __restrict__ cx, const T* __restrict__ cy,
                              const T* __restrict__ cz, const T* __restrict__ b,
                              const T* __restrict__ x, T* __restrict__ bc, const int nx,
                              const int ny, const int nz, const int ncx, const int ncy,
                              const int ncz)
{
    const long long cplane = (long long)ncx * ncy;
    const long long nc = cplane * ncz;
    const long long plane = (long long)nx * ny;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < nc;
         q += (long long)gridDim.x * blockDim.x) {
        const int I = (int)(q % ncx);
        const int J = (int)((q / ncx) % ncy);
        const int K = (int)(q / cplane);
        T sum = 0;
        for (int k = 2 * K; k < 2 * K + 2 && k < nz; ++k)
            for (int j = 2 * J; j < 2 * J + 2 && j < ny; ++j)
                for (int i = 2 * I; i < 2 * I + 2 && i < nx; ++i) {
                    const long long p = (long long)k * plane + (long long)j * nx + i;
                    sum += b[p] - mg3_apply(cx, cy, cz, x, x, (T)0, p, i, j, k, nx, ny, nz, 0, 0);
                }
        bc[q] = sum;
    }
}
