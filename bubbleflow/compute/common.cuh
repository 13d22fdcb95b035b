// Helpers shared by the CUDA sources of bubbleflow (included once by
// bubbleflow.compute.cuda.source).  The includer defines the value type T
// first (typedef double T;).  Every sum runs in a fixed order: results do not
// depend on scheduling.
#ifndef BUBBLEFLOW_COMMON_CUH
#define BUBBLEFLOW_COMMON_CUH

// Every cell (j, i) of an NY x NX grid, by a 2-D grid-stride loop (any launch
// shape covers the grid).
#define BF_CELLS(NX, NY)                                                                   \
    for (int j = blockIdx.y * blockDim.y + threadIdx.y; j < (NY); j += gridDim.y * blockDim.y) \
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (NX); i += gridDim.x * blockDim.x)

// Every cell (k, j, i) of an NZ x NY x NX grid: BF_CELLS over its NY * NZ rows
// (launched as a 2-D grid over NX by NY * NZ points).
#define BF_CELLS3(NX, NY, NZ)                                                              \
    for (int r_ = blockIdx.y * blockDim.y + threadIdx.y; r_ < (NY) * (NZ);                 \
         r_ += gridDim.y * blockDim.y)                                                     \
        for (int k = r_ / (NY), j = r_ - k * (NY), i = blockIdx.x * blockDim.x + threadIdx.x; \
             i < (NX); i += gridDim.x * blockDim.x)

// Every cell (k, j, i) of an NZ x NY x NX grid in runs of planes: z block ZB
// of NZB takes consecutive planes, BF_CELLS over each (launched as
// cuda.grid_3d's 3-D grid).  For kernels that read many neighbours and hold
// many registers: the plane a thread read for one cell's neighbours is in L1
// for its next, and its set-up (the launch's scalars, the strides) is paid
// once a run.  Light kernels run slower so (docs/performance_records.md).
#define BF_CELLS3_RUNS_IN(NX, NY, NZ, ZB, NZB)                                             \
    for (int kn_ = ((NZ) + (NZB) - 1) / (NZB), k = (ZB) * kn_, ke_ = min(k + kn_, (NZ));   \
         k < ke_; ++k)                                                                     \
        BF_CELLS(NX, NY)

// BF_CELLS3_RUNS_IN with the launch's z blocks.
#define BF_CELLS3_RUNS(NX, NY, NZ) BF_CELLS3_RUNS_IN(NX, NY, NZ, blockIdx.z, gridDim.z)

// The least and greatest (i, j, k) of a block's threads' lo and hi folded
// into box (imin, jmin, kmin, imax, jmax, kmax) by atomics, one set a block.
// Every thread of the block calls it; a block is whole warps.
__device__ __forceinline__ void bf_box_fold(const int lo[3], const int hi[3],
                                            int* __restrict__ box)
{
    __shared__ int part[32][6];
    const int lane = (threadIdx.y * blockDim.x + threadIdx.x) & 31;
    const int warp = (threadIdx.y * blockDim.x + threadIdx.x) >> 5;
    const int warps = (blockDim.x * blockDim.y + 31) >> 5;
    int v[6];
    for (int a = 0; a < 3; ++a) {
        v[a] = __reduce_min_sync(0xffffffffu, lo[a]);
        v[3 + a] = __reduce_max_sync(0xffffffffu, hi[a]);
    }
    if (lane == 0)
        for (int a = 0; a < 6; ++a) part[warp][a] = v[a];
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        for (int w = 1; w < warps; ++w)
            for (int a = 0; a < 3; ++a) {
                v[a] = min(v[a], part[w][a]);
                v[3 + a] = max(v[3 + a], part[w][3 + a]);
            }
        if (v[3] >= 0)
            for (int a = 0; a < 3; ++a) {
                atomicMin(box + a, v[a]);
                atomicMax(box + 3 + a, v[3 + a]);
            }
    }
}

