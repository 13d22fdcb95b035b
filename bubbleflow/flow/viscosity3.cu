// The implicit viscous solve on a 3-D grid of one process
// (bubbleflow.flow.viscosity; twins: viscosity3_cuda): the 2-D kernels'
// file and the 3-D ones.  A file of its own so that a 2-D run compiles none
// of it; the residual's scalars end with the 2-D bf_visc_scalars_final.
//
// A component's unknowns (its interior faces) are an n[0] x n[1] x n[2]
// array (array axes: z, y, x), p = (k n[1] + j) n[2] + i.  Grid axis b (x,
// y, z) is array axis 2 - b; its couplings c[b] have the unknowns' shape with
// one more entry along that axis: before p is c[b][q], after it
// c[b][q + stride] (viscosity.viscous_coefficients' two views of one array).
// Ghost signs s[2 b], s[2 b + 1] (low, high) of every grid axis, zero along
// the component's own (the wall face): the ghost beside the first and last
// unknown is s x.  The sums follow the array code's n-D order (grid axis by
// grid axis; viscosity.planar_order), so kernel and twin agree to the bit.
// The 2-D source's shared device code and kernels, without its 2-D-only kernels.
#define BF_WITHOUT_2D_KERNELS
#include "viscosity.cu"

// S v at unknown (k, j, i), p its flat index: rho v minus, over the grid
// axes in order, c_after (v_after - v) - c_before (v - v_before)
// (viscosity.viscous_stress).
__device__ __forceinline__ T visc3_apply(
    const T* __restrict__ rho, const T* __restrict__ cx, const T* __restrict__ cy,
    const T* __restrict__ cz, const T* __restrict__ v, long long p, int k, int j, int i,
    int n0, int n1, int n2, T sx0, T sx1, T sy0, T sy1, T sz0, T sz1)
{
    const long long plane = (long long)n1 * n2;
    const T c = v[p];
    // x: stride 1 in v, cx (n0, n1, n2 + 1).
    const long long qx = p + (long long)k * n1 + j;
    const T xb = i > 0 ? v[p - 1] : sx0 * c;
    const T xa = i < n2 - 1 ? v[p + 1] : sx1 * c;
    T out = cx[qx + 1] * (xa - c) - cx[qx] * (c - xb);
    // y: stride n2, cy (n0, n1 + 1, n2).
    const long long qy = p + (long long)k * n2;
    const T yb = j > 0 ? v[p - n2] : sy0 * c;
    const T ya = j < n1 - 1 ? v[p + n2] : sy1 * c;
    out = out + (cy[qy + n2] * (ya - c) - cy[qy] * (c - yb));
    // z: stride n1 n2, cz (n0 + 1, n1, n2).
    const T zb = k > 0 ? v[p - plane] : sz0 * c;
    const T za = k < n0 - 1 ? v[p + plane] : sz1 * c;
    out = out + (cz[p + plane] * (za - c) - cz[p] * (c - zb));
    return rho[p] * c - out;
}

// One Chebyshev step of one system (x += d; r -= S d; dn = keep d + gain
// D^-1 r) over the unknowns this block's stride covers (BF_CELLS3).
__device__ __forceinline__ void visc3_chebyshev(
    const T* __restrict__ rho, const T* __restrict__ cx, const T* __restrict__ cy,
    const T* __restrict__ cz, const T* __restrict__ inv_diag, T* __restrict__ x,
    T* __restrict__ r, const T* __restrict__ d, T* __restrict__ dn, int n0, int n1, int n2,
    T sx0, T sx1, T sy0, T sy1, T sz0, T sz1, T keep, T gain)
{
    BF_CELLS3(n2, n1, n0) {
        const long long p = ((long long)k * n1 + j) * n2 + i;
        const T c = d[p];
        const T Sd = visc3_apply(rho, cx, cy, cz, d, p, k, j, i, n0, n1, n2, sx0, sx1, sy0, sy1,
                                 sz0, sz1);
        x[p] = x[p] + c;
        const T rn = r[p] - Sd;
        r[p] = rn;
        dn[p] = keep * c + gain * (inv_diag[p] * rn);
    }
}

extern "C" __global__ void bf_visc3_chebyshev_step(
    const T* __restrict__ rho, const T* __restrict__ cx, const T* __restrict__ cy,
    const T* __restrict__ cz, const T* __restrict__ inv_diag, T* __restrict__ x,
    T* __restrict__ r, const T* __restrict__ d, T* __restrict__ dn, int n0, int n1, int n2,
    T sx0, T sx1, T sy0, T sy1, T sz0, T sz1, T keep, T gain)
{
    visc3_chebyshev(rho, cx, cy, cz, inv_diag, x, r, d, dn, n0, n1, n2, sx0, sx1, sy0, sy1, sz0,
                    sz1, keep, gain);
}

