// Reproducible CSR products (bubbleflow.compute.sparse).  T is defined before
// this text.

// y = A x for A in CSR, every row summed in one fixed order, so that the
// product is the same bit for bit in every run.
// One thread per row, the row's entries in order (short rows).
extern "C" __global__
void bubbleflow_csr_matvec_thread(const int* __restrict__ indptr, const int* __restrict__ indices,
                                  const T* __restrict__ data, const T* __restrict__ x,
                                  T* __restrict__ y, const long long nrows)
{
    for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < nrows;
         row += (long long)gridDim.x * blockDim.x) {
        T acc = 0;
        for (int c = indptr[row]; c < indptr[row + 1]; ++c) acc += data[c] * x[indices[c]];
        y[row] = acc;
    }
}

// One block per row (long rows): strided partial sums, then the warps' sums
// in warp order.
extern "C" __global__
void bubbleflow_csr_matvec_block(const int* __restrict__ indptr, const int* __restrict__ indices,
                                 const T* __restrict__ data, const T* __restrict__ x,
                                 T* __restrict__ y, const long long nrows)
{
    __shared__ T shm[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (long long row = blockIdx.x; row < nrows; row += gridDim.x) {
        T acc = 0;
        for (int c = indptr[row] + threadIdx.x; c < indptr[row + 1]; c += blockDim.x)
            acc += data[c] * x[indices[c]];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        __syncthreads();
        if (lane == 0) shm[warp] = acc;
        __syncthreads();
        if (warp == 0) {
            T v = lane < nwarps ? shm[lane] : (T)0;
            for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
            if (lane == 0) y[row] = v;
        }
    }
}
