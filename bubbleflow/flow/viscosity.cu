// The implicit viscous solve (bubbleflow.flow.viscosity; twin:
// chebyshev_step).  "typedef double T;" precedes this text.  The formulas
// follow the array code's order of operations (compiled without FMA
// contraction), so kernel and twin agree to the bit.  Faces (j, i) of the
// component's interior are stored row after row: p = j * nx + i.
//
// One Chebyshev step of S x = f, S = rho_f - dt L:
//   x += d;  r -= S d;  d_new = keep d + gain D^-1 r
// Along the component's own axis (columns for u, rows for v) the walls carry
// zero velocity; across the other axis the ghost is s x (s = -1 no-slip,
// +1 free-slip).
#include "common.cuh"
// BF_WITHOUT_2D_KERNELS (defined by the 3-D source that includes this one)
// leaves out the kernels only a 2-D grid runs: the 3-D module compiles less.

// S v at face p (flat index j * nx + i) of a component's interior faces.
__device__ __forceinline__ T visc_apply(
    const T* __restrict__ rho, const T* __restrict__ kp, const T* __restrict__ km,
    const T* __restrict__ tp, const T* __restrict__ tm, const T* __restrict__ v,
    long long p, int ny, int nx, int normal_is_x, T s_low, T s_high)
{
    const int j = (int)(p / nx), i = (int)(p - (long long)j * nx);
    const T c = v[p];
    T xm, xq, ym, yq;
    if (normal_is_x) {
        xm = i > 0 ? v[p - 1] : (T)0;
        xq = i < nx - 1 ? v[p + 1] : (T)0;
        ym = j > 0 ? v[p - nx] : s_low * c;
        yq = j < ny - 1 ? v[p + nx] : s_high * c;
    } else {
        xm = j > 0 ? v[p - nx] : (T)0;
        xq = j < ny - 1 ? v[p + nx] : (T)0;
        ym = i > 0 ? v[p - 1] : s_low * c;
        yq = i < nx - 1 ? v[p + 1] : s_high * c;
    }
    const T Lx = kp[p] * (xq - c) - km[p] * (c - xm) + tp[p] * (yq - c) - tm[p] * (c - ym);
    return rho[p] * c - Lx;
}

// One Chebyshev step of one system over the faces this block's stride covers.
__device__ __forceinline__ void visc_chebyshev(
    const T* __restrict__ rho, const T* __restrict__ kp, const T* __restrict__ km,
    const T* __restrict__ tp, const T* __restrict__ tm, const T* __restrict__ inv_diag,
    T* __restrict__ x, T* __restrict__ r, const T* __restrict__ d, T* __restrict__ dn,
    int ny, int nx, int normal_is_x, T s_low, T s_high, T keep, T gain, int block, int nblocks)
{
    const long long n = (long long)ny * nx;
    for (long long p = (long long)block * blockDim.x + threadIdx.x; p < n;
         p += (long long)nblocks * blockDim.x) {
        const T c = d[p];
        const T Sd = visc_apply(rho, kp, km, tp, tm, d, p, ny, nx, normal_is_x, s_low, s_high);
        x[p] = x[p] + c;
        const T rn = r[p] - Sd;
        r[p] = rn;
        dn[p] = keep * c + gain * (inv_diag[p] * rn);
    }
}

#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_visc_chebyshev_step(
    const T* __restrict__ rho, const T* __restrict__ kp, const T* __restrict__ km,
    const T* __restrict__ tp, const T* __restrict__ tm, const T* __restrict__ inv_diag,
    T* __restrict__ x, T* __restrict__ r, const T* __restrict__ d, T* __restrict__ dn,
    int ny, int nx, int normal_is_x, T s_low, T s_high, T keep, T gain)
{
    visc_chebyshev(rho, kp, km, tp, tm, inv_diag, x, r, d, dn, ny, nx, normal_is_x, s_low,
                   s_high, keep, gain, blockIdx.x, gridDim.x);
}
#endif

