// The kernels of the fused preconditioned CG iteration on one rank's slab
// (bubbleflow.linalg.fused.ranks).  The slab's cells are NLOC planes of P
// cells (array axis 0 the slowest, the axis the ranks share); the direction
// p is kept with a halo plane on each side (p_ext: NLOC + 2 planes, the
// neighbours' planes received into planes 0 and NLOC + 1, zeros at a wall).
// Face couplings: cs (NLOC + 1, P) between p_ext's planes k and k + 1 (zero
// towards a wall), cx (NLOC, ..., NX - 1) along x and, in 3-D, cy (NLOC,
// NY - 1, NX) along y; (A v)_c = sum_f c_f (v_c - v_q).
//
// Scalars (one float64 array, indices below) and sums: every kernel writes
// one partial sum a block, in a fixed order; the kernel's last block to
// finish (a counter, the CUDA samples' threadfence reduction) adds the
// partials in index order into a rank-local slot, which an all-reduce over
// the ranks (NCCL, between the kernels) sums into the global slot the next
// kernel reads: runs repeat bit for bit.  Once DONE is set every kernel
// returns at once (the iterations left in a graph are no-ops).  32-bit
// offsets: the engine checks the slab's size.
typedef double T;
#include "common.cuh"

#define S_BETA 1
#define S_RZ 2
#define S_BAD 3
#define S_DONE 4
#define S_INV_BNORM 5
#define S_TOL_REL 6
#define S_PW_LOCAL 7
#define S_PW 8
#define S_RR_LOCAL 9     // and S_RY_LOCAL = 10: reduced together
#define S_RR 11          // and S_RY = 12
#define S_RY 12

// The last block of a kernel to finish (true in every thread of that block),
// after every other block has written its partial and read the scalars.
__device__ __forceinline__ bool last_block(unsigned* counter) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x - 1;
    __syncthreads();
    return last;
}

// The blocks' sums of r . r and r . y (acc) into part, then the last block
// adds them in block order into scal[S_RR_LOCAL], scal[S_RY_LOCAL] (and
// records ``bad`` as a breakdown).
__device__ __forceinline__ void rr_ry_sums(T acc[2], T* shm, T* __restrict__ part,
        unsigned* counter, T* scal, const int nparts, const bool bad)
{
    block_sum<2>(acc, shm);
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = acc[0];
        part[2 * blockIdx.x + 1] = acc[1];
    }
    if (last_block(counter)) {
        T v[2] = {0.0, 0.0};
        for (int b = threadIdx.x; b < nparts; b += blockDim.x) {
            v[0] += part[2 * b];
            v[1] += part[2 * b + 1];
        }
        block_sum<2>(v, shm);
        if (threadIdx.x == 0) {
            scal[S_RR_LOCAL] = v[0];
            scal[S_RR_LOCAL + 1] = v[1];
            if (bad) scal[S_BAD] = 1.0;
            *counter = 0;
        }
    }
}

// w = A p on the local planes [a0, a1) and [b0, b1), and the block's sum of
// p . w into part[part0 + block]; with ``finish`` the last block adds
// part[0 .. nparts) into scal[S_PW_LOCAL] (the interior's launch ran first,
// on the same stream: its partials are there).
extern "C" __global__ void rk_spmv(const T* __restrict__ p_ext, const T* __restrict__ cs,
        const T* __restrict__ cx, const T* __restrict__ cy, T* __restrict__ w,
        T* __restrict__ part, unsigned* counter, T* scal, const int nx, const int ny,
        const int a0, const int a1, const int b0, const int b1, const int part0,
        const int finish, const int nparts)
{
    __shared__ T shm[32];
    if (scal[S_DONE] != 0.0) return;
    const unsigned P = (unsigned)nx * ny;
    const unsigned na = (unsigned)(a1 - a0) * P, n = na + (unsigned)(b1 - b0) * P;
    T acc[1] = {0.0};
    for (unsigned t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x) {
        const unsigned c = t < na ? a0 * P + t : b0 * P + (t - na);   // local cell
        const unsigned k = c / P, q = c - k * P;
        const unsigned e = c + P;                                       // in p_ext
        const T v = p_ext[e];
        T y = cs[c] * (v - p_ext[e - P]) + cs[c + P] * (v - p_ext[e + P]);
#if NDIM == 2
        const unsigned i = q;
        const unsigned fx = k * (nx - 1) + i;
        if (i > 0)      y += cx[fx - 1] * (v - p_ext[e - 1]);
        if (i < nx - 1) y += cx[fx] * (v - p_ext[e + 1]);
#else
        const unsigned j = q / nx, i = q - j * nx;
        const unsigned fx = (k * ny + j) * (nx - 1) + i;
        if (i > 0)      y += cx[fx - 1] * (v - p_ext[e - 1]);
        if (i < nx - 1) y += cx[fx] * (v - p_ext[e + 1]);
        const unsigned fy = k * (ny - 1) * nx + j * nx + i;
        if (j > 0)      y += cy[fy - nx] * (v - p_ext[e - nx]);
        if (j < ny - 1) y += cy[fy] * (v - p_ext[e + nx]);
#endif
        w[c] = y;
        acc[0] += v * y;
    }
    block_sum<1>(acc, shm);
    if (threadIdx.x == 0) part[part0 + blockIdx.x] = acc[0];
    if (!finish) return;
    if (last_block(counter)) {
        const T s = block_sum_array(part, nparts, shm);
        if (threadIdx.x == 0) {
            scal[S_PW_LOCAL] = s;
            *counter = 0;
        }
    }
}

