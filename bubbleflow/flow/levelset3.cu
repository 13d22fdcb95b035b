// Level-set kernels of the flow in 3-D (bubbleflow.flow.levelset; twins:
// advect, curvature, smooth): the 2-D kernels' file and the 3-D ones.  A file
// of its own so that a 2-D run compiles none of it.
// The 2-D source's shared device code and kernels, without its 2-D-only kernels.
#define BF_WITHOUT_2D_KERNELS
#include "levelset.cu"

// --------------------------------------------------------------------------
// 3-D: cells (k, j, i) stored plane after plane, p = (k * ny + j) * nx + i.
// --------------------------------------------------------------------------

// advect in 3-D: as bf_ls_advect_stage with w (nz + 1, ny, nx) and the z sweep;
// u (nz, ny, nx + 1), v (nz, ny + 1, nx); the inverse spacings.
extern "C" __global__ void bf_ls_advect_stage3(
    const T* __restrict__ base, const T* __restrict__ p, const T* __restrict__ u,
    const T* __restrict__ v, const T* __restrict__ w, T* __restrict__ out, const int nx,
    const int ny, const int nz, const T inv_hx, const T inv_hy, const T inv_hz, const T dt,
    const T floor_, const int stage)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long c = (long long)k * plane + (long long)j * nx + i;
        const long long fu = ((long long)k * ny + j) * (nx + 1) + i;
        const long long fv = ((long long)k * (ny + 1) + j) * nx + i;
        const T uc = 0.5 * (u[fu] + u[fu + 1]);
        const T vc = 0.5 * (v[fv] + v[fv + nx]);
        const T wc = 0.5 * (w[c] + w[c + plane]);
        T e[6];
        differences(p + (c - i), 1, nx, i, inv_hx, e);
        const T px = weno_upwind(e, uc > 0, floor_);
        differences(p + (long long)k * plane + i, nx, ny, j, inv_hy, e);
        const T py = weno_upwind(e, vc > 0, floor_);
        differences(p + (long long)j * nx + i, plane, nz, k, inv_hz, e);
        const T pz = weno_upwind(e, wc > 0, floor_);
        const T r = -(uc * px + vc * py + wc * pz);
        out[c] = rk3_stage(stage, base[c], p[c], dt, r);
    }
}

// reinitialize in 3-D: bf_ls_reinit_setup with the z neighbours
// (levelset._interface_cells, levelset._subcell_distance): per cell the
// smoothed sign S, or next to the interface the distance estimate D, and
// the flags (next to the interface, S > 0, phi0 > 0, phi0 < 0).
extern "C" __global__ void bf_ls_reinit_setup3(
    const T* __restrict__ phi0, T* __restrict__ coef, signed char* __restrict__ flags,
    const int nx, const int ny, const int nz, const T hx, const T hy, const T hz, const T hh,
    const T tiny)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long c = (long long)k * plane + (long long)j * nx + i;
        const T q = phi0[c];
        bool near = q == 0;
        if (i > 0) near = near || q * phi0[c - 1] <= 0;
        if (i < nx - 1) near = near || phi0[c + 1] * q <= 0;
        if (j > 0) near = near || q * phi0[c - nx] <= 0;
        if (j < ny - 1) near = near || phi0[c + nx] * q <= 0;
        if (k > 0) near = near || q * phi0[c - plane] <= 0;
        if (k < nz - 1) near = near || phi0[c + plane] * q <= 0;
        const T S = q / sqrt(q * q + hh);
        T value = S;
        if (near) {
            const T* row = phi0 + (c - i);
            const T e = lin_at(row, 1, nx, i + 1), w = lin_at(row, 1, nx, i - 1);
            const T* column = phi0 + (long long)k * plane + i;
            const T n = lin_at(column, nx, ny, j + 1), s = lin_at(column, nx, ny, j - 1);
            const T* pillar = phi0 + (long long)j * nx + i;
            const T u = lin_at(pillar, plane, nz, k + 1), d = lin_at(pillar, plane, nz, k - 1);
            const T central = sqrt(sq((e - w) / (2.0 * hx)) + sq((n - s) / (2.0 * hy))
                                   + sq((u - d) / (2.0 * hz)));
            T g = np_max(central, fabs(e - q) / hx);
            g = np_max(g, fabs(q - w) / hx);
            g = np_max(g, fabs(n - q) / hy);
            g = np_max(g, fabs(q - s) / hy);
            g = np_max(g, fabs(u - q) / hz);
            g = np_max(g, fabs(q - d) / hz);
            value = q / np_max(g, tiny);
        }
        coef[c] = value;
        flags[c] = (signed char)((near ? 1 : 0) | (S > 0 ? 2 : 0) | (q > 0 ? 4 : 0)
                                 | (q < 0 ? 8 : 0));
    }
}

