// Batched inverses of SPD matrices in shared memory
// (bubbleflow.linalg.deflation.dense_inverses; twin: gauss_jordan_inverse).

extern "C" __global__ void bf_gauss_jordan(double* __restrict__ B, const int m)
{
    // One block per matrix, the matrix in shared memory; in-place Gauss-Jordan.
    extern __shared__ double a[];
    double* col = a + m * m;
    double* row = col + m;
    double* M = B + (long long)blockIdx.x * m * m;
    const int mm = m * m;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int e = threadIdx.x; e < mm; e += blockDim.x) a[e] = M[e];
    __syncthreads();
    for (int k = 0; k < m; ++k) {
        const double piv = 1.0 / a[k * m + k];
        for (int i = threadIdx.x; i < m; i += blockDim.x) {
            col[i] = a[i * m + k];
            row[i] = a[k * m + i] * piv;
        }
        __syncthreads();
        // A warp per row, its lanes along the row: no index division.
        for (int i = warp; i < m; i += nwarps) {
            const double ci = col[i];
            double* ai = a + i * m;
            for (int j = lane; j < m; j += 32) {
                double v;
                if (i == k) v = (j == k) ? piv : row[j];
                else if (j == k) v = -ci * piv;
                else v = ai[j] - ci * row[j];
                ai[j] = v;
            }
        }
        __syncthreads();
    }
    for (int e = threadIdx.x; e < mm; e += blockDim.x) M[e] = a[e];
}
