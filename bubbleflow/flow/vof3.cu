// Volume-of-fluid advection in 3-D (bubbleflow.flow.vof_advection; twin:
// advect_3d): the 2-D kernels' file and the 3-D sweep.  A file of its own so
// that a 2-D run compiles none of it.
// The 2-D source's shared device code and kernels, without its 2-D-only kernels.
#define BF_WITHOUT_2D_KERNELS
#include "vof.cu"
#include "plic3.cuh"

// ---------------------------------------------------------------------------
// 3-D.  Cells (k, j, i) stored plane after plane, p = (k * ny + j) * nx + i;
// grid axis a (0 x, 1 y, 2 z) is array axis 2 - a.  The face velocity of
// axis a has one more entry along it: u (nz, ny, nx + 1), v (nz, ny + 1, nx),
// w (nz + 1, ny, nx).
// ---------------------------------------------------------------------------

// Cell d (array-axis offsets from (k, j, i)) of f with the indices clamped to
// the grid: plic_reconstruction's edge padding.
__device__ __forceinline__ T vof_edge3(const T* __restrict__ f, const int* n, const int* at,
                                       const int* d)
{
    int q[3];
    for (int b = 0; b < 3; ++b) {
        const int x = at[b] + d[b];
        q[b] = x < 0 ? 0 : (x >= n[b] ? n[b] - 1 : x);
    }
    return f[((long long)q[0] * n[1] + q[1]) * n[2] + q[2]];
}

// plic_reconstruction.interface_normal without normal_from in 3-D: for each grid axis the
// central difference of the edge-padded c, smoothed [1, 2, 1] along the other
// array axes in their order (the difference first, then the smoothing), over
// -32 h; normalised.  at, n: the cell and the grid per array axis.
__device__ __forceinline__ void vof_youngs3(const T* __restrict__ c, const int* n, const int* at,
                                            T hx, T hy, T hz, T* m)
{
    const T h[3] = {hx, hy, hz};
    T g[3];
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const int ka = 2 - a;
        const int j1 = ka == 0 ? 1 : 0, j2 = ka == 2 ? 1 : 2;
        T s2[3];
#pragma unroll
        for (int o2 = -1; o2 <= 1; ++o2) {
            T s1[3];
#pragma unroll
            for (int o1 = -1; o1 <= 1; ++o1) {
                int d[3];
                d[j1] = o1;
                d[j2] = o2;
                d[ka] = 1;
                const T up = vof_edge3(c, n, at, d);
                d[ka] = -1;
                s1[o1 + 1] = up - vof_edge3(c, n, at, d);
            }
            s2[o2 + 1] = s1[0] + 2.0 * s1[1] + s1[2];
        }
        const T diff = s2[0] + 2.0 * s2[1] + s2[2];
        g[a] = -diff / (32.0 * h[a]);
    }
    vof_unit3(g[0], g[1], g[2], m);
}

// The cells of a sweep's field c that are neither full nor empty (not c <=
// 0 nor c >= 1, as vof_swept tells them: a NaN cell is listed, and its NaN
// plane carries on as the array code's) appended to list, their number
// added to *count; a block takes its places by one atomic (one a warp
// contends on the counter where the gas's surface crosses most warps).
// Their order is the blocks' (each plane is the cell's alone, so the order
// is free).  Blocks of whole warps, at most 32 of them.
extern "C" __global__ void bf_vof_mixed3(const T* __restrict__ c, long long* __restrict__ list,
                                         unsigned long long* __restrict__ count,
                                         const long long n)
{
    __shared__ unsigned before[32];               // per warp: the block's listed cells before it
    __shared__ unsigned long long first;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        const long long p = base + threadIdx.x;
        const bool mixed = p < n && !(c[p] <= 0.0 || c[p] >= 1.0);
        const unsigned ballot = __ballot_sync(0xffffffffu, mixed);
        if (lane == 0) before[warp] = __popc(ballot);
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned total = 0;
            for (int w = 0; w < warps; ++w) {
                const unsigned in_warp = before[w];
                before[w] = total;
                total += in_warp;
            }
            first = total ? atomicAdd(count, (unsigned long long)total) : 0ULL;
        }
        __syncthreads();
        if (mixed) list[first + before[warp] + __popc(ballot & ((1u << lane) - 1u))] = p;
        __syncthreads();                          // before[] and first are read before the next
    }
}

