// The float64 inner product of the Krylov loops on CuPy (reductions.DOTS):
// per-block sums of a[i] b[i] (the blocks striding over the vectors), then
// one block adds the blocks' sums, in a fixed order (the same bits from
// call to call).
#include "common.cuh"

// This block's share of sum a[i] b[i] (the blocks striding over the vectors)
// into *share, in a fixed order.
__device__ __forceinline__ void block_dot_share(const T* __restrict__ a, const T* __restrict__ b,
                                                const long long n, T* __restrict__ share, T* shm)
{
    T v[1] = {0.0};
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        v[0] += a[i] * b[i];
    block_sum<1>(v, shm);
    if (threadIdx.x == 0) *share = v[0];
}

extern "C" __global__ void bf_dot64_partial(
    const T* __restrict__ a, const T* __restrict__ b, const long long n,
    T* __restrict__ partial)
{
    __shared__ T shm[32];
    block_dot_share(a, b, n, partial + blockIdx.x, shm);
}

extern "C" __global__ void bf_dot64_final(
    const T* __restrict__ partial, const int nblocks, T* __restrict__ out)
{
    __shared__ T shm[32];
    const T s = block_sum_array(partial, nblocks, shm);
    if (threadIdx.x == 0) out[0] = s;
}

// The norms of up to four float64 vectors of one length (reductions.several_norms):
// blockIdx.y the vector, each block's sum of squares in bf_dot64_partial's order,
// then one block adds each vector's block sums in bf_dot64_final's order (the
// bits of sqrt(dot(a, a)), vector by vector) and takes the roots (roots != 0)
// or leaves the sums (the ranks add theirs first).  A vector given twice is
// read once: output k takes the partial sums of row (rows >> 2 k) & 3.
extern "C" __global__ void bf_norms64_partial(
    const T* __restrict__ a0, const T* __restrict__ a1, const T* __restrict__ a2,
    const T* __restrict__ a3, const long long n, T* __restrict__ partial)
{
    __shared__ T shm[32];
    const T* const vectors[4] = {a0, a1, a2, a3};
    const T* const a = vectors[blockIdx.y];
    block_dot_share(a, a, n, partial + (long long)blockIdx.y * gridDim.x + blockIdx.x, shm);
}

extern "C" __global__ void bf_norms64_final(
    const T* __restrict__ partial, const int nblocks, const int count, const int roots,
    const int rows, T* __restrict__ out)
{
    __shared__ T shm[32];
    block_norms(partial, nblocks, count, out, shm, roots != 0, rows);
}