// reinitialize in 3-D: one RK stage of phi_tau = -S (|grad phi|_Godunov - 1),
// the subcell fix -(sign(phi0) |phi| - D) / hmin next to the interface
// (bf_ls_reinit_stage with the z sweep).
extern "C" __global__ void bf_ls_reinit_stage3(
    const T* __restrict__ base, const T* __restrict__ p, const T* __restrict__ coef,
    const signed char* __restrict__ flags, T* __restrict__ out, const int nx, const int ny,
    const int nz, const T hx, const T hy, const T hz, const T hmin, const T dtau,
    const T floor_, const int stage)
{
    const T inv_h[3] = {1.0 / hx, 1.0 / hy, 1.0 / hz};
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long c = (long long)k * plane + (long long)j * nx + i;
        const int fl = flags[c];
        const T pc = p[c];
        T r;
        if (fl & 1) {
            r = reinit_subcell_rate(fl, pc, coef[c], hmin);
        } else {
            // Per axis the Godunov term of phi0's side, summed x, y, z.
            const T* line[3] = {p + (c - i), p + (long long)k * plane + i, p + (long long)j * nx + i};
            const long long stride[3] = {1, nx, plane};
            const int n[3] = {nx, ny, nz}, at[3] = {i, j, k};
            T g2 = 0.0;
#pragma unroll
            for (int a = 0; a < 3; ++a) {
                T e[6];
                differences(line[a], stride[a], n[a], at[a], inv_h[a], e);
                const T back = weno_minus(e, floor_), fwd = weno_plus(e, floor_);
                const T term = (fl & 2) ? np_max(sq(np_max(back, 0.0)), sq(np_min(fwd, 0.0)))
                                        : np_max(sq(np_min(back, 0.0)), sq(np_max(fwd, 0.0)));
                g2 = a == 0 ? term : g2 + term;
            }
            r = -coef[c] * (sqrt(g2) - 1.0);
        }
        out[c] = rk3_stage(stage, base[c], pc, dtau, r);
    }
}

// The field with one ghost layer of quadratic extrapolation along x, then y,
// then z (levelset.curvature's padding): cell (k, j, i), each index from -1 to n.
__device__ __noinline__ T quad_xyz(const T* __restrict__ phi, int nx, int ny, int nz, int k,
                                      int j, int i)
{
    const long long plane = (long long)nx * ny;
    if (k < 0)
        return 3.0 * quad_xy(phi, nx, ny, j, i) - 3.0 * quad_xy(phi + plane, nx, ny, j, i)
               + quad_xy(phi + 2 * plane, nx, ny, j, i);
    if (k >= nz)
        return 3.0 * quad_xy(phi + (long long)(nz - 1) * plane, nx, ny, j, i)
               - 3.0 * quad_xy(phi + (long long)(nz - 2) * plane, nx, ny, j, i)
               + quad_xy(phi + (long long)(nz - 3) * plane, nx, ny, j, i);
    return quad_xy(phi + (long long)k * plane, nx, ny, j, i);
}

