// Level-set kernels of the flow (bubbleflow.flow.levelset; twins:
// advect, reinitialize, curvature, bubble_diagnostics).  "typedef double T;"
// precedes this text.  Every formula is written in the array code's order of
// operations (compiled without FMA contraction), so a kernel and its twin
// differ at most by the last bits of the library's sin, and the sums by
// their order; the WENO5 stencils (differences, weno5) multiply where the
// array code divides, and differ from it by rounding (a float64 division is
// a sequence of a dozen instructions, and the transport is bound by them).
// Cells (j, i) are stored row after row: p = j * nx + i.
#include "common.cuh"
// BF_WITHOUT_2D_KERNELS (defined by the 3-D source that includes this one)
// leaves out the kernels only a 2-D grid runs: the 3-D module compiles less.

__device__ __forceinline__ T sq(T x) { return x * x; }

// Cell k of a grid line of n cells at stride s, for -3 <= k < n + 3; outside
// [0, n) the linear extrapolation of _pad_linear (first - (second - first) m,
// last + (last - before) m).
__device__ __forceinline__ T lin_at(const T* __restrict__ f, long long s, int n, int k)
{
    if (k < 0) {
        const T a = f[0], b = f[s];
        return a - (b - a) * (T)(-k);
    }
    if (k >= n) {
        const T l = f[(long long)(n - 1) * s], b = f[(long long)(n - 2) * s];
        return l + (l - b) * (T)(k - n + 1);
    }
    return f[(long long)k * s];
}

// The six divided differences e[m] = (f(i - 2 + m) - f(i - 3 + m)) / h,
// m = 0..5, around cell i of a line: e[0..4] are the backward (minus)
// stencil, e[5], e[4], .., e[1] the forward (plus) one, multiplied by
// inv_h = 1 / h.
__device__ __forceinline__ void differences(const T* __restrict__ f, long long s, int n, int i,
                                            T inv_h, T* e)
{
    if (i >= 3 && i + 3 < n) {
        // Every value a cell of the line: read in one branch, so that the
        // seven loads are issued before the first is used.
        T g[7];
#pragma unroll
        for (int m = 0; m < 7; ++m) g[m] = f[(long long)(i - 3 + m) * s];
#pragma unroll
        for (int m = 0; m < 6; ++m) e[m] = (g[m + 1] - g[m]) * inv_h;
        return;
    }
    T prev = lin_at(f, s, n, i - 3);
#pragma unroll
    for (int m = 0; m < 6; ++m) {
        const T next = lin_at(f, s, n, i - 2 + m);
        e[m] = (next - prev) * inv_h;
        prev = next;
    }
}

// Jiang-Shu WENO5 (weno.weno5) of the five differences ordered along the
// upwind direction, in two divisions instead of fifteen.  With the weights
// a_k = d_k / (s_k + eps)^2, the combination sum a_k p_k / sum a_k is taken
// with its denominators cleared: a_k replaced by d_k q_l q_m ({k, l, m} =
// {1, 2, 3}), q_k = ((s_k + eps) / eps)^2.  Each q_k lies between 1 and
// about 1e15 (s_k <= 34 max v^2 <= 3.4e7 eps), so their products neither
// underflow (eps itself may be as small as weno_floor) nor overflow.
__device__ __forceinline__ T weno5(T v1, T v2, T v3, T v4, T v5, T floor_)
{
    const T s1 = (13.0 / 12.0) * sq(v1 - 2.0 * v2 + v3) + 0.25 * sq(v1 - 4.0 * v2 + 3.0 * v3);
    const T s2 = (13.0 / 12.0) * sq(v2 - 2.0 * v3 + v4) + 0.25 * sq(v2 - v4);
    const T s3 = (13.0 / 12.0) * sq(v3 - 2.0 * v4 + v5) + 0.25 * sq(3.0 * v3 - 4.0 * v4 + v5);
    T m = np_max(v1 * v1, v2 * v2);
    m = np_max(m, v3 * v3);
    m = np_max(m, v4 * v4);
    m = np_max(m, v5 * v5);
    const T eps = 1e-6 * m + floor_;
    const T inv_eps = 1.0 / eps;
    const T q1 = sq((s1 + eps) * inv_eps);
    const T q2 = sq((s2 + eps) * inv_eps);
    const T q3 = sq((s3 + eps) * inv_eps);
    const T w1 = 0.1 * (q2 * q3), w2 = 0.6 * (q1 * q3), w3 = 0.3 * (q1 * q2);
    const T p1 = v1 * (1.0 / 3.0) - (7.0 / 6.0) * v2 + (11.0 / 6.0) * v3;
    const T p2 = -v2 * (1.0 / 6.0) + (5.0 / 6.0) * v3 + v4 * (1.0 / 3.0);
    const T p3 = v3 * (1.0 / 3.0) + (5.0 / 6.0) * v4 - v5 * (1.0 / 6.0);
    return (w1 * p1 + w2 * p2 + w3 * p3) / (w1 + w2 + w3);
}

