// y = A x for the 7-point operator, matrix free from the face couplings
// (bubbleflow.operators.poisson; twin: apply_faces).  T is defined before
// this text.  Arrays hold the axes reversed: (nz, ny, nx), x fastest.
#include "common.cuh"

extern "C" __global__
void bubbleflow_stencil7_faces(const T* __restrict__ cx, const T* __restrict__ cy,
                               const T* __restrict__ cz, const T* __restrict__ x,
                               T* __restrict__ y, const int nx, const int ny, const int nz)
{
    // cx: (nz, ny, nx-1) on the faces normal to x; cy: (nz, ny-1, nx); cz: (nz-1, ny, nx).
    const long long plane = (long long)nx * ny;
    const long long n = plane * nz;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(p % nx);
        const int j = (int)((p / nx) % ny);
        const int k = (int)(p / plane);
        y[p] = bf_face_flux7(cx, cy, cz, x, nx, ny, nz, p, k, j, i);
    }
}

// y = A x for the 7-point operator stored as seven diagonals (Gupta 2010's
// diagonal storage; twin: apply_diagonals): B, S, W below in z, y, x; C; E, N, T above.
extern "C" __global__
void bubbleflow_stencil7_diagonals(const T* __restrict__ B, const T* __restrict__ S,
                                   const T* __restrict__ W, const T* __restrict__ C,
                                   const T* __restrict__ E, const T* __restrict__ N,
                                   const T* __restrict__ Tz, const T* __restrict__ x,
                                   T* __restrict__ y, const int nx, const int ny, const int nz)
{
    const long long plane = (long long)nx * ny;
    const long long n = plane * nz;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(p % nx);
        const int j = (int)((p / nx) % ny);
        const int k = (int)(p / plane);
        T acc = C[p] * x[p];
        if (i > 0)      acc += W[p] * x[p - 1];
        if (i < nx - 1) acc += E[p] * x[p + 1];
        if (j > 0)      acc += S[p] * x[p - nx];
        if (j < ny - 1) acc += N[p] * x[p + nx];
        if (k > 0)      acc += B[p] * x[p - plane];
        if (k < nz - 1) acc += Tz[p] * x[p + plane];
        y[p] = acc;
    }
}