// One Chebyshev step of several systems (the velocity components) in one
// launch, read from a table in device memory as bf_visc_chebyshev_table
// reads its own: blockIdx.z picks the system (blockIdx.y strides the rows of
// BF_CELLS3), step k uses d[k % 2] as d and d[1 - k % 2] as d_new, and
// schedule[(s * max_steps + k) * 2 + (0, 1)] as (keep, gain); a system whose
// steps are done is left alone.  The layout is viscosity3_cuda._SYSTEM_TABLE's.
struct Visc3System {
    const T* rho; const T* c[3]; const T* inv;
    T* x; T* r; T* d[2];
    T s[6];
    int n[3], steps;
};

extern "C" __global__ void bf_visc3_chebyshev_table(
    const Visc3System* __restrict__ systems, const T* __restrict__ schedule,
    const int max_steps, const int k)
{
    const Visc3System& s = systems[blockIdx.z];
    if (k >= s.steps) return;
    const long long at = 2 * ((long long)blockIdx.z * max_steps + k);
    const int e = k & 1;
    visc3_chebyshev(s.rho, s.c[0], s.c[1], s.c[2], s.inv, s.x, s.r, s.d[e], s.d[1 - e], s.n[0],
                    s.n[1], s.n[2], s.s[0], s.s[1], s.s[2], s.s[3], s.s[4], s.s[5],
                    schedule[at], schedule[at + 1]);
}

// rhs - S x (viscosity_chebyshev.viscous_residual).
extern "C" __global__ void bf_visc3_residual(
    const T* __restrict__ rho, const T* __restrict__ cx, const T* __restrict__ cy,
    const T* __restrict__ cz, const T* __restrict__ rhs, const T* __restrict__ x,
    T* __restrict__ out, int n0, int n1, int n2, T sx0, T sx1, T sy0, T sy1, T sz0, T sz1)
{
    BF_CELLS3(n2, n1, n0) {
        const long long p = ((long long)k * n1 + j) * n2 + i;
        out[p] = rhs[p] - visc3_apply(rho, cx, cy, cz, x, p, k, j, i, n0, n1, n2, sx0, sx1, sy0,
                                      sy1, sz0, sz1);
    }
}

// The residual r = rhs - S x and per-block partial reductions of what the
// Chebyshev solve reads (bf_visc_scalars_partial in 3-D): sum rhs^2, sum
// r^2, max -rho / D, max D, max -D; partial[q * gridDim.x + block].  One
// flat grid-stride loop: the block sums need 1-D blocks.
extern "C" __global__ void bf_visc3_scalars_partial(
    const T* __restrict__ rho, const T* __restrict__ cx, const T* __restrict__ cy,
    const T* __restrict__ cz, const T* __restrict__ diag, const T* __restrict__ rhs,
    const T* __restrict__ x, T* __restrict__ r, T* __restrict__ partial, int n0, int n1, int n2,
    T sx0, T sx1, T sy0, T sy1, T sz0, T sz1)
{
    __shared__ T shm[32];
    const long long plane = (long long)n1 * n2, n = plane * n0;
    T v[2] = {0.0, 0.0};
    T mx[3] = {BF_NEG_INF, BF_NEG_INF, BF_NEG_INF};
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    BfCellWalk at(first, stride, n2, n1);
    for (long long p = first; p < n; p += stride, at.next()) {
        const int k = at.k, j = at.j, i = at.i;
        const T b = rhs[p];
        const T res = b - visc3_apply(rho, cx, cy, cz, x, p, k, j, i, n0, n1, n2, sx0, sx1, sy0,
                                      sy1, sz0, sz1);
        r[p] = res;
        visc_scalars_add(b, res, rho[p], diag[p], v, mx);
    }
    visc_scalars_store(v, mx, shm, partial);
}

// mu of cell at[] (array order) of the nc[0] x nc[1] x nc[2] cells.
__device__ __forceinline__ T visc3_cell(const T* __restrict__ mu, const int* nc, const int* at)
{
    return mu[((long long)at[0] * nc[1] + at[1]) * nc[2] + at[2]];
}