// CALL(0), CALL(1) or CALL(2) by the run-time grid axis (0, 1, else 2): a
// kernel whose body is a template on its axis, compiled once per axis.
#define BF_BY_AXIS(AXIS, CALL)                                                            \
    do {                                                                                  \
        if ((AXIS) == 0) CALL(0);                                                         \
        else if ((AXIS) == 1) CALL(1);                                                    \
        else CALL(2);                                                                     \
    } while (0)

// (A x) at cell (j, i) for the flux form of the 5-point operator: the sum over
// the cell's faces of c (x_p - x_q), with face couplings cx (ny, nx - 1)
// between (j, i) and (j, i + 1) and cy (ny - 1, nx) between (j, i) and
// (j + 1, i); cells in rows of nx (operators.poisson.apply_faces's twin).
__device__ __forceinline__ T bf_face_flux(const T* __restrict__ cx, const T* __restrict__ cy,
                                          const T* __restrict__ x, int nx, int ny, int j, int i)
{
    const long long p = (long long)j * nx + i;
    const T xp = x[p];
    T y = 0;
    if (i > 0)      y += cx[(long long)j * (nx - 1) + i - 1] * (xp - x[p - 1]);
    if (i < nx - 1) y += cx[(long long)j * (nx - 1) + i] * (xp - x[p + 1]);
    if (j > 0)      y += cy[(long long)(j - 1) * nx + i] * (xp - x[p - nx]);
    if (j < ny - 1) y += cy[(long long)j * nx + i] * (xp - x[p + nx]);
    return y;
}

// (A x) at cell p = (k, j, i) of an NZ x NY x NX grid for the flux form of
// the 7-point operator, as bf_face_flux with cz (nz - 1, ny, nx) between
// (k, j, i) and (k + 1, j, i) (operators.poisson.apply_faces's twin).
__device__ __forceinline__ T bf_face_flux7(const T* __restrict__ cx, const T* __restrict__ cy,
                                           const T* __restrict__ cz, const T* __restrict__ x,
                                           int nx, int ny, int nz, long long p, int k, int j,
                                           int i)
{
    const long long plane = (long long)nx * ny;
    const T xp = x[p];
    T y = 0;
    const long long fx = ((long long)k * ny + j) * (nx - 1) + i;
    if (i > 0)      y += cx[fx - 1] * (xp - x[p - 1]);
    if (i < nx - 1) y += cx[fx] * (xp - x[p + 1]);
    const long long fy = (long long)k * (ny - 1) * nx + (long long)j * nx + i;
    if (j > 0)      y += cy[fy - nx] * (xp - x[p - nx]);
    if (j < ny - 1) y += cy[fy] * (xp - x[p + nx]);
    if (k > 0)      y += cz[p - plane] * (xp - x[p - plane]);
    if (k < nz - 1) y += cz[p] * (xp - x[p + plane]);
    return y;
}

// Sum of v over the warp (shuffles down): valid in lane 0.
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// Sum of v over the thread block, fixed order; valid in thread 0.
template <int NV>
__device__ __forceinline__ void block_sum(T* v, T* shm) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    for (int k = 0; k < NV; ++k) {
        T s = warp_sum(v[k]);
        __syncthreads();
        if (lane == 0) shm[warp] = s;
        __syncthreads();
        if (warp == 0) {
            s = lane < nwarps ? shm[lane] : 0.0;
            s = warp_sum(s);
            if (lane == 0) v[k] = s;
        }
    }
}

// Sum of a[0..n) by one block, fixed order; result in thread 0.
__device__ __forceinline__ T block_sum_array(const T* __restrict__ a, long long n, T* shm) {
    T v[1] = {0.0};
    for (long long i = threadIdx.x; i < n; i += blockDim.x) v[0] += a[i];
    block_sum<1>(v, shm);
    return v[0];
}

// out[k] = sqrt(sum of partial[k * nblocks .. (k + 1) * nblocks)) for k < count,
// by one block, fixed order: the norms from per-block sums of squares (the
// sums themselves where roots is false).
// Output k takes the partial sums of row (rows >> 2 k) & 3 (default: row k,
// for count <= 4).
__device__ __forceinline__ void block_norms(const T* __restrict__ partial, int nblocks,
                                            int count, T* __restrict__ out, T* shm,
                                            bool roots = true, int rows = 0xE4) {
    for (int k = 0; k < count; ++k) {
        const T s = block_sum_array(partial + (long long)((rows >> (2 * k)) & 3) * nblocks,
                                    nblocks, shm);
        if (threadIdx.x == 0) out[k] = roots ? sqrt(s) : s;
    }
}