__device__ __forceinline__ T weno_minus(const T* e, T floor_)
{
    return weno5(e[0], e[1], e[2], e[3], e[4], floor_);
}

__device__ __forceinline__ T weno_plus(const T* e, T floor_)
{
    return weno5(e[5], e[4], e[3], e[2], e[1], floor_);
}

// weno_minus (minus) or weno_plus of the differences e.  Six differences of
// +0 (a flat stretch of the line, such as the level set past CLSVOF's band)
// give +0, weno5's own value for them, without its arithmetic: the same bits.
__device__ __forceinline__ T weno_upwind(const T* e, bool minus, T floor_)
{
    bool flat = floor_ > 0.0;       // (weno5's eps is then positive: its weights finite)
#pragma unroll
    for (int m = 0; m < 6; ++m) flat = flat && __double_as_longlong(e[m]) == 0;
    if (flat) return 0.0;
    return minus ? weno_minus(e, floor_) : weno_plus(e, floor_);
}

// One TVD-RK3 stage (rk3) given the right-hand side r at the stage's field p:
// stage 1: base + dt r; 2: 3/4 base + 1/4 (p + dt r); 3: 1/3 base + 2/3 (p + dt r).
__device__ __forceinline__ T rk3_stage(int stage, T base, T p, T dt, T r)
{
    if (stage == 1) return base + dt * r;
    if (stage == 2) return 0.75 * base + 0.25 * (p + dt * r);
    return (1.0 / 3.0) * base + (2.0 / 3.0) * (p + dt * r);
}

// advect: one RK stage of phi_t = -(u_c D_x phi + v_c D_y phi), WENO5 upwinded
// by the sign of the cell-centre velocity.  base: the field at the start of
// the step; p: the stage's field (base itself at stage 1); u (ny, nx + 1), v
// (ny + 1, nx): the face velocities; inv_hx = 1 / hx, inv_hy = 1 / hy.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_ls_advect_stage(
    const T* __restrict__ base, const T* __restrict__ p, const T* __restrict__ u,
    const T* __restrict__ v, T* __restrict__ out, const int nx, const int ny,
    const T inv_hx, const T inv_hy, const T dt, const T floor_, const int stage)
{
    BF_CELLS(nx, ny) {
        const long long c = (long long)j * nx + i;
        const long long f = (long long)j * (nx + 1) + i;
        const T uc = 0.5 * (u[f] + u[f + 1]);
        const T vc = 0.5 * (v[c] + v[c + nx]);
        T e[6];
        differences(p + (long long)j * nx, 1, nx, i, inv_hx, e);
        const T px = weno_upwind(e, uc > 0, floor_);
        differences(p + i, nx, ny, j, inv_hy, e);
        const T py = weno_upwind(e, vc > 0, floor_);
        const T r = -(uc * px + vc * py);
        out[c] = rk3_stage(stage, base[c], p[c], dt, r);
    }
}
#endif

// reinitialize, set-up: for each cell of phi0, coef = D (Russo-Smereka
// distance) next to the interface, else S = phi0 / sqrt(phi0^2 + h^2); flags:
// bit 0 next to the interface, bit 1 S > 0, bits 2 and 3 sign(phi0) > 0, < 0.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_ls_reinit_setup(
    const T* __restrict__ phi0, T* __restrict__ coef, signed char* __restrict__ flags,
    const int nx, const int ny, const T hx, const T hy, const T hh, const T tiny)
{
    BF_CELLS(nx, ny) {
        const long long c = (long long)j * nx + i;
        const T q = phi0[c];
        bool near = q == 0;
        if (i > 0) near = near || q * phi0[c - 1] <= 0;
        if (i < nx - 1) near = near || phi0[c + 1] * q <= 0;
        if (j > 0) near = near || q * phi0[c - nx] <= 0;
        if (j < ny - 1) near = near || phi0[c + nx] * q <= 0;
        const T S = q / sqrt(q * q + hh);
        T value = S;
        if (near) {
            const T e = lin_at(phi0 + (long long)j * nx, 1, nx, i + 1);
            const T w = lin_at(phi0 + (long long)j * nx, 1, nx, i - 1);
            const T n = lin_at(phi0 + i, nx, ny, j + 1);
            const T s = lin_at(phi0 + i, nx, ny, j - 1);
            const T central = sqrt(sq((e - w) / (2.0 * hx)) + sq((n - s) / (2.0 * hy)));
            T g = np_max(central, fabs(e - q) / hx);
            g = np_max(g, fabs(q - w) / hx);
            g = np_max(g, fabs(n - q) / hy);
            g = np_max(g, fabs(q - s) / hy);
            value = q / np_max(g, tiny);
        }
        coef[c] = value;
        flags[c] = (signed char)((near ? 1 : 0) | (S > 0 ? 2 : 0) | (q > 0 ? 4 : 0) | (q < 0 ? 8 : 0));
    }
}
#endif