// mu on the edge of array axes ka and kb between the cells at[ka] and
// at[ka] + 1 along ka and at index e (0..nc[kb]) along kb: the mean of the
// four cells around it, a wall cell copied into the missing ones, summed
// with kb varying first (viscosity.edge_viscosity).
__device__ __forceinline__ T visc3_edge(const T* __restrict__ mu, const int* nc, const int* at,
                                        int ka, int kb, int e)
{
    int q[3] = {at[0], at[1], at[2]};
    const int lo = e > 0 ? e - 1 : 0, hi = e < nc[kb] ? e : nc[kb] - 1;
    q[kb] = lo;
    const T m0 = visc3_cell(mu, nc, q);
    q[kb] = hi;
    const T m1 = visc3_cell(mu, nc, q);
    q[ka] = at[ka] + 1;
    q[kb] = lo;
    const T m2 = visc3_cell(mu, nc, q);
    q[kb] = hi;
    const T m3 = visc3_cell(mu, nc, q);
    return (T)0.25 * (m0 + m1 + m2 + m3);
}

// The couplings c[b], the diagonal and its inverse of component A's system
// (viscosity.viscous_coefficients, n-D order): per grid axis b the couplings
// before and after every unknown, dt2 mu / h2 at the cells along A (dt2 =
// 2 dt), dt mu_edge / h2 across; the diagonal rho + (before + after) axis by
// axis, each followed by its walls' ghosts (- s before at the first unknown,
// - s after at the last).  A thread writes its unknown's before, and the
// after of the last unknown along b.  The axis is a template parameter so
// that the index arrays are indexed by constants and stay in registers.
template <int A>
__device__ __forceinline__ void visc3_coefficients(
    const T* __restrict__ mu, const T* __restrict__ rho_f, T* __restrict__ cx,
    T* __restrict__ cy, T* __restrict__ cz, T* __restrict__ diag, T* __restrict__ inv_diag,
    const int nz, const int ny, const int nx, const T dt, const T dt2, const T hx2,
    const T hy2, const T hz2, const T sx0, const T sx1, const T sy0, const T sy1, const T sz0,
    const T sz1)
{
    const int ka = 2 - A;
    const int nc[3] = {nz, ny, nx};
    int n[3] = {nz, ny, nx};                // the unknowns
    n[ka] -= 1;
    T* const c[3] = {cx, cy, cz};
    const T h2[3] = {hx2, hy2, hz2};
    const T s[6] = {sx0, sx1, sy0, sy1, sz0, sz1};
    BF_CELLS3(n[2], n[1], n[0]) {
        const int at[3] = {k, j, i};
        const long long p = ((long long)k * n[1] + j) * n[2] + i;
        T d = rho_f[p];
#pragma unroll
        for (int b = 0; b < 3; ++b) {
            const int kb = 2 - b;
            T before, after;
            if (b == A) {
                int q[3] = {k, j, i};
                before = dt2 * visc3_cell(mu, nc, q) / h2[b];
                q[ka] += 1;
                after = dt2 * visc3_cell(mu, nc, q) / h2[b];
            } else {
                before = dt * visc3_edge(mu, nc, at, ka, kb, at[kb]) / h2[b];
                after = dt * visc3_edge(mu, nc, at, ka, kb, at[kb] + 1) / h2[b];
            }
            int m[3] = {n[0], n[1], n[2]};  // c[b]'s shape
            m[kb] += 1;
            const long long q = ((long long)k * m[1] + j) * m[2] + i;
            const long long stride = kb == 2 ? 1 : kb == 1 ? (long long)m[2]
                                                           : (long long)m[1] * m[2];
            c[b][q] = before;
            if (at[kb] == n[kb] - 1) c[b][q + stride] = after;
            d = d + (before + after);
            if (at[kb] == 0) d = d - s[2 * b] * before;
            if (at[kb] == n[kb] - 1) d = d - s[2 * b + 1] * after;
        }
        diag[p] = d;
        inv_diag[p] = (T)1.0 / d;
    }
}

// mu: the cells (nz, ny, nx); rho_f and the outputs: component `axis`'s
// unknowns; s*: the ghost signs (zero along `axis`).
extern "C" __global__ void bf_visc3_coefficients(
    const T* __restrict__ mu, const T* __restrict__ rho_f, T* __restrict__ cx,
    T* __restrict__ cy, T* __restrict__ cz, T* __restrict__ diag, T* __restrict__ inv_diag,
    const int nz, const int ny, const int nx, const int axis, const T dt, const T dt2,
    const T hx2, const T hy2, const T hz2, const T sx0, const T sx1, const T sy0, const T sy1,
    const T sz0, const T sz1)
{
#define BF_VISC3_COEFFICIENTS(A) visc3_coefficients<A>(mu, rho_f, cx, cy, cz, diag, inv_diag, \
    nz, ny, nx, dt, dt2, hx2, hy2, hz2, sx0, sx1, sy0, sy1, sz0, sz1)
    if (axis == 0) BF_VISC3_COEFFICIENTS(0);
    else if (axis == 1) BF_VISC3_COEFFICIENTS(1);
    else BF_VISC3_COEFFICIENTS(2);
#undef BF_VISC3_COEFFICIENTS
}
