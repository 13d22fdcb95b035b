// The grid kernels of the fused preconditioned CG iteration in 3-D
// (bubbleflow.linalg.fused.engine3d); the scalar kernels (alpha, beta, the
// dot product, the status) are fused.cu's.  Cells (k, j, i), x fastest;
// face couplings cx (nz, ny, nx-1), cy (nz, ny-1, nx), cz (nz-1, ny, nx),
// (A v)_p = sum_f c_f (v_p - v_q).  Per-block sums in a fixed order: runs
// are reproducible bit for bit.  Offsets are 32-bit (engine3d checks the
// grid's size): 64-bit index products cost issue slots.
typedef double T;
#include "common.cuh"

#define F3_TX 32
#define F3_TY 8

// p' = y + beta p_old and w = A p', with the block's sum of p' . w.  A block
// owns an xy tile of F3_TX x F3_TY columns and a chunk of planes; a thread
// walks its column up the chunk, keeping p' below, at and above its cell in
// registers, and forms its xy neighbours' p' from y and p_old (read again
// from the cache, never from DRAM twice).
extern "C" __global__ void __launch_bounds__(F3_TX * F3_TY) bf3_direction_spmv(
    const T* __restrict__ y, const T* __restrict__ scal, const T* __restrict__ p_old,
    T* __restrict__ p_new, T* __restrict__ w, const T* __restrict__ cx,
    const T* __restrict__ cy, const T* __restrict__ cz, T* __restrict__ part_pw,
    const int nx, const int ny, const int nz, const int chunk)
{
    __shared__ T red[32];
    if (scal[4] != 0.0) return;
    const T beta = scal[1];
    const int i = blockIdx.x * F3_TX + (threadIdx.x % F3_TX);
    const int j = blockIdx.y * F3_TY + (threadIdx.x / F3_TX);
    const int z0 = blockIdx.z * chunk, z1 = min(z0 + chunk, nz);
    T acc[1] = {0.0};
    if (i < nx && j < ny && z0 < z1) {
        const int plane = nx * ny, xplane = (nx - 1) * ny, yplane = nx * (ny - 1);
        const int col = j * nx + i;
#define F3_P(q) (y[q] + beta * p_old[q])
        T below = 0.0, zlo = 0.0;
        if (z0 > 0) {
            below = F3_P((z0 - 1) * plane + col);
            zlo = cz[(z0 - 1) * plane + col];
        }
        T cur = F3_P(z0 * plane + col);
        int q = z0 * plane + col, fx = z0 * xplane + j * (nx - 1) + i, fy = z0 * yplane + col;
        for (int k = z0; k < z1; ++k, q += plane, fx += xplane, fy += yplane) {
            T above = 0.0, zhi = 0.0;
            if (k + 1 < nz) {
                above = F3_P(q + plane);
                zhi = cz[q];
            }
            T a = zlo * (cur - below) + zhi * (cur - above);
            if (i > 0)      a += cx[fx - 1] * (cur - F3_P(q - 1));
            if (i < nx - 1) a += cx[fx] * (cur - F3_P(q + 1));
            if (j > 0)      a += cy[fy - nx] * (cur - F3_P(q - nx));
            if (j < ny - 1) a += cy[fy] * (cur - F3_P(q + nx));
#undef F3_P
            p_new[q] = cur;
            w[q] = a;
            acc[0] += cur * a;
            below = cur;
            cur = above;
            zlo = zhi;
        }
    }
    block_sum<1>(acc, red);
    if (threadIdx.x == 0)
        part_pw[((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x] = acc[0];
}

// x += alpha p, r_new = r_old - alpha w, and the block's sums of r_new . y
// and r_new . r_new.  With write_y, y = s r_new (Jacobi; s NULL: y = r_new);
// else y comes later from the preconditioner's own kernels (and r . y from
// bf_dot_tiles).
extern "C" __global__ void bf3_update(const T* __restrict__ p, const T* __restrict__ w,
        const T* __restrict__ r_old, T* __restrict__ r_new, T* __restrict__ x,
        T* __restrict__ y, const T* __restrict__ s, const T* __restrict__ scal,
        T* __restrict__ part_ry, T* __restrict__ part_rr, const int n, const int write_y)
{
    __shared__ T red[32];
    if (scal[4] != 0.0) return;
    const T alpha = scal[0];
    T acc[2] = {0.0, 0.0};
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < n; q += gridDim.x * blockDim.x) {
        x[q] += alpha * p[q];
        const T rq = r_old[q] - alpha * w[q];
        r_new[q] = rq;
        if (write_y) {
            const T yq = s != NULL ? s[q] * rq : rq;
            y[q] = yq;
            acc[0] += rq * yq;
        }
        acc[1] += rq * rq;
    }
    block_sum<2>(acc, red);
    if (threadIdx.x == 0) {
        part_ry[blockIdx.x] = acc[0];
        part_rr[blockIdx.x] = acc[1];
    }
}
