// The condensed coarse solve E^+ s on the GPU
// (bubbleflow.linalg.deflation.condensed_kernels, class RawCondensedSolve;
// twin: CoarseSolver._solve_condensed).
typedef double T;
#include "common.cuh"

// Sum over the block (fixed order), returned to every thread.
__device__ __forceinline__ T cs_block_sum(T v, T* shm) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) shm[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T u = lane < nwarps ? shm[lane] : 0.0;
        u = warp_sum(u);
        if (lane == 0) shm[32] = u;
    }
    __syncthreads();
    return shm[32];
}

// mean[0] = sum(s) / k: one block.
extern "C" __global__ void bf_cs_mean(const T* __restrict__ s, const int k, T* __restrict__ mean)
{
    __shared__ T shm[33];
    T v = 0.0;
    for (int i = threadIdx.x; i < k; i += blockDim.x) v += s[i];
    v = cs_block_sum(v, shm);
    if (threadIdx.x == 0) mean[0] = v / k;
}

// t_g = Binv_g (s[take_in] - mean) for the interior of group g: blocks
// (g, row chunk) of 32 warps, a warp per row (latency, not bandwidth, rules
// these small products: every warp has one row, its loads all in flight);
// the group's right-hand side in shared memory.
extern "C" __global__ void bf_cs_block(const T* __restrict__ s, const int* __restrict__ take_in,
        const T* __restrict__ mean, const T* __restrict__ Binv, T* __restrict__ t, const int m)
{
    extern __shared__ T v[];
    const int g = blockIdx.x;
    const T mu = mean != NULL ? mean[0] : 0.0;
    for (int i = threadIdx.x; i < m; i += blockDim.x) v[i] = s[take_in[g * m + i]] - mu;
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int i = blockIdx.y * nwarps + warp;
    if (i >= m) return;
    const T* B = Binv + ((long long)g * m + i) * m;
    T acc = 0.0;
    for (int j = lane; j < m; j += 32) acc += B[j] * v[j];
    acc = warp_sum(acc);
    if (lane == 0) t[g * m + i] = acc;
}

// y_S = Sinv (s_S - mean - M_SI t): every block forms the separator's
// right-hand side in shared memory (M_SI in CSR, a thread per row), then a
// warp per row of Sinv.
extern "C" __global__ void bf_cs_separator(const T* __restrict__ s, const int* __restrict__ take_in,
        const T* __restrict__ mean, const int GbM, const int nS,
        const int* __restrict__ indptr, const int* __restrict__ indices,
        const T* __restrict__ data, const T* __restrict__ t, const T* __restrict__ Sinv,
        T* __restrict__ yS)
{
    extern __shared__ T gS[];
    const T mu = mean != NULL ? mean[0] : 0.0;
    for (int j = threadIdx.x; j < nS; j += blockDim.x) {
        T acc = 0.0;
        for (int c = indptr[j]; c < indptr[j + 1]; ++c) acc += data[c] * t[indices[c]];
        gS[j] = (s[take_in[GbM + j]] - mu) - acc;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int r = blockIdx.x * nwarps + warp;
    if (r >= nS) return;
    T acc = 0.0;
    for (int j = lane; j < nS; j += 32) acc += Sinv[(long long)r * nS + j] * gS[j];
    acc = warp_sum(acc);
    if (lane == 0) yS[r] = acc;
}

// t -= F y_S[sidx] on the interior of group g: blocks (g, row chunk), a warp per row.
extern "C" __global__ void bf_cs_back(T* __restrict__ t, const T* __restrict__ F,
        const T* __restrict__ yS, const int* __restrict__ sidx, const int m, const int smax)
{
    const int g = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int i = blockIdx.y * nwarps + warp;
    if (i >= m) return;
    const T* f = F + ((long long)g * m + i) * smax;
    const int* sg = sidx + (long long)g * smax;
    T acc = 0.0;
    for (int c = lane; c < smax; c += 32) acc += f[c] * yS[sg[c]];
    acc = warp_sum(acc);
    if (lane == 0) t[g * m + i] -= acc;
}

// y = (t | y_S | 0)[take_out], minus its mean when E is singular: one block.
extern "C" __global__ void bf_cs_out(const T* __restrict__ t, const T* __restrict__ yS,
        const int* __restrict__ take_out, const int k, const int GbM, const int nS,
        const int singular, T* __restrict__ y)
{
    __shared__ T shm[33];
    T acc = 0.0;
    for (int c = threadIdx.x; c < k; c += blockDim.x) {
        const int o = take_out[c];
        const T v = o < GbM ? t[o] : (o < GbM + nS ? yS[o - GbM] : 0.0);
        y[c] = v;
        acc += v;
    }
    if (!singular) return;
    const T mu = cs_block_sum(acc, shm) / k;
    for (int c = threadIdx.x; c < k; c += blockDim.x) y[c] -= mu;
}