// One Chebyshev step of several systems (the velocity components) in one
// launch, read from a table in device memory (four launch arguments, where
// the systems' arrays as arguments cost the host more than the step costs
// the device): blockIdx.y picks the system; step k of system s uses d[k % 2]
// as d and d[1 - k % 2] as d_new, and schedule[(s * max_steps + k) * 2 +
// (0, 1)] as (keep, gain); a system whose steps are done is left alone.
// The layout is viscosity_cuda._SYSTEM_TABLE's.
struct ViscSystem {
    const T* rho; const T* kp; const T* km; const T* tp; const T* tm; const T* inv;
    T* x; T* r; T* d[2];
    T s_low, s_high;
    int ny, nx, normal_is_x, steps;
};

#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_visc_chebyshev_table(
    const ViscSystem* __restrict__ systems, const T* __restrict__ schedule,
    const int max_steps, const int k)
{
    const ViscSystem& s = systems[blockIdx.y];
    if (k >= s.steps) return;
    const long long at = 2 * ((long long)blockIdx.y * max_steps + k);
    const int e = k & 1;
    visc_chebyshev(s.rho, s.kp, s.km, s.tp, s.tm, s.inv, s.x, s.r, s.d[e], s.d[1 - e], s.ny,
                   s.nx, s.normal_is_x, s.s_low, s.s_high, schedule[at], schedule[at + 1],
                   blockIdx.x, gridDim.x);
}
#endif

// One row's part of the residual's scalars (bf_visc_scalars_partial, and
// bf_visc3_scalars_partial in 3-D): b = rhs, res = b - (S x), rho and the
// diagonal dp into v (sum rhs^2, sum r^2) and mx (max -rho / D, max D,
// max -D).
__device__ __forceinline__ void visc_scalars_add(T b, T res, T rho, T dp, T* v, T* mx)
{
    v[0] += b * b;
    v[1] += res * res;
    mx[0] = np_max(mx[0], -(rho / dp));
    mx[1] = np_max(mx[1], dp);
    mx[2] = np_max(mx[2], -dp);
}

// The block's scalars into partial[q * gridDim.x + block].
__device__ __forceinline__ void visc_scalars_store(T* v, T* mx, T* shm, T* __restrict__ partial)
{
    block_sum<2>(v, shm);
    block_max<3>(mx, shm);
    if (threadIdx.x == 0) {
        const int g = gridDim.x, b = blockIdx.x;
        partial[b] = v[0];
        partial[g + b] = v[1];
        for (int q = 0; q < 3; ++q) partial[(2 + q) * g + b] = mx[q];
    }
}

// The residual r = rhs - S x (written where r is not null) and per-block
// partial reductions of what the Chebyshev solve reads: sum rhs^2, sum r^2,
// min rho / D, max D, min D; partial[k * gridDim.x + block].
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_visc_scalars_partial(
    const T* __restrict__ rho, const T* __restrict__ kp, const T* __restrict__ km,
    const T* __restrict__ tp, const T* __restrict__ tm, const T* __restrict__ diag,
    const T* __restrict__ rhs, const T* __restrict__ x, T* __restrict__ r,
    T* __restrict__ partial, int ny, int nx, int normal_is_x, T s_low, T s_high)
{
    __shared__ T shm[32];
    const long long n = (long long)ny * nx;
    T v[2] = {0.0, 0.0};
    T mx[3] = {BF_NEG_INF, BF_NEG_INF, BF_NEG_INF};     // max -rho / D, max D, max -D
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const T b = rhs[p];
        const T res = b - visc_apply(rho, kp, km, tp, tm, x, p, ny, nx, normal_is_x, s_low, s_high);
        if (r) r[p] = res;
        visc_scalars_add(b, res, rho[p], diag[p], v, mx);
    }
    visc_scalars_store(v, mx, shm, partial);
}
#endif

