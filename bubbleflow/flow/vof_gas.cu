// The gas phase's sums (bubbleflow.flow.vof_diagnostics.gas_sums; twin of
// vof_cuda.gas_sums), 2-D and 3-D.  "typedef double T;" precedes this text.
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
