// The dense coarse factorisation's element-wise steps on the GPU
// (bubbleflow.linalg.deflation.dense_inverses; twin: the array code of
// dense_pseudo_inverse and spd_inverse).  Each kernel does in one pass
// what the array code does in several, with the same double operations in
// the same order (compiled without FMA contraction): the results are equal
// bit for bit.
typedef double T;

// D[r, c] = E[r, c] for r, c < n (D zeroed before): the leading block of E
// (CSR, no duplicate entries) as a dense matrix.  A thread per row.
extern "C" __global__ void bf_coarse_scatter(const int* __restrict__ indptr,
        const int* __restrict__ indices, const T* __restrict__ data, const int n,
        T* __restrict__ D)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (int q = indptr[r]; q < indptr[r + 1]; ++q) {
        const int c = indices[q];
        if (c < n) D[(long long)r * n + c] = data[q];
    }
}

// out[i + j n] = (D[i, j] + D[j, i]) * 0.5: the symmetric part (M + M^T) / 2,
// written column-major (it is symmetric: the same bits either way).
extern "C" __global__ void bf_coarse_symmetric(const T* __restrict__ D, const int n,
        T* __restrict__ out)
{
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= (long long)n * n) return;
    const long long i = q % n, j = q / n;
    out[q] = (D[i * n + j] + D[j * n + i]) * 0.5;
}

// The symmetrised inverse from cuSOLVER's column-major X (n x n), row-major
// into K (kk x kk, kk >= n): K[i, j] = (X[i, j] + X[j, i]) * 0.5 for i, j < n,
// 0 elsewhere (the grounded row and column); flag[0] = 1 where an entry of
// the inverse is not finite.
extern "C" __global__ void bf_coarse_inverse(const T* __restrict__ X, const int n, const int kk,
        T* __restrict__ K, int* __restrict__ flag)
{
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= (long long)kk * kk) return;
    const long long i = q / kk, j = q % kk;
    T v = 0.0;
    if (i < n && j < n) {
        v = (X[i + j * n] + X[j + i * n]) * 0.5;
        if (!isfinite(v)) flag[0] = 1;
    }
    K[q] = v;
}

// K = P K P (K symmetric, P = I - 1 1^T / k) as the array code forms it:
// t = ((K[i, j] - c[i]) - c[j]) + cm with c the row means and cm their mean,
// then (t[i, j] + t[j, i]) * 0.5.  In place: a thread per pair i <= j.
extern "C" __global__ void bf_coarse_project(T* __restrict__ K, const T* __restrict__ c,
        const T* __restrict__ cm, const int k)
{
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= (long long)k * k) return;
    const long long i = q / k, j = q % k;
    if (i > j) return;
    const T m = cm[0];
    const T tij = ((K[i * k + j] - c[i]) - c[j]) + m;
    const T tji = ((K[j * k + i] - c[j]) - c[i]) + m;
    const T v = (tij + tji) * 0.5;
    K[i * k + j] = v;
    K[j * k + i] = v;
}