// curvature in 3-D: levelset._numerator_any's sum over the axes, then the
// cross terms of the pairs (x, y), (x, z), (y, z); two_h[a] = 2 h_a, h2[a] =
// h_a h_a, four_hh = 4 hx hy, 4 hx hz, 4 hy hz.
extern "C" __global__ void bf_ls_curvature3(
    const T* __restrict__ phi, T* __restrict__ out, const int nx, const int ny, const int nz,
    const T two_hx, const T two_hy, const T two_hz, const T hx2, const T hy2, const T hz2,
    const T four_hxhy, const T four_hxhz, const T four_hyhz, const T kmax)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long c = ((long long)k * ny + j) * nx + i;
        const T cc = phi[c];
        // The 18 neighbours the stencil reads, (dk, dj, di).  Away from the
        // walls each is a cell of the grid, read directly in one branch, so
        // that every load is issued before the first is used; at the walls
        // quad_xyz gives them (the same values, through its branches).
        const int off[18][3] = {{0, 0, 1}, {0, 0, -1}, {0, 1, 0}, {0, -1, 0}, {1, 0, 0},
                                {-1, 0, 0}, {0, 1, 1}, {0, 1, -1}, {0, -1, 1}, {0, -1, -1},
                                {1, 0, 1}, {1, 0, -1}, {-1, 0, 1}, {-1, 0, -1}, {1, 1, 0},
                                {1, -1, 0}, {-1, 1, 0}, {-1, -1, 0}};
        T q[18];
        if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1 && k > 0 && k < nz - 1) {
#pragma unroll
            for (int n = 0; n < 18; ++n)
                q[n] = phi[c + off[n][0] * plane + off[n][1] * (long long)nx + off[n][2]];
        } else {
#pragma unroll
            for (int n = 0; n < 18; ++n)
                q[n] = quad_xyz(phi, nx, ny, nz, k + off[n][0], j + off[n][1], i + off[n][2]);
        }
        // Nineteen values of one bit pattern (a flat stretch, such as the
        // level set past CLSVOF's band): every difference is +0, and so is
        // kappa (the formula's own value there), without its divisions.
        const long long bits = __double_as_longlong(cc);
        bool flat = kmax > 0.0 && fabs(cc) < 1e300;     // (2 cc finite: the formula gives +0)
#pragma unroll
        for (int n = 0; n < 18; ++n) flat = flat && __double_as_longlong(q[n]) == bits;
        if (flat) {
            out[c] = 0.0;
            continue;
        }
        const T xp = q[0], xm = q[1], yp = q[2], ym = q[3], zp = q[4], zm = q[5];
        const T px = (xp - xm) / two_hx, py = (yp - ym) / two_hy, pz = (zp - zm) / two_hz;
        const T pxx = (xp - 2.0 * cc + xm) / hx2;
        const T pyy = (yp - 2.0 * cc + ym) / hy2;
        const T pzz = (zp - 2.0 * cc + zm) / hz2;
        const T pxy = (q[6] - q[7] - q[8] + q[9]) / four_hxhy;
        const T pxz = (q[10] - q[11] - q[12] + q[13]) / four_hxhz;
        const T pyz = (q[14] - q[15] - q[16] + q[17]) / four_hyhz;
        T numerator = pxx * (py * py + pz * pz);
        numerator = numerator + pyy * (px * px + pz * pz);
        numerator = numerator + pzz * (px * px + py * py);
        numerator = numerator - 2.0 * px * py * pxy;
        numerator = numerator - 2.0 * px * pz * pxz;
        numerator = numerator - 2.0 * py * pz * pyz;
        const T g = np_max(sqrt(px * px + py * py + pz * pz), 1e-8);
        out[c] = np_clip(numerator / (g * g * g), -kmax, kmax);
    }
}

// smooth in 3-D: one pass along x, then y, then z, the indices clamped.
__device__ __forceinline__ T smooth_plane(const T* __restrict__ plane, int nx, int ny, int j,
                                          int i)
{
    const T s = smooth_row(plane + (long long)(j > 0 ? j - 1 : 0) * nx, nx, i);
    const T m = smooth_row(plane + (long long)j * nx, nx, i);
    const T n = smooth_row(plane + (long long)(j < ny - 1 ? j + 1 : ny - 1) * nx, nx, i);
    return 0.25 * (s + 2.0 * m + n);
}

