// The PLIC polygon's area in every interface cell of a 3-D grid
// (bubbleflow.flow.gas_regions.interface_measure with the level set's
// normals; twin: interface_measure_cuda.plane_areas).  "typedef double T;"
// precedes this text.  The area is the derivative of the cell's gas volume
// with respect to the plane constant, a central difference of the cut
// fraction over the step the host gives, in the array code's order of
// operations (compiled without FMA contraction): the same bits.  Cells are
// stored x fastest: p = (k * ny + j) * nx + i.
#include "common.cuh"
#include "plic.cuh"
#include "plic3.cuh"

extern "C" __global__ void bf_plane_areas3(const T* __restrict__ phi, const T* __restrict__ c,
                                           T* __restrict__ area, int nx, int ny, int nz,
                                           T hx, T hy, T hz, T step, T two_step, T volume,
                                           T lo, T hi)
{
    const long long plane = (long long)nx * ny, n = plane * nz;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const T cc = c[p];
        if (!(cc > lo && cc < hi)) {         // gas_regions.interface_mask
            area[p] = 0.0;
            continue;
        }
        const int i = (int)(p % nx), j = (int)((p / nx) % ny), k = (int)(p / plane);
        T m[3];
        vof_phi_normal3(phi, nx, ny, nz, k, j, i, hx, hy, hz, m);
        const T alpha = vof_plane_constant(m, cc, hx, hy, hz);
        const T rate = (vof_cut_fraction3(m[0], m[1], m[2], alpha + step, hx, hy, hz)
                        - vof_cut_fraction3(m[0], m[1], m[2], alpha - step, hx, hy, hz))
                       / two_step;
        area[p] = rate * volume;
    }
}
