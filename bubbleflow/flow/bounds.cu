// The field figures of a flow step's physical bounds (bubbleflow.flow.bounds;
// twin: field_figures).  "typedef double T;" precedes this text.
//
// One pass over the cells (phi, the previous phi, c) and the faces of every
// axis (the new velocity, the previous one), read as one range of indices;
// each block's maxima go to the five outputs by atomic maxima, which do not
// depend on the order (the figures repeat bit for bit).  Outputs, as the
// array code's: 1 if a value is not finite, -min c, max c, max |u_old| dt / h
// over the axes, the largest previous phi at a cell holding gas.  NaN is
// never a maximum here (the not-finite flag reports it).
#include "common.cuh"

#define BF_DBL_MAX 1.7976931348623157e308
// -inf (NVRTC has no INFINITY).
#define BF_NEG_INF (-__longlong_as_double(0x7ff0000000000000LL))

__device__ __forceinline__ bool bf_finite(T x) { return fabs(x) <= BF_DBL_MAX; }

// *addr = max(*addr, v) for doubles, by compare-and-swap (NaN never stored).
__device__ __forceinline__ void bf_atomic_max(T* addr, T v)
{
    unsigned long long* a = (unsigned long long*)addr;
    unsigned long long old = *a;
    while (v > __longlong_as_double(old)) {
        const unsigned long long seen = atomicCAS(a, old, __double_as_longlong(v));
        if (seen == old) break;
        old = seen;
    }
}

#define BF_FIGURES 5

extern "C" __global__ void bf_bounds_figures(
    const T* __restrict__ phi, const T* __restrict__ old_phi, const T* __restrict__ c,
    long long n_cells, T gas_fraction,
    const T* __restrict__ u0, const T* __restrict__ u1, const T* __restrict__ u2,
    const T* __restrict__ o0, const T* __restrict__ o1, const T* __restrict__ o2,
    long long n0, long long n1, long long n2, T s0, T s1, T s2, T* __restrict__ out)
{
    // Local maxima: not finite, -min c, max c, CFL, previous phi at gas.
    T m[BF_FIGURES] = {0.0, BF_NEG_INF, BF_NEG_INF, 0.0, BF_NEG_INF};
    const long long total = n_cells + n0 + n1 + n2;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        if (t < n_cells) {
            const T p = phi[t];
            bool gas;
            if (!bf_finite(p)) m[0] = 1.0;
            if (c != nullptr) {
                const T f = c[t];
                if (!bf_finite(f)) m[0] = 1.0;
                m[1] = fmax(m[1], -f);
                m[2] = fmax(m[2], f);
                gas = f > gas_fraction;
            } else {
                gas = p < 0.0;
            }
            if (gas) m[4] = fmax(m[4], old_phi[t]);
            continue;
        }
        long long f = t - n_cells;
        const T* u = u0; const T* o = o0; T s = s0;
        if (f >= n0) {
            f -= n0; u = u1; o = o1; s = s1;
            if (f >= n1) { f -= n1; u = u2; o = o2; s = s2; }
        }
        if (!bf_finite(u[f])) m[0] = 1.0;
        m[3] = fmax(m[3], fabs(o[f]) * s);
    }
    __shared__ T shm[BF_FIGURES][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    for (int k = 0; k < BF_FIGURES; ++k) {
        T v = m[k];
        for (int d = 16; d > 0; d >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, d));
        if (lane == 0) shm[k][warp] = v;
    }
    __syncthreads();
    if (warp == 0) {
        for (int k = 0; k < BF_FIGURES; ++k) {
            T v = lane < nwarps ? shm[k][lane] : BF_NEG_INF;
            for (int d = 16; d > 0; d >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, d));
            if (lane == 0) bf_atomic_max(out + k, v);
        }
    }
}
