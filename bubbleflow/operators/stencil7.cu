// y = A x, or with b the residual y = b - A x in the same pass, for the
// 7-point operator (bubbleflow.operators.poisson; twins: apply_faces,
// apply_diagonals).  b NULL: the product alone.  T is defined before this
// text.  Arrays hold the axes reversed: (nz, ny, nx), x fastest.  Launched as
// BF_CELLS3 over the grid (poisson_cuda.py): no 64-bit division a cell.
#include "common.cuh"

extern "C" __global__
void bubbleflow_stencil7_faces(const T* __restrict__ cx, const T* __restrict__ cy,
                               const T* __restrict__ cz, const T* __restrict__ x,
                               const T* __restrict__ b, T* __restrict__ y, const int nx,
                               const int ny, const int nz)
{
    // cx: (nz, ny, nx-1) on the faces normal to x; cy: (nz, ny-1, nx); cz: (nz-1, ny, nx).
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long p = (long long)k * plane + (long long)j * nx + i;
        const T acc = bf_face_flux7(cx, cy, cz, x, nx, ny, nz, p, k, j, i);
        y[p] = b != nullptr ? b[p] - acc : acc;
    }
}

// The same from the seven diagonals (Gupta 2010's diagonal storage; twin:
// apply_diagonals): B, S, W below in z, y, x; C; E, N, T above.
extern "C" __global__
void bubbleflow_stencil7_diagonals(const T* __restrict__ B, const T* __restrict__ S,
                                   const T* __restrict__ W, const T* __restrict__ C,
                                   const T* __restrict__ E, const T* __restrict__ N,
                                   const T* __restrict__ Tz, const T* __restrict__ x,
                                   const T* __restrict__ b, T* __restrict__ y, const int nx,
                                   const int ny, const int nz)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long p = (long long)k * plane + (long long)j * nx + i;
        T acc = C[p] * x[p];
        if (i > 0)      acc += W[p] * x[p - 1];
        if (i < nx - 1) acc += E[p] * x[p + 1];
        if (j > 0)      acc += S[p] * x[p - nx];
        if (j < ny - 1) acc += N[p] * x[p + nx];
        if (k > 0)      acc += B[p] * x[p - plane];
        if (k < nz - 1) acc += Tz[p] * x[p + plane];
        y[p] = b != nullptr ? b[p] - acc : acc;
    }
}