// The PLIC planes of a sweep's donors: per cell of list (bf_vof_mixed3's,
// *count of them) its normal (of phi where use_phi, else Youngs' of c) and
// plane constant, m . x <= alpha from the cell's low corner, as
// plic_reconstruction.reconstruct gives them: planes[4 p .. 4 p + 3] = m[0],
// m[1], m[2], alpha; other cells' entries are not written (no flux reads
// them).  A pass of its own over the listed cells: each plane is made once,
// not once for each face flux that reads it (two cells a face, up to two
// faces a donor), and no warp waits on a few threads that make one.
extern "C" __global__ void bf_vof_planes3(
    const T* __restrict__ c, const T* __restrict__ phi, const long long* __restrict__ list,
    const unsigned long long* __restrict__ count, T* __restrict__ planes, const int nx,
    const int ny, const int nz, const int use_phi, const T hx, const T hy, const T hz)
{
    const long long plane = (long long)nx * ny;
    const int n[3] = {nz, ny, nx};
    const long long listed = (long long)*count;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < listed;
         t += (long long)gridDim.x * blockDim.x) {
        const long long p = list[t];
        int k, j, i;
        bf_cell3(p, nx, plane, &k, &j, &i);
        const int at[3] = {k, j, i};
        T m[3];
        if (use_phi) vof_phi_normal3(phi, nx, ny, nz, k, j, i, hx, hy, hz, m);
        else         vof_youngs3(c, n, at, hx, hy, hz, m);
        T* out = planes + 4 * p;
        out[0] = m[0];
        out[1] = m[1];
        out[2] = m[2];
        out[3] = vof_plane_constant(m, c[p], hx, hy, hz);
    }
}

// The gas volume through one interior face along grid axis a in dt, in units
// of the cell volume (vof_advection's sweep's `inner` in 3-D): w the face
// velocity, cd the upwind cell's fraction and pl its plane (bf_vof_planes3;
// read only where it is neither full nor empty).
__device__ __forceinline__ T vof_face_flux3(const T* __restrict__ pl, int a, T cd, T w, T hx,
                                            T hy, T hz, T dt, T dt_over_h)
{
    const T h[3] = {hx, hy, hz};
    return vof_swept(cd, w, dt, dt_over_h, [&](T width, bool right) {
        const T m[3] = {pl[0], pl[1], pl[2]};
        const T alpha = pl[3];
        const int b = a == 0 ? 1 : 0, e = a == 2 ? 1 : 2;     // the other grid axes, in order
        const T shifted = right ? alpha - m[a] * (h[a] - width) : alpha;
        return vof_cut_fraction3(m[a], m[b], m[e], shifted, width, h[b], h[e]);
    });
}

// One sweep of vof_advection's sweep along grid axis `axis` of the field c
// (vel: that axis's face velocity; planes: c's, bf_vof_planes3), as
// bf_vof_sweep.  The axis is a template parameter so that every index array
// is indexed by constants and stays in registers.
template <int axis>
__device__ __forceinline__ void vof_sweep3(
    const T* __restrict__ c, const T* __restrict__ c0, const T* __restrict__ planes,
    const T* __restrict__ vel, T* out, T* raw, const int nx, const int ny, const int nz,
    const int last, const int keep_raw, const T hx, const T hy, const T hz, const T dt,
    const T dt_over_h, const T tol, const T one_plus_tol)
{
    const long long plane = (long long)nx * ny;
    const int n[3] = {nz, ny, nx};
    const int ka = 2 - axis;
    const long long step = axis == 0 ? 1 : (axis == 1 ? (long long)nx : plane);
    BF_CELLS3(nx, ny, nz) {
        const long long p = (long long)k * plane + (long long)j * nx + i;
        const int at[3] = {k, j, i};
        long long f_in, f_out;
        if (axis == 0) {
            f_in = ((long long)k * ny + j) * (nx + 1) + i;
            f_out = f_in + 1;
        } else if (axis == 1) {
            f_in = ((long long)k * (ny + 1) + j) * nx + i;
            f_out = f_in + nx;
        } else {
            f_in = p;
            f_out = p + plane;
        }
        const T w_in = vel[f_in], w_out = vel[f_out];
        const T cc = c[p];
        T flux_in = 0.0, flux_out = 0.0;         // no gas through walls
        if (at[ka] > 0) {
            const long long donor = w_in > 0.0 ? p - step : p;
            flux_in = vof_face_flux3(planes + 4 * donor, axis, donor == p ? cc : c[donor], w_in,
                                     hx, hy, hz, dt, dt_over_h);
        }
        if (at[ka] < n[ka] - 1) {
            const long long donor = w_out > 0.0 ? p : p + step;
            flux_out = vof_face_flux3(planes + 4 * donor, axis, donor == p ? cc : c[donor],
                                      w_out, hx, hy, hz, dt, dt_over_h);
        }
        vof_store(cc, flux_in, flux_out, w_in, w_out, c0[p], dt_over_h, last, keep_raw, tol,
                  one_plus_tol, out, raw, p);
    }
}

extern "C" __global__ void bf_vof_sweep3(
    const T* __restrict__ c, const T* __restrict__ c0, const T* __restrict__ planes,
    const T* __restrict__ vel, T* out, T* raw, const int nx, const int ny, const int nz,
    const int axis, const int last, const int keep_raw, const T hx, const T hy, const T hz,
    const T dt, const T dt_over_h, const T tol, const T one_plus_tol)
{
#define BF_VOF_SWEEP3(A) vof_sweep3<A>(c, c0, planes, vel, out, raw, nx, ny, nz, last, keep_raw, \
    hx, hy, hz, dt, dt_over_h, tol, one_plus_tol)
    if (axis == 0) BF_VOF_SWEEP3(0);
    else if (axis == 1) BF_VOF_SWEEP3(1);
    else BF_VOF_SWEEP3(2);
#undef BF_VOF_SWEEP3
}
