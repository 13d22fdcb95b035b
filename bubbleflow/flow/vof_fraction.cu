// The gas fraction of a level set's cells (bubbleflow.flow.vof_fraction.volume_fraction;
// twin: vof_fraction_cuda.volume_fraction).  "typedef double T;" precedes this text.
// Every formula is written in the array code's order of operations (compiled
// without FMA contraction; Python's sums start from 0, kept here as 0.0 +),
// so kernel and twin agree to the bit.  Cells are stored x fastest:
// p = (k * ny + j) * nx + i.  A thread a cell, grid-stride.
#include "common.cuh"
#include "plic.cuh"

// One cut a cell in 2-D: cell_gradient (central differences, one-sided at
// the walls), the tangent line through the cell's centre value, its fraction.
extern "C" __global__ void bf_fraction_cut2(const T* __restrict__ phi, T* __restrict__ c,
                                            int nx, int ny, T hx, T hy)
{
    const long long n = (long long)nx * ny;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(p % nx), j = (int)(p / nx);
        const T f0 = phi[p];
        const T gx = vof_gradient_1(i > 0 ? phi[p - 1] : f0, f0, i < nx - 1 ? phi[p + 1] : f0,
                                    i, nx, hx);
        const T gy = vof_gradient_1(j > 0 ? phi[p - nx] : f0, f0, j < ny - 1 ? phi[p + nx] : f0,
                                    j, ny, hy);
        const T alpha = 0.5 * ((0.0 + gx * hx) + gy * hy) - f0;
        c[p] = vof_cut_fraction(gx, gy, alpha, hx, hy);
    }
}
