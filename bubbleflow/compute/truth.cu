// Whole-array truth tests (truth.py): each thread reads a stretch of the
// array; only a thread that finds the answer writes the flag, then stops.
extern "C" __global__ void bf_flag_non_finite(const double* __restrict__ a, long long n,
                                              bool* __restrict__ all_finite)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        if (!isfinite(a[i])) { *all_finite = false; return; }
}

extern "C" __global__ void bf_flag_true(const bool* __restrict__ a, long long n,
                                        bool* __restrict__ any_true)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        if (a[i]) { *any_true = true; return; }
}
