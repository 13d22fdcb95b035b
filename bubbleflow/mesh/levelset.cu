// The level set of a case's free surface, bubbles and droplets
// (bubbleflow.mesh.levelset._build; twin: levelset_cuda.build).  "typedef
// double T;" precedes this text.  The array code's passes, one shape at a
// time over the whole grid, are one pass here, the shapes in a loop: min
// and max do not depend on the order, and every distance is the array
// code's expression (hypot in 2-D; the squares summed from 0 and their root
// in 3-D, without FMA contraction), so kernel and twin agree to the bit.
// shapes: a row (x, y[, z], r) a shape, the gas bubbles' first; level: the
// free surface's height, or the value of a grid without one (surface 0).
// Cells are stored x fastest: p = (k * ny + j) * nx + i.
#include "common.cuh"

extern "C" __global__ void bf_levelset_shapes2(T* __restrict__ phi, const T* __restrict__ xs,
                                               const T* __restrict__ ys, int nx, int ny,
                                               const T* __restrict__ shapes, int bubbles,
                                               int droplets, int surface, T level)
{
    const long long n = (long long)nx * ny;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const T x = xs[p % nx], y = ys[p / nx];
        T v = surface ? level - y : level;
        for (int s = 0; s < bubbles; ++s) {
            const T* c = shapes + 3 * s;
            v = np_min(v, hypot(x - c[0], y - c[1]) - c[2]);
        }
        for (int s = bubbles; s < bubbles + droplets; ++s) {
            const T* c = shapes + 3 * s;
            v = np_max(v, c[2] - hypot(x - c[0], y - c[1]));
        }
        phi[p] = v;
    }
}

// |x - c| of a sphere: sqrt(((0 + dx^2) + dy^2) + dz^2), as Python's sum of squares.
__device__ __forceinline__ T ls_distance3(T x, T y, T z, const T* c)
{
    const T dx = x - c[0], dy = y - c[1], dz = z - c[2];
    return sqrt(((0.0 + dx * dx) + dy * dy) + dz * dz);
}

extern "C" __global__ void bf_levelset_shapes3(T* __restrict__ phi, const T* __restrict__ xs,
                                               const T* __restrict__ ys,
                                               const T* __restrict__ zs, int nx, int ny, int nz,
                                               const T* __restrict__ shapes, int bubbles,
                                               int droplets, int surface, T level)
{
    const long long plane = (long long)nx * ny, n = plane * nz;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const T x = xs[p % nx], y = ys[(p / nx) % ny], z = zs[p / plane];
        T v = surface ? level - z : level;
        for (int s = 0; s < bubbles; ++s) {
            const T* c = shapes + 4 * s;
            v = np_min(v, ls_distance3(x, y, z, c) - c[3]);
        }
        for (int s = bubbles; s < bubbles + droplets; ++s) {
            const T* c = shapes + 4 * s;
            v = np_max(v, c[3] - ls_distance3(x, y, z, c));
        }
        phi[p] = v;
    }
}
