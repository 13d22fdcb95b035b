// The multigrid hierarchy's set-up on the device (twins of
// bubbleflow.linalg.precond.multigrid.coarsen_couplings and level_arrays,
// and of coarsest_solve.shifted_dense):
// "typedef double T;" precedes this text.  A 2-D grid is a 3-D one of a
// single plane (n0 = 1, no couplings along array axis 0).  Sums in the array
// code's order, so the same bits.

#include "common.cuh"

// Fine face value at (a0, a1, a2), 0 past the array (the array code's zero
// padding of an odd count before its pair sums).
__device__ __forceinline__ T mg_face(const T* __restrict__ f, int n0, int n1, int n2, int a0,
                                     int a1, int a2)
{
    if (a0 >= n0 || a1 >= n1 || a2 >= n2) return 0.0;
    return f[((long long)a0 * n1 + a1) * n2 + a2];
}

// The indices per array axis of flat position q of an array of extents
// (., n1, n2).
__device__ __forceinline__ void mg_unflatten(long long q, int n1, int n2, int* a0, int* a1,
                                             int* a2)
{
    *a2 = (int)(q % n2);
    const long long r = q / n2;
    *a1 = (int)(r % n1);
    *a0 = (int)(r / n1);
}

// The coarse coupling of the face normal to array axis KA of coarse index
// (k0, k1, k2): the fine faces between aggregates (odd along KA) summed over
// the aggregates' pairs along the other axes, the lower array axis first
// (multigrid.coarsen_axis); n0, n1, n2: the fine face array's extents.
template <int KA>
__device__ __forceinline__ T mg_coarse_face(const T* __restrict__ fine, int n0, int n1, int n2,
                                            int k0, int k1, int k2)
{
    // Base index per array axis: 2 K + 1 along KA, 2 K along the others.
    const int b0 = KA == 0 ? 2 * k0 + 1 : 2 * k0;
    const int b1 = KA == 1 ? 2 * k1 + 1 : 2 * k1;
    const int b2 = KA == 2 ? 2 * k2 + 1 : 2 * k2;
    if (KA == 0) {          // pairs along axis 1, then axis 2
        return (mg_face(fine, n0, n1, n2, b0, b1, b2) + mg_face(fine, n0, n1, n2, b0, b1 + 1, b2))
               + (mg_face(fine, n0, n1, n2, b0, b1, b2 + 1)
                  + mg_face(fine, n0, n1, n2, b0, b1 + 1, b2 + 1));
    } else if (KA == 1) {   // pairs along axis 0, then axis 2
        return (mg_face(fine, n0, n1, n2, b0, b1, b2) + mg_face(fine, n0, n1, n2, b0 + 1, b1, b2))
               + (mg_face(fine, n0, n1, n2, b0, b1, b2 + 1)
                  + mg_face(fine, n0, n1, n2, b0 + 1, b1, b2 + 1));
    }
    // pairs along axis 0, then axis 1
    return (mg_face(fine, n0, n1, n2, b0, b1, b2) + mg_face(fine, n0, n1, n2, b0 + 1, b1, b2))
           + (mg_face(fine, n0, n1, n2, b0, b1 + 1, b2)
              + mg_face(fine, n0, n1, n2, b0 + 1, b1 + 1, b2));
}

// The coarse couplings of the faces normal to array axis KA (coarse face
// array of extents c0, c1, c2).
template <int KA>
__device__ __forceinline__ void mg_coarsen(const T* __restrict__ fine, T* __restrict__ coarse,
                                           int n0, int n1, int n2, int c0, int c1, int c2)
{
    const long long count = (long long)c0 * c1 * c2;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < count;
         q += (long long)gridDim.x * blockDim.x) {
        int k0, k1, k2;
        mg_unflatten(q, c1, c2, &k0, &k1, &k2);
        coarse[q] = mg_coarse_face<KA>(fine, n0, n1, n2, k0, k1, k2);
    }
}

// n0, n1, n2: the fine face array's extents; c0, c1, c2: the coarse one's.
extern "C" __global__ void bf_mg_coarsen(const T* __restrict__ fine, T* __restrict__ coarse,
                                         const int n0, const int n1, const int n2, const int c0,
                                         const int c1, const int c2, const int ka)
{
    if (ka == 0) mg_coarsen<0>(fine, coarse, n0, n1, n2, c0, c1, c2);
    else if (ka == 1) mg_coarsen<1>(fine, coarse, n0, n1, n2, c0, c1, c2);
    else mg_coarsen<2>(fine, coarse, n0, n1, n2, c0, c1, c2);
}