// alpha = rz / (p . w) (0 once broken down), x += alpha p, r -= alpha w,
// y = D^-1 r (JACOBI; else y = r), the blocks' sums of r . r and r . y; the
// last block adds them into scal[S_RR_LOCAL], scal[S_RY_LOCAL] and records a
// zero or non-finite p . w as a breakdown.  GENERIC: y is the
// preconditioner's, applied after this kernel: r . y is rk_ry's (0 here).
extern "C" __global__ void rk_update(T* __restrict__ x, const T* __restrict__ p,
        T* __restrict__ r, const T* __restrict__ w, const T* __restrict__ dinv,
        T* __restrict__ part, unsigned* counter, T* scal, const unsigned n, const int nparts)
{
    __shared__ T shm[32];
    if (scal[S_DONE] != 0.0) return;
    const T pw = scal[S_PW];
    const bool bad = scal[S_BAD] != 0.0 || !(isfinite(pw) && pw != 0.0);
    const T alpha = bad ? 0.0 : scal[S_RZ] / pw;
    T acc[2] = {0.0, 0.0};
    for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        x[c] += alpha * p[c];
        const T rc = r[c] - alpha * w[c];
        r[c] = rc;
        acc[0] += rc * rc;
#if defined(JACOBI)
        acc[1] += rc * (dinv[c] * rc);
#elif !defined(GENERIC)
        acc[1] += rc * rc;
#endif
    }
    rr_ry_sums(acc, shm, part, counter, scal, nparts, bad);
}
// GENERIC: r . y (y the preconditioner's result, in ``y``), the blocks' sums
// and the last block's into scal[S_RY_LOCAL].
extern "C" __global__ void rk_ry(const T* __restrict__ r, const T* __restrict__ y,
        T* __restrict__ part, unsigned* counter, T* scal, const unsigned n, const int nparts)
{
    __shared__ T shm[32];
    if (scal[S_DONE] != 0.0) return;
    T acc[1] = {0.0};
    for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x)
        acc[0] += r[c] * y[c];
    block_sum<1>(acc, shm);
    if (threadIdx.x == 0) part[blockIdx.x] = acc[0];
    if (last_block(counter)) {
        const T v = block_sum_array(part, nparts, shm);
        if (threadIdx.x == 0) {
            scal[S_RR_LOCAL + 1] = v;
            *counter = 0;
        }
    }
}

// beta = r.y_new / r.y (0 once broken down), p = y + beta p (y = D^-1 r,
// r, or GENERIC the preconditioner's, passed as ``dinv``); the last
// block moves the scalars on: rz, the iteration counter, the relative
// recursive residual into hist, DONE at the tolerance.  ``start``: the
// first direction (beta = 0, no iteration counted).
extern "C" __global__ void rk_direction(T* __restrict__ p, const T* __restrict__ r,
        const T* __restrict__ dinv, unsigned* counter, int* it, T* scal, T* hist,
        const unsigned n, const int start)
{
    if (scal[S_DONE] != 0.0) return;
    const T ry = scal[S_RY];
    const bool bad = scal[S_BAD] != 0.0 || !isfinite(ry);
    const T beta = (bad || start) ? 0.0 : ry / scal[S_RZ];
    for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
#if defined(JACOBI)
        const T yc = dinv[c] * r[c];
#elif defined(GENERIC)
        const T yc = dinv[c];
#else
        const T yc = r[c];
#endif
        p[c] = yc + beta * p[c];
    }
    if (last_block(counter)) {
        if (threadIdx.x == 0) {
            scal[S_BAD] = bad ? 1.0 : 0.0;
            scal[S_BETA] = beta;
            scal[S_RZ] = ry;
            if (!start) {
                const int k = it[0] + 1;
                it[0] = k;
                const T h = sqrt(scal[S_RR]) * scal[S_INV_BNORM];
                hist[k] = h;
                if (h <= scal[S_TOL_REL]) scal[S_DONE] = 1.0;
            }
            *counter = 0;
        }
    }
}

// r . y of the start (y = D^-1 r, r, or GENERIC the preconditioner's in
// ``dinv``), the blocks' sums and the last block's into scal[S_RY_LOCAL]
// (and r . r into scal[S_RR_LOCAL]).
extern "C" __global__ void rk_start(const T* __restrict__ r, const T* __restrict__ dinv,
        T* __restrict__ part, unsigned* counter, T* scal, const unsigned n, const int nparts)
{
    __shared__ T shm[32];
    T acc[2] = {0.0, 0.0};
    for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        const T rc = r[c];
#if defined(JACOBI)
        const T yc = dinv[c] * rc;
#elif defined(GENERIC)
        const T yc = dinv[c];
#else
        const T yc = rc;
#endif
        acc[0] += rc * rc;
        acc[1] += rc * yc;
    }
    rr_ry_sums(acc, shm, part, counter, scal, nparts, false);
}

// (iteration, hist[iteration], breakdown flag): the host check's one transfer.
extern "C" __global__ void rk_status(const int* __restrict__ it, const T* __restrict__ hist,
        const T* __restrict__ scal, T* __restrict__ out)
{
    out[0] = (T)it[0];
    out[1] = hist[it[0]];
    out[2] = scal[S_BAD];
}
