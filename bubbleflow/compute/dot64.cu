// The float64 inner product of the Krylov loops on CuPy (reductions.DOTS):
// per-block sums of a[i] b[i] (the blocks striding over the vectors), then
// one block adds the blocks' sums, in a fixed order (the same bits from
// call to call).
#include "common.cuh"

extern "C" __global__ void bf_dot64_partial(
    const T* __restrict__ a, const T* __restrict__ b, const long long n,
    T* __restrict__ partial)
{
    __shared__ T shm[32];
    T v[1] = {0.0};
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        v[0] += a[i] * b[i];
    block_sum<1>(v, shm);
    if (threadIdx.x == 0) partial[blockIdx.x] = v[0];
}

extern "C" __global__ void bf_dot64_final(
    const T* __restrict__ partial, const int nblocks, T* __restrict__ out)
{
    __shared__ T shm[32];
    const T s = block_sum_array(partial, nblocks, shm);
    if (threadIdx.x == 0) out[0] = s;
}
