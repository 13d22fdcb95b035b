// y = A x for the 5-point operator (bubbleflow.operators.poisson; twins:
// apply_diagonals, apply_faces).  T is defined before this text.
#include "common.cuh"

extern "C" __global__
void bubbleflow_stencil5_diagonals(const T* __restrict__ S, const T* __restrict__ W,
                                   const T* __restrict__ C, const T* __restrict__ E,
                                   const T* __restrict__ N, const T* __restrict__ x,
                                   T* __restrict__ y, const int nx, const int ny)
{
    const long long n = (long long)nx * ny;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(p % nx);
        const int j = (int)(p / nx);
        T acc = C[p] * x[p];
        if (i > 0)      acc += W[p] * x[p - 1];
        if (i < nx - 1) acc += E[p] * x[p + 1];
        if (j > 0)      acc += S[p] * x[p - nx];
        if (j < ny - 1) acc += N[p] * x[p + nx];
        y[p] = acc;
    }
}

extern "C" __global__
void bubbleflow_stencil5_faces(const T* __restrict__ cx, const T* __restrict__ cy,
                               const T* __restrict__ x, T* __restrict__ y,
                               const int nx, const int ny)
{
    // cx: (ny, nx-1) couplings on vertical faces; cy: (ny-1, nx) on horizontal faces.
    const long long n = (long long)nx * ny;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        y[p] = bf_face_flux(cx, cy, x, nx, ny, (int)(p / nx), (int)(p % nx));
    }
}
