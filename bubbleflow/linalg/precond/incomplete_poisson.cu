// Coefficients of the scaled incomplete Poisson preconditioner on the GPU
// (bubbleflow.linalg.precond.incomplete_poisson; twin: scaled_coefficients).
typedef double T;

// Scaled incomplete Poisson: s = 1 / sqrt(C) and the couplings scaled by the
// s of both cells, multiplied in the array code's order ((a * s_p) * s_q).
extern "C" __global__ void bf_ips_coefficients(const T* __restrict__ S, const T* __restrict__ W,
        const T* __restrict__ C, const T* __restrict__ E, const T* __restrict__ N,
        T* __restrict__ s_out, T* __restrict__ Ss, T* __restrict__ Ws, T* __restrict__ Es,
        T* __restrict__ Ns, const int nx, const int ny)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx) return;
    for (int j = blockIdx.y; j < ny; j += gridDim.y) {
        const long long p = (long long)j * nx + i;
        const T s = 1.0 / sqrt(C[p]);
        s_out[p] = s;
        T v = S[p] * s;
        if (j > 0) v *= 1.0 / sqrt(C[p - nx]);
        Ss[p] = v;
        v = W[p] * s;
        if (i > 0) v *= 1.0 / sqrt(C[p - 1]);
        Ws[p] = v;
        v = E[p] * s;
        if (i < nx - 1) v *= 1.0 / sqrt(C[p + 1]);
        Es[p] = v;
        v = N[p] * s;
        if (j < ny - 1) v *= 1.0 / sqrt(C[p + nx]);
        Ns[p] = v;
    }
}