// The subcell fix of a cell next to the interface (flags fl, bit 0):
// -(sign(phi0) |phi| - D) / hmin, sign(phi0) from bits 2 and 3.
__device__ __forceinline__ T reinit_subcell_rate(const int fl, const T pc, const T d,
                                                 const T hmin)
{
    const T sgn = (fl & 4) ? 1.0 : ((fl & 8) ? -1.0 : 0.0);
    return -(sgn * fabs(pc) - d) / hmin;
}

// reinitialize: one RK stage of phi_tau = -S (|grad phi|_Godunov - 1), with
// the subcell fix (reinit_subcell_rate) next to the interface.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_ls_reinit_stage(
    const T* __restrict__ base, const T* __restrict__ p, const T* __restrict__ coef,
    const signed char* __restrict__ flags, T* __restrict__ out, const int nx, const int ny,
    const T hx, const T hy, const T hmin, const T dtau, const T floor_, const int stage)
{
    const T inv_hx = 1.0 / hx, inv_hy = 1.0 / hy;
    BF_CELLS(nx, ny) {
        const long long c = (long long)j * nx + i;
        const int fl = flags[c];
        const T pc = p[c];
        T r;
        if (fl & 1) {
            r = reinit_subcell_rate(fl, pc, coef[c], hmin);
        } else {
            T e[6];
            differences(p + (long long)j * nx, 1, nx, i, inv_hx, e);
            const T a = weno_minus(e, floor_), b = weno_plus(e, floor_);
            differences(p + i, nx, ny, j, inv_hy, e);
            const T cm_ = weno_minus(e, floor_), d = weno_plus(e, floor_);
            const T ap = np_max(a, 0.0), am = np_min(a, 0.0);
            const T bp = np_max(b, 0.0), bm = np_min(b, 0.0);
            const T cp = np_max(cm_, 0.0), cm = np_min(cm_, 0.0);
            const T dp = np_max(d, 0.0), dm = np_min(d, 0.0);
            T g2;
            if (fl & 2) g2 = np_max(ap * ap, bm * bm) + np_max(cp * cp, dm * dm);
            else        g2 = np_max(am * am, bp * bp) + np_max(cm * cm, dp * dp);
            r = -coef[c] * (sqrt(g2) - 1.0);
        }
        out[c] = rk3_stage(stage, base[c], pc, dtau, r);
    }
}
#endif

// The field with one ghost layer of quadratic extrapolation along x, then
// along y (as _pad_quadratic twice): cell (j, i), -1 <= j <= ny, -1 <= i <= nx.
__device__ __forceinline__ T quad_x(const T* __restrict__ row, int nx, int i)
{
    if (i < 0) return 3.0 * row[0] - 3.0 * row[1] + row[2];
    if (i >= nx) return 3.0 * row[nx - 1] - 3.0 * row[nx - 2] + row[nx - 3];
    return row[i];
}

__device__ __forceinline__ T quad_xy(const T* __restrict__ phi, int nx, int ny, int j, int i)
{
    if (j < 0)
        return 3.0 * quad_x(phi, nx, i) - 3.0 * quad_x(phi + nx, nx, i)
               + quad_x(phi + 2 * (long long)nx, nx, i);
    if (j >= ny)
        return 3.0 * quad_x(phi + (long long)(ny - 1) * nx, nx, i)
               - 3.0 * quad_x(phi + (long long)(ny - 2) * nx, nx, i)
               + quad_x(phi + (long long)(ny - 3) * nx, nx, i);
    return quad_x(phi + (long long)j * nx, nx, i);
}

