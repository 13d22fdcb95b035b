// A float64 vector less its mean (mean_removal.minus_mean): per-block sums
// (the blocks striding over the vector), then every block adds the blocks'
// sums in one fixed order, divides by n and writes its share of v - mean;
// the first block writes the mean.
#include "common.cuh"

extern "C" __global__ void bf_sum64_partial(
    const T* __restrict__ v, const long long n, T* __restrict__ partial)
{
    __shared__ T shm[32];
    T s[1] = {0.0};
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        s[0] += v[i];
    block_sum<1>(s, shm);
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

extern "C" __global__ void bf_minus_mean(
    const T* __restrict__ v, const long long n, const T* __restrict__ partial,
    const int nblocks, T* __restrict__ out, T* __restrict__ mean_out)
{
    __shared__ T shm[32];
    __shared__ T mean;
    const T total = block_sum_array(partial, nblocks, shm);
    if (threadIdx.x == 0) {
        mean = total / (T)n;
        if (blockIdx.x == 0) mean_out[0] = mean;
    }
    __syncthreads();
    const T m = mean;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        out[i] = v[i] - m;
}