// One block: [||rhs||, ||r||, min rho / D, max D, min D] from the partials.
extern "C" __global__ void bf_visc_scalars_final(
    const T* __restrict__ partial, const int nblocks, T* __restrict__ out)
{
    __shared__ T shm[32];
    block_norms(partial, nblocks, 2, out, shm);
    T mx[3] = {BF_NEG_INF, BF_NEG_INF, BF_NEG_INF};
    for (int i = threadIdx.x; i < nblocks; i += blockDim.x)
        for (int k = 0; k < 3; ++k) mx[k] = np_max(mx[k], partial[(2 + k) * nblocks + i]);
    block_max<3>(mx, shm);
    if (threadIdx.x == 0) { out[2] = -mx[0]; out[3] = mx[1]; out[4] = -mx[2]; }
}

// mu at corner (J, I) of the (ny+1) x (nx+1) corners: the mean of the four
// cells around it, edge-copied at the walls (viscosity.edge_viscosity).
__device__ __forceinline__ T visc_corner_mu(const T* __restrict__ mu, int nx, int ny, int J, int I)
{
    const int jm = J - 1 < 0 ? 0 : J - 1, jp = J > ny - 1 ? ny - 1 : J;
    const int im = I - 1 < 0 ? 0 : I - 1, ip = I > nx - 1 ? nx - 1 : I;
    const T a = mu[(long long)jm * nx + im], b = mu[(long long)jp * nx + im];
    const T c = mu[(long long)jm * nx + ip], d = mu[(long long)jp * nx + ip];
    return (T)0.25 * (a + b + c + d);
}

// The couplings of the viscous system on the component's interior faces
// (viscosity.viscous_coefficients): (fny, fnx) faces, the cells (ny, nx).
// c2 = 2 dt, c = dt, hn2 / ht2 the squared spacing along / across the component.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_visc_coefficients(
    const T* __restrict__ mu, const T* __restrict__ rho_f, T* __restrict__ kp,
    T* __restrict__ km, T* __restrict__ tp, T* __restrict__ tm, T* __restrict__ diag,
    T* __restrict__ inv_diag, int ny, int nx, int normal_is_x, T c, T c2, T hn2, T ht2,
    T s_low, T s_high)
{
    const int fny = normal_is_x ? ny : ny - 1, fnx = normal_is_x ? nx - 1 : nx;
    const long long n = (long long)fny * fnx;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int j = (int)(p / fnx), i = (int)(p - (long long)j * fnx);
        T a, b, e, f;
        bool first, last;
        if (normal_is_x) {
            const int I = i + 1;
            a = c2 * mu[(long long)j * nx + I] / hn2;
            b = c2 * mu[(long long)j * nx + I - 1] / hn2;
            e = c * visc_corner_mu(mu, nx, ny, j + 1, I) / ht2;
            f = c * visc_corner_mu(mu, nx, ny, j, I) / ht2;
            first = j == 0;
            last = j == fny - 1;
        } else {
            const int J = j + 1;
            a = c2 * mu[(long long)J * nx + i] / hn2;
            b = c2 * mu[(long long)(J - 1) * nx + i] / hn2;
            e = c * visc_corner_mu(mu, nx, ny, J, i + 1) / ht2;
            f = c * visc_corner_mu(mu, nx, ny, J, i) / ht2;
            first = i == 0;
            last = i == fnx - 1;
        }
        T d = rho_f[p] + a + b + e + f;
        if (first) d = d + f * (-s_low);
        if (last) d = d + e * (-s_high);
        kp[p] = a; km[p] = b; tp[p] = e; tm[p] = f;
        diag[p] = d;
        inv_diag[p] = (T)1.0 / d;
    }
}
#endif

// rhs - S x on the component's interior faces (viscosity.viscous_residual).
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_visc_residual(
    const T* __restrict__ rho, const T* __restrict__ kp, const T* __restrict__ km,
    const T* __restrict__ tp, const T* __restrict__ tm, const T* __restrict__ rhs,
    const T* __restrict__ x, T* __restrict__ out, int ny, int nx, int normal_is_x,
    T s_low, T s_high)
{
    const long long n = (long long)ny * nx;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x)
        out[p] = rhs[p] - visc_apply(rho, kp, km, tp, tm, x, p, ny, nx, normal_is_x, s_low, s_high);
}
#endif