// curvature: kappa = (pxx py^2 - 2 px py pxy + pyy px^2) / |grad phi|^3 from
// central differences, |grad phi| floored at 1e-8, kappa clipped to +-kmax.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_ls_curvature(
    const T* __restrict__ phi, T* __restrict__ out, const int nx, const int ny,
    const T two_hx, const T two_hy, const T hx2, const T hy2, const T four_hxhy, const T kmax)
{
    BF_CELLS(nx, ny) {
        const long long c = (long long)j * nx + i;
        const T cc = phi[c];
        const T e = quad_xy(phi, nx, ny, j, i + 1), w = quad_xy(phi, nx, ny, j, i - 1);
        const T n = quad_xy(phi, nx, ny, j + 1, i), s = quad_xy(phi, nx, ny, j - 1, i);
        const T ne = quad_xy(phi, nx, ny, j + 1, i + 1), nw = quad_xy(phi, nx, ny, j + 1, i - 1);
        const T se = quad_xy(phi, nx, ny, j - 1, i + 1), sw = quad_xy(phi, nx, ny, j - 1, i - 1);
        // Nine values of one bit pattern (a flat stretch, such as the level
        // set past CLSVOF's band): every difference is +0, and so is kappa
        // (the formula's own value there), without its divisions.
        const long long bits = __double_as_longlong(cc);
        if (kmax > 0.0 && __double_as_longlong(e) == bits && __double_as_longlong(w) == bits
            && __double_as_longlong(n) == bits && __double_as_longlong(s) == bits
            && __double_as_longlong(ne) == bits && __double_as_longlong(nw) == bits
            && __double_as_longlong(se) == bits && __double_as_longlong(sw) == bits
            && fabs(cc) < 1e300) {     // (2 cc finite: the formula gives +0)
            out[c] = 0.0;
            continue;
        }
        const T px = (e - w) / two_hx;
        const T py = (n - s) / two_hy;
        const T pxx = (e - 2.0 * cc + w) / hx2;
        const T pyy = (n - 2.0 * cc + s) / hy2;
        const T pxy = (ne - nw - se + sw) / four_hxhy;
        const T g = np_max(sqrt(px * px + py * py), 1e-8);
        const T kappa = (pxx * py * py - 2.0 * px * py * pxy + pyy * px * px) / (g * g * g);
        out[c] = np_clip(kappa, -kmax, kmax);
    }
}
#endif

// smooth: one pass of the separable [1, 2, 1] / 4 filter, along x then y,
// the indices clamped to the grid (levelset.smooth's edge padding).
__device__ __forceinline__ T smooth_row(const T* __restrict__ row, int nx, int i)
{
    const T w = row[i > 0 ? i - 1 : 0], e = row[i < nx - 1 ? i + 1 : nx - 1];
    return 0.25 * (w + 2.0 * row[i] + e);
}

#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_ls_smooth(
    const T* __restrict__ phi, T* __restrict__ out, const int nx, const int ny)
{
    BF_CELLS(nx, ny) {
        const T s = smooth_row(phi + (long long)(j > 0 ? j - 1 : 0) * nx, nx, i);
        const T m = smooth_row(phi + (long long)j * nx, nx, i);
        const T n = smooth_row(phi + (long long)(j < ny - 1 ? j + 1 : ny - 1) * nx, nx, i);
        out[(long long)j * nx + i] = 0.25 * (s + 2.0 * m + n);
    }
}
#endif

// --------------------------------------------------------------------------
// bubble_diagnostics: six sums, per block then by one block, in fixed order.
// --------------------------------------------------------------------------

#define BF_NQ 6   // sum w, w x, w y, w v_c, contour length, contour area / (hx hy)

// Area (in units of hx hy) of the polygon of the square's included vertices,
// counter-clockwise from corner a (_contour_area's polygon_area).
__device__ __forceinline__ T polygon_area(const bool* inc, const T* px, const T* py)
{
    T lx = 0.0, ly = 0.0;
#pragma unroll
    for (int k = 0; k < 8; ++k)
        if (inc[k]) { lx = px[k]; ly = py[k]; }
    T qx[8], qy[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        if (inc[k]) { lx = px[k]; ly = py[k]; }
        qx[k] = lx;
        qy[k] = ly;
    }
    T twice = 0.0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const int m = (k + 1) & 7;
        twice = twice + qx[k] * qy[m] - qx[m] * qy[k];
    }
    return 0.5 * twice;
}

__device__ __forceinline__ T segment(T x0, T y0, T x1, T y1)
{
    return sqrt(sq(x1 - x0) + sq(y1 - y0));
}

__device__ __forceinline__ T crossing(T f, T g, bool crossed)
{
    return crossed ? f / (f - g) : 0.0;
}

