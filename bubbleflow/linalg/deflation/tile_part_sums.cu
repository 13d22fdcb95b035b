// Z^T r of a block deflation space (bubbleflow.linalg.deflation_cuda; twin:
// bubbleflow.linalg.deflation.tile_part_sums).  T is defined before this text.

// The sums of r over the two parts (part 0 / 1) of every BY x BX tile, one
// block per tile, in a fixed order: sums[2 * tile + part].
extern "C" __global__
void bubbleflow_tile_part_sums(const T* __restrict__ r, const signed char* __restrict__ part,
                               T* __restrict__ sums, const int nx, const int BX, const int BY)
{
    __shared__ T shm[2][32];
    const int tile = blockIdx.x, ntx = nx / BX;
    const long long i0 = (long long)(tile % ntx) * BX, j0 = (long long)(tile / ntx) * BY;
    T a[2] = {0, 0};
    for (int c = threadIdx.x; c < BX * BY; c += blockDim.x) {
        const long long q = (j0 + c / BX) * nx + i0 + c % BX;
        a[part[q] != 0 ? 1 : 0] += r[q];
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int k = 0; k < 2; ++k) {
        for (int o = 16; o > 0; o >>= 1) a[k] += __shfl_down_sync(0xffffffffu, a[k], o);
        if (lane == 0) shm[k][warp] = a[k];
    }
    __syncthreads();
    if (warp == 0) {
        for (int k = 0; k < 2; ++k) {
            T v = lane < nwarps ? shm[k][lane] : (T)0;
            for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
            if (lane == 0) sums[2 * tile + k] = v;
        }
    }
}