// A thread walks `run` cells up a column, keeping the x-y filtered values
// of the planes below, at and above the cell: one new plane a cell.  Grid
// rows: (run r, row j) pairs, r * ny + j.
extern "C" __global__ void bf_ls_smooth3(
    const T* __restrict__ phi, T* __restrict__ out, const int nx, const int ny, const int nz,
    const int run)
{
    const long long plane = (long long)nx * ny;
    const int runs = (nz + run - 1) / run;
    for (int r_ = blockIdx.y * blockDim.y + threadIdx.y; r_ < ny * runs;
         r_ += gridDim.y * blockDim.y)
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nx;
             i += gridDim.x * blockDim.x) {
            const int r = r_ / ny, j = r_ - r * ny;
            const int k0 = r * run, k1 = k0 + run < nz ? k0 + run : nz;
            T below = smooth_plane(phi + (long long)(k0 > 0 ? k0 - 1 : 0) * plane, nx, ny, j, i);
            T here = smooth_plane(phi + (long long)k0 * plane, nx, ny, j, i);
            for (int k = k0; k < k1; ++k) {
                const T above = smooth_plane(phi + (long long)(k < nz - 1 ? k + 1 : nz - 1) * plane,
                                             nx, ny, j, i);
                out[(long long)k * plane + (long long)j * nx + i] = 0.25 * (below + 2.0 * here + above);
                below = here;
                here = above;
            }
        }
}

// bubble_measures.VolumeMeasure's six sums in 3-D (sharp moments): per block,
// then bf_ls_diagnostics_final.  w = (4 (1 - H_eps) - (1 - H_2eps)) / 3, the
// co-area integrand delta_eps(phi) |grad phi| with the walls' linear ghosts,
// the moments w x, w y, w z and w w_c (w_c the cell-centre vertical velocity).
__device__ __forceinline__ T gas_weight(T q, T eps)
{
    return 1.0 - bf_heaviside(q, eps);
}

// The central difference along one axis at index i of n (n >= 2), the walls'
// ghosts extrapolated linearly (padding.pad_linear).
__device__ __forceinline__ T linear_central(const T* __restrict__ f, long long c, long long s,
                                            int i, int n, T two_h)
{
    const T q = f[c];
    const T lo = i > 0 ? f[c - s] : q - (f[c + s] - q) * 1.0;
    const T hi = i < n - 1 ? f[c + s] : q + (q - f[c - s]) * 1.0;
    return (hi - lo) / two_h;
}

// The cells of nz planes are summed, phi's from plane kb of its nzw (a
// rank's slab: the neighbours' planes around it, kb = 1 with one below);
// k0 is the first summed plane's in the grid, w the summed planes' faces.
extern "C" __global__ void bf_ls_diagnostics3_partial(
    const T* __restrict__ phi, const T* __restrict__ w, T* __restrict__ partial,
    const int nx, const int ny, const int nz, const int nzw, const int kb, const int k0,
    const T hx, const T hy, const T hz, const T eps, const T eps2)
{
    __shared__ T shm[32];
    T acc[BF_NQ] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    const long long plane = (long long)nx * ny;
    const long long n = plane * nz;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    BfCellWalk at(first, stride, nx, ny);
    for (long long c = first; c < n; c += stride, at.next()) {
        const int k = at.k, j = at.j, i = at.i;
        const long long cw = c + (long long)kb * plane;
        const T q = phi[cw];
        const T g = (4.0 * gas_weight(q, eps) - gas_weight(q, eps2)) / 3.0;
        const T t = q / eps;
        // The contour's term is zero outside the smoothed delta's band: its
        // gradient (six neighbours' loads) is read only inside.  A cell not
        // finite makes the sum NaN, as the product with its neighbours' would.
        if (fabs(t) < 1.0) {
            const T dx = linear_central(phi, cw, 1, i, nx, 2.0 * hx);
            const T dy = linear_central(phi, cw, nx, j, ny, 2.0 * hy);
            const T dz = linear_central(phi, cw, plane, kb + k, nzw, 2.0 * hz);
            const T grad2 = dx * dx + dy * dy + dz * dz;
            const T delta = 0.5 / eps * (1.0 + cos(BF_PI * t));
            acc[1] += delta * sqrt(grad2);
        } else if (!isfinite(q)) {
            acc[1] += q - q;
        }
        acc[0] += g;
        acc[2] += g * (((T)i + 0.5) * hx);
        acc[3] += g * (((T)j + 0.5) * hy);
        acc[4] += g * (((T)(k0 + k) + 0.5) * hz);
        acc[5] += g * (0.5 * (w[c] + w[c + plane]));
    }
    block_sum<BF_NQ>(acc, shm);
    if (threadIdx.x == 0)
        for (int q = 0; q < BF_NQ; ++q) partial[(long long)q * gridDim.x + blockIdx.x] = acc[q];
}
