// The gas phase's sums (bubbleflow.flow.vof_diagnostics.gas_sums; twin of
// vof_cuda.gas_sums) and its regions' (gas_regions.region_moments; twin of
// vof_cuda.region_moments), 2-D and 3-D.  "typedef double T;" precedes this text.
// A source of its own: a run's first sums need not wait for the sweeps'
// longer compile.
#include "common.cuh"

// ---------------------------------------------------------------------------
// vof_diagnostics.gas_sums on nz planes of ny x nx cells (nz = 1 in 2-D),
// the first of array axis 0 the grid's plane plane0 (a rank's slab):
// per block, [sum c, sum c x, sum c y, sum c z, sum c w_c] in 3-D and
// [sum c, sum c x, sum c y, sum c w_c] in 2-D (w the vertical face
// velocity, w_c the mean of a cell's two faces), then bf_vof_gas_final.
// ---------------------------------------------------------------------------
#define BF_GAS_NQ 5

extern "C" __global__ void bf_vof_gas_partial(
    const T* __restrict__ c, const T* __restrict__ w, T* __restrict__ partial, const int nx,
    const int ny, const int nz, const T hx, const T hy, const T hz, const int three_d,
    const int plane0)
{
    __shared__ T shm[32];
    T acc[BF_GAS_NQ] = {0.0, 0.0, 0.0, 0.0, 0.0};
    const long long plane = (long long)nx * ny;
    const long long n = plane * nz;
    const long long up = three_d ? plane : (long long)nx;     // the face above a cell
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    BfCellWalk at(first, stride, nx, ny);
    for (long long p = first; p < n; p += stride, at.next()) {
        const int k = at.k, j = at.j, i = at.i;
        const T q = c[p];
        acc[0] += q;
        acc[1] += q * (((T)i + 0.5) * hx);
        acc[2] += q * (((T)(three_d ? j : plane0 + j) + 0.5) * hy);
        const T moment = q * (0.5 * (w[p] + w[p + up]));
        if (three_d) {
            acc[3] += q * (((T)(plane0 + k) + 0.5) * hz);
            acc[4] += moment;
        } else {
            acc[3] += moment;
        }
    }
    block_sum<BF_GAS_NQ>(acc, shm);
    if (threadIdx.x == 0)
        for (int m = 0; m < BF_GAS_NQ; ++m) partial[(long long)m * gridDim.x + blockIdx.x] = acc[m];
}

// The sums from the per-block ones (one block): out[m] for m < count.
extern "C" __global__ void bf_vof_gas_final(const T* __restrict__ partial, const int nblocks,
                                            const int count, T* __restrict__ out)
{
    __shared__ T shm[32];
    for (int m = 0; m < count; ++m) {
        const T s = block_sum_array(partial + (long long)m * nblocks, nblocks, shm);
        if (threadIdx.x == 0) out[m] = s;
    }
}

// ---------------------------------------------------------------------------
// gas_regions.region_moments on the whole grid of nz planes of ny x nx cells
// (nz = 1 in 2-D): per block and region l < nreg (at most BF_RM_REGIONS),
// the region's [sum c, sum c x, sum c y(, sum c z), sum c u_c, sum c v_c(,
// sum c w_c), sum of the interface measure, core cells of the top plane]
// (u_c the mean of a cell's two faces of u, ...), the region of a cell its
// owner (single: every cell region 1); quantity m of region l into
// partial[(m * nreg + l) * nblocks + block], then bf_vof_gas_final.
// ---------------------------------------------------------------------------
#define BF_RM_REGIONS 4
#define BF_RM_NQ 9

extern "C" __global__ void bf_region_moments_partial(
    const int* __restrict__ owner, const int* __restrict__ labels, const T* __restrict__ c,
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    const T* __restrict__ measure, T* __restrict__ partial, const int nx, const int ny,
    const int nz, const T hx, const T hy, const T hz, const int three_d, const int single,
    const int nreg)
{
    __shared__ T shm[32];
    T acc[BF_RM_REGIONS * BF_RM_NQ];
#pragma unroll
    for (int m = 0; m < BF_RM_REGIONS * BF_RM_NQ; ++m) acc[m] = 0.0;
    const long long plane = (long long)nx * ny;
    const long long n = plane * nz;
    const long long top = n - (three_d ? plane : (long long)nx);   // the top plane's first cell
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    BfCellWalk at(first, stride, nx, ny);
    for (long long p = first; p < n; p += stride, at.next()) {
        const int region = single ? 1 : owner[p];
        if (region < 1 || region > nreg) continue;
        const int k = at.k, j = at.j, i = at.i;
        const T q = c[p];
        const T core_top = (p >= top && labels[p] > 0) ? 1.0 : 0.0;
        T val[BF_RM_NQ];
        val[0] = q;
        val[1] = q * (((T)i + 0.5) * hx);
        if (three_d) {
            // u (nz, ny, nx + 1), v (nz, ny + 1, nx), w (nz + 1, ny, nx)
            const long long pu = p + (long long)k * ny + j, pv = p + (long long)k * nx;
            val[2] = q * (((T)j + 0.5) * hy);
            val[3] = q * (((T)k + 0.5) * hz);
            val[4] = q * (0.5 * (u[pu] + u[pu + 1]));
            val[5] = q * (0.5 * (v[pv] + v[pv + nx]));
            val[6] = q * (0.5 * (w[p] + w[p + plane]));
            val[7] = measure[p];
            val[8] = core_top;
        } else {
            // u (ny, nx + 1), v (ny + 1, nx)
            const long long pu = p + j;
            val[2] = q * (((T)j + 0.5) * hy);
            val[3] = q * (0.5 * (u[pu] + u[pu + 1]));
            val[4] = q * (0.5 * (v[p] + v[p + nx]));
            val[5] = measure[p];
            val[6] = core_top;
            val[7] = 0.0;
            val[8] = 0.0;
        }
#pragma unroll
        for (int l = 0; l < BF_RM_REGIONS; ++l)
            if (region == l + 1) {
#pragma unroll
                for (int m = 0; m < BF_RM_NQ; ++m) acc[l * BF_RM_NQ + m] += val[m];
            }
    }
    block_sum<BF_RM_REGIONS * BF_RM_NQ>(acc, shm);
    const int nq = three_d ? 9 : 7;
    if (threadIdx.x == 0)
        for (int l = 0; l < nreg; ++l)
            for (int m = 0; m < nq; ++m)
                partial[((long long)m * nreg + l) * gridDim.x + blockIdx.x] = acc[l * BF_RM_NQ + m];
}
