// y = A x, or with b the residual y = b - A x in the same pass, for the
// 5-point operator (bubbleflow.operators.poisson; twins: apply_diagonals,
// apply_faces).  b NULL: the product alone.  T is defined before this text.
// Launched as BF_CELLS over the grid (poisson_cuda.py): no division a cell.
#include "common.cuh"

extern "C" __global__
void bubbleflow_stencil5_diagonals(const T* __restrict__ S, const T* __restrict__ W,
                                   const T* __restrict__ C, const T* __restrict__ E,
                                   const T* __restrict__ N, const T* __restrict__ x,
                                   const T* __restrict__ b, T* __restrict__ y, const int nx,
                                   const int ny)
{
    BF_CELLS(nx, ny) {
        const long long p = (long long)j * nx + i;
        T acc = C[p] * x[p];
        if (i > 0)      acc += W[p] * x[p - 1];
        if (i < nx - 1) acc += E[p] * x[p + 1];
        if (j > 0)      acc += S[p] * x[p - nx];
        if (j < ny - 1) acc += N[p] * x[p + nx];
        y[p] = b != nullptr ? b[p] - acc : acc;
    }
}

extern "C" __global__
void bubbleflow_stencil5_faces(const T* __restrict__ cx, const T* __restrict__ cy,
                               const T* __restrict__ x, const T* __restrict__ b,
                               T* __restrict__ y, const int nx, const int ny)
{
    // cx: (ny, nx-1) couplings on vertical faces; cy: (ny-1, nx) on horizontal faces.
    BF_CELLS(nx, ny) {
        const long long p = (long long)j * nx + i;
        const T acc = bf_face_flux(cx, cy, x, nx, ny, j, i);
        y[p] = b != nullptr ? b[p] - acc : acc;
    }
}