// A level's arrays in its precision S from its float64 couplings (x: (n0,
// n1, n2 - 1), y: (n0, n1 - 1, n2), z: (n0 - 1, n1, n2), z absent in 2-D):
// the couplings rounded to S and the inverse of the diagonal, the sum of a
// cell's couplings in poisson.centre_from_couplings' order (lower faces from
// the last grid axis down, then upper faces from the first up), 0 where it
// is not positive.
template <typename S>
__device__ __forceinline__ void mg_level_cell(const T* __restrict__ cx, const T* __restrict__ cy,
                                              const T* __restrict__ cz, S* __restrict__ ox,
                                              S* __restrict__ oy, S* __restrict__ oz,
                                              S* __restrict__ inv, int n0, int n1, int n2,
                                              long long p, int k, int j, int i)
{
    const long long px = ((long long)k * n1 + j) * (n2 - 1) + i;
    const long long py = ((long long)k * (n1 - 1) + j) * n2 + i;
    T C = 0.0;
    if (k > 0) C += cz[p - (long long)n1 * n2];
    if (j > 0) C += cy[py - n2];
    if (i > 0) C += cx[px - 1];
    if (i < n2 - 1) { C += cx[px]; ox[px] = (S)cx[px]; }
    if (j < n1 - 1) { C += cy[py]; oy[py] = (S)cy[py]; }
    if (k < n0 - 1) { C += cz[p]; oz[p] = (S)cz[p]; }
    inv[p] = (S)(C > 0.0 ? 1.0 / C : 0.0);
}

// A level's arrays (mg_level_cell) over the level's cells; with COARSEN
// also the next level's float64 couplings (mg_coarsen, per axis) in the same
// pass: the cell at an aggregate's lowest corner sums the aggregate's upper
// coarse faces, whose fine faces its neighbours read for their own arrays.
// kx, ky, kz: the coarse couplings (extents c0, c1, c2 less one along their
// axis); kz and cz are not read where n0 is 1 (a 2-D grid).
template <typename S, bool COARSEN>
__device__ __forceinline__ void mg_level(const T* __restrict__ cx, const T* __restrict__ cy,
                                         const T* __restrict__ cz, S* __restrict__ ox,
                                         S* __restrict__ oy, S* __restrict__ oz,
                                         S* __restrict__ inv, T* __restrict__ kx,
                                         T* __restrict__ ky, T* __restrict__ kz, int n0, int n1,
                                         int n2, int c0, int c1, int c2)
{
    const long long count = (long long)n0 * n1 * n2;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < count;
         p += (long long)gridDim.x * blockDim.x) {
        int k, j, i;
        mg_unflatten(p, n1, n2, &k, &j, &i);
        mg_level_cell<S>(cx, cy, cz, ox, oy, oz, inv, n0, n1, n2, p, k, j, i);
        if (!COARSEN || ((k | j | i) & 1)) continue;
        const int k0 = k >> 1, k1 = j >> 1, k2 = i >> 1;
        if (k2 < c2 - 1)
            kx[((long long)k0 * c1 + k1) * (c2 - 1) + k2] =
                mg_coarse_face<2>(cx, n0, n1, n2 - 1, k0, k1, k2);
        if (k1 < c1 - 1)
            ky[((long long)k0 * (c1 - 1) + k1) * c2 + k2] =
                mg_coarse_face<1>(cy, n0, n1 - 1, n2, k0, k1, k2);
        if (k0 < c0 - 1)
            kz[((long long)k0 * c1 + k1) * c2 + k2] =
                mg_coarse_face<0>(cz, n0 - 1, n1, n2, k0, k1, k2);
    }
}

#define BF_MG_LEVEL(NAME, S)                                                                   \
    extern "C" __global__ void NAME(const T* __restrict__ cx, const T* __restrict__ cy,        \
                                    const T* __restrict__ cz, S* __restrict__ ox,              \
                                    S* __restrict__ oy, S* __restrict__ oz,                    \
                                    S* __restrict__ inv, const int n0, const int n1,           \
                                    const int n2)                                              \
    {                                                                                          \
        mg_level<S, false>(cx, cy, cz, ox, oy, oz, inv, nullptr, nullptr, nullptr, n0, n1,     \
                           n2, 0, 0, 0);                                                       \
    }