// Marching square with corners a = (j, i), b = (j, i+1), c = (j+1, i+1),
// d = (j+1, i), lower-left centre (xs, ys): its contour length and gas area.
__device__ void square_sums(T a, T b, T c, T d, T xs, T ys, T hx, T hy, T* length, T* gas)
{
    const bool la = a >= 0, lb = b >= 0, lc = c >= 0, ld = d >= 0;
    const bool cr0 = la != lb, cr1 = lb != lc, cr2 = ld != lc, cr3 = la != ld;
    const int count = (int)cr0 + (int)cr1 + (int)cr2 + (int)cr3;
    if (count == 0) {                 // no crossing: all liquid or all gas
        *length = 0.0;
        *gas = la ? 0.0 : 1.0;
        return;
    }
    const T t0 = crossing(a, b, cr0), t1 = crossing(b, c, cr1);
    const T t2 = crossing(d, c, cr2), t3 = crossing(a, d, cr3);
    const T X[4] = {xs + t0 * hx, xs + hx, xs + t2 * hx, xs};
    const T Y[4] = {ys, ys + t1 * hy, ys + hy, ys + t3 * hy};
    const bool two = count == 2, four = count == 4;
    const bool centre_like_a = ((a + b + c + d) >= 0) == la;
    const bool cut_bd = four && centre_like_a, cut_ac = four && !centre_like_a;
    const int P[6] = {0, 2, 0, 1, 0, 1}, Q[6] = {1, 3, 3, 2, 2, 3};
    const bool M[6] = {(two && cr0 && cr1) || cut_bd, (two && cr2 && cr3) || cut_bd,
                       (two && cr0 && cr3) || cut_ac, (two && cr1 && cr2) || cut_ac,
                       two && cr0 && cr2, two && cr1 && cr3};
    T len = 0.0;
#pragma unroll
    for (int k = 0; k < 6; ++k)
        if (M[k]) len += segment(X[P[k]], Y[P[k]], X[Q[k]], Y[Q[k]]);
    *length = len;
    const T px[8] = {0.0, t0, 1.0, 1.0, 1.0, t2, 0.0, 0.0};
    const T py[8] = {0.0, 0.0, 0.0, t1, 1.0, 1.0, 1.0, t3};
    const bool gas_in[8] = {!la, cr0, !lb, cr1, !lc, cr2, !ld, cr3};
    const bool liquid_in[8] = {la, cr0, lb, cr1, lc, cr2, ld, cr3};
    if (four && (a + b + c + d) >= 0) *gas = 1.0 - polygon_area(liquid_in, px, py);
    else                               *gas = polygon_area(gas_in, px, py);
}

// Per-block sums of the six quantities: partial[k * gridDim.x + block].
// w = 1 - H_eps(phi) (mesh.levelset.heaviside), v_c the cell-centre v.
// The cells of the first ny of phi's rows rows are summed, the lattice
// squares between any two of its rows; j0 is the first row's in the grid
// (a rank's slab: rows = ny + 1 with the next slab's first row above).
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_ls_diagnostics_partial(
    const T* __restrict__ phi, const T* __restrict__ v, T* __restrict__ partial,
    const int nx, const int ny, const int rows, const int j0, const T hx, const T hy,
    const T eps)
{
    __shared__ T shm[32];
    T acc[BF_NQ] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    const long long n = (long long)nx * ny;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(c % nx), j = (int)(c / nx);
        const T q = phi[c];
        const T H = bf_heaviside(q, eps);
        const T w = 1.0 - H;
        acc[0] += w;
        acc[1] += w * (((T)i + 0.5) * hx);
        acc[2] += w * (((T)(j0 + j) + 0.5) * hy);
        acc[3] += w * (0.5 * (v[c] + v[c + nx]));
        if (i < nx - 1 && j < rows - 1) {
            T length, gas;
            square_sums(q, phi[c + 1], phi[c + nx + 1], phi[c + nx],
                        ((T)i + 0.5) * hx, ((T)(j0 + j) + 0.5) * hy, hx, hy, &length, &gas);
            acc[4] += length;
            acc[5] += gas;
        }
    }
    block_sum<BF_NQ>(acc, shm);
    if (threadIdx.x == 0)
        for (int k = 0; k < BF_NQ; ++k) partial[(long long)k * gridDim.x + blockIdx.x] = acc[k];
}
#endif

// The six totals from the per-block sums (one block).
extern "C" __global__ void bf_ls_diagnostics_final(
    const T* __restrict__ partial, const int nblocks, T* __restrict__ out)
{
    __shared__ T shm[32];
    for (int k = 0; k < BF_NQ; ++k) {
        const T s = block_sum_array(partial + (long long)k * nblocks, nblocks, shm);
        if (threadIdx.x == 0) out[k] = s;
    }
}