// Sum (or bitwise or) of v over the warp by a butterfly (shuffles xor): every
// lane holds the result.
template <typename V>
__device__ __forceinline__ V warp_allsum(V v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ unsigned warp_or(unsigned v) {
    for (int o = 16; o > 0; o >>= 1) v |= __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// -inf (the identity of a maximum).
#define BF_NEG_INF __longlong_as_double((long long)0xfff0000000000000ULL)

// numpy.maximum / numpy.minimum / numpy.clip: a NaN in either argument wins.
__device__ __forceinline__ T np_max(T a, T b) { return (a >= b || a != a) ? a : b; }
__device__ __forceinline__ T np_min(T a, T b) { return (a <= b || a != a) ? a : b; }
__device__ __forceinline__ T np_clip(T x, T lo, T hi) { return np_min(np_max(x, lo), hi); }

// The indices (k, j, i) of flat cell p of planes of ny x nx cells (plane =
// nx ny), for the kernels that stride over a 3-D grid's cells as one list.
__device__ __forceinline__ void bf_cell3(long long p, int nx, long long plane, int* k, int* j,
                                         int* i)
{
    *k = (int)(p / plane);
    const long long r = p - (long long)*k * plane;
    *j = (int)(r / nx);
    *i = (int)(r - (long long)*j * nx);
}

// The cell (k, j, i) of a grid-stride loop over cells in rows of nx and planes
// of nx * ny, from its first index p and its stride: next() adds the stride's
// own (k, j, i) with carries, so a cell costs no 64-bit division (bf_cell3).
struct BfCellWalk {
    int k, j, i, dk, dj, di, nx, ny;
    __device__ __forceinline__ BfCellWalk(long long p, long long stride, int nx_, int ny_)
        : nx(nx_), ny(ny_)
    {
        const long long plane = (long long)nx * ny;
        bf_cell3(p, nx, plane, &k, &j, &i);
        bf_cell3(stride, nx, plane, &dk, &dj, &di);
    }
    __device__ __forceinline__ void next()
    {
        i += di;
        if (i >= nx) { i -= nx; ++j; }
        j += dj;
        if (j >= ny) { j -= ny; ++k; }
        k += dk;
    }
};

#ifndef BF_PI
#define BF_PI 3.141592653589793
#endif

// mesh.levelset.heaviside: the smoothed Heaviside of width eps.  Past the
// band (t = +-1) the formula gives exactly 1 and 0 (sin(+-pi) / pi is under
// half an ulp of 2, and the clip takes -2e-17 to 0): the sine is skipped.
__device__ __forceinline__ T bf_heaviside(T phi, T eps)
{
    const T t = np_clip(phi / eps, -1.0, 1.0);
    if (t == 1.0) return 1.0;
    if (t == -1.0) return 0.0;
    return np_clip(0.5 * (1.0 + t + sin(BF_PI * t) / BF_PI), 0.0, 1.0);
}

// Largest of v over the block (a NaN wins); valid in thread 0.
template <int NV>
__device__ __forceinline__ void block_max(T* v, T* shm)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    for (int k = 0; k < NV; ++k) {
        T s = v[k];
        for (int o = 16; o > 0; o >>= 1) s = np_max(s, __shfl_down_sync(0xffffffffu, s, o));
        __syncthreads();
        if (lane == 0) shm[warp] = s;
        __syncthreads();
        if (warp == 0) {
            s = lane < nwarps ? shm[lane] : BF_NEG_INF;
            for (int o = 16; o > 0; o >>= 1) s = np_max(s, __shfl_down_sync(0xffffffffu, s, o));
            if (lane == 0) v[k] = s;
        }
    }
}

#endif