BF_MG_LEVEL(bf_mg_level_f64, double)
BF_MG_LEVEL(bf_mg_level_f32, float)

#define BF_MG_LEVEL_COARSEN(NAME, S)                                                           \
    extern "C" __global__ void NAME(const T* __restrict__ cx, const T* __restrict__ cy,        \
                                    const T* __restrict__ cz, S* __restrict__ ox,              \
                                    S* __restrict__ oy, S* __restrict__ oz,                    \
                                    S* __restrict__ inv, T* __restrict__ kx,                   \
                                    T* __restrict__ ky, T* __restrict__ kz, const int n0,      \
                                    const int n1, const int n2, const int c0, const int c1,    \
                                    const int c2)                                              \
    {                                                                                          \
        mg_level<S, true>(cx, cy, cz, ox, oy, oz, inv, kx, ky, kz, n0, n1, n2, c0, c1, c2);    \
    }
BF_MG_LEVEL_COARSEN(bf_mg_level_coarsen_f64, double)
BF_MG_LEVEL_COARSEN(bf_mg_level_coarsen_f32, float)

// coarsest_solve.shifted_dense: the dense A + shift 1 1^T of a level of n0 x
// n1 x n2 cells from its float64 couplings (as mg_level's), its diagonal
// (flat) and shift (a device scalar), each entry written once as the array
// code's value plus the shift: the same bits.
extern "C" __global__ void bf_mg_shifted_dense(const T* __restrict__ cx, const T* __restrict__ cy,
                                               const T* __restrict__ cz,
                                               const T* __restrict__ centre,
                                               const T* __restrict__ shift, T* __restrict__ out,
                                               const int n0, const int n1, const int n2)
{
    const long long n = (long long)n0 * n1 * n2;
    const long long plane = (long long)n1 * n2;
    const T c = shift[0];
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n * n;
         q += (long long)gridDim.x * blockDim.x) {
        const long long r = q / n, s = q - r * n;
        T value = 0.0;
        if (r == s) {
            value = centre[r];
        } else {
            // The lower cell of the pair and the distance to the other: a
            // neighbour along array axis 2, 1 or 0 when the distance is that
            // axis' stride and the lower cell is not the last of its line.
            const long long lo = r < s ? r : s;
            const long long d = (r < s ? s : r) - lo;
            int k, j, i;
            mg_unflatten(lo, n1, n2, &k, &j, &i);
            if (d == 1 && i < n2 - 1)
                value = -cx[((long long)k * n1 + j) * (n2 - 1) + i];
            else if (d == n2 && j < n1 - 1)
                value = -cy[((long long)k * (n1 - 1) + j) * n2 + i];
            else if (d == plane && k < n0 - 1)
                value = -cz[lo];
        }
        out[q] = value + c;
    }
}

// Multigrid.prepare's scales (multigrid.abs_peak, multigrid.write_io_scale).
// First pass: each block's largest |b| (a NaN wins, as numpy.max's), over
// a grid-stride walk of n values.
extern "C" __global__ void bf_mg_abs_max_partial(const T* __restrict__ b, const long long n,
                                                 T* __restrict__ partial)
{
    __shared__ T shm[32];
    T v[1] = {BF_NEG_INF};
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n;
         q += (long long)gridDim.x * blockDim.x)
        v[0] = np_max(v[0], fabs(b[q]));
    block_max<1>(v, shm);
    if (threadIdx.x == 0) partial[blockIdx.x] = v[0];
}

// One block: peak = the largest of the blocks' values (0 where there are
// none), written to peak (if given) and, where io_scale is given, the
// scales [2^-e, 2^e] of e = ceil(log2 peak) (e = 0 where peak is not
// positive): the array code's functions, the same bits.
extern "C" __global__ void bf_mg_io_scale(const T* __restrict__ partial, const int blocks,
                                          T* __restrict__ peak, T* __restrict__ io_scale)
{
    __shared__ T shm[32];
    T v[1] = {BF_NEG_INF};
    for (int q = threadIdx.x; q < blocks; q += blockDim.x) v[0] = np_max(v[0], partial[q]);
    block_max<1>(v, shm);
    if (threadIdx.x == 0) {
        const T top = blocks > 0 ? v[0] : 0.0;
        if (peak != nullptr) peak[0] = top;
        if (io_scale != nullptr) {
            const T e = ceil(log2(top > 0.0 ? top : 1.0));
            io_scale[0] = exp2(-e);
            io_scale[1] = exp2(e);
        }
    }
}
