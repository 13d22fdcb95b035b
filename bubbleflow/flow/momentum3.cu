// Momentum kernels of the flow step in 3-D (bubbleflow.flow.momentum;
// twins: fluid_properties_3d, provisional_velocity_3d, divergence_3d,
// correct_velocity_3d, advection_terms_3d, implicit_rhs_3d,
// implicit_velocity_3d): the 2-D kernels' file and the 3-D ones.  A file of
// its own so that a 2-D run compiles none of it.
// The 2-D source's shared device code and kernels, without its 2-D-only kernels.
#define BF_WITHOUT_2D_KERNELS
#include "momentum.cu"

// ---------------------------------------------------------------------------
// 3-D.  Cells (k, j, i) plane after plane; grid axis a (x, y, z) is array
// axis 2 - a.  Component a's faces have one more entry along its axis (u
// (nz, ny, nx + 1), v (nz, ny + 1, nx), w (nz + 1, ny, nx)), its interior
// faces one fewer than the cells.  Indices per array axis: at[0] = k (z),
// at[1] = j (y), at[2] = i (x).
// ---------------------------------------------------------------------------

// The flat index of entry at[] of an n[0] x n[1] x n[2] array.
__device__ __forceinline__ long long get3_index(const int* n, const int* at)
{
    return ((long long)at[0] * n[1] + at[1]) * n[2] + at[2];
}

// Entry at[] of an n[0] x n[1] x n[2] array.
__device__ __forceinline__ T get3(const T* __restrict__ f, const int* n, const int* at)
{
    return f[get3_index(n, at)];
}

// at[] with at[k] replaced by x.
__device__ __forceinline__ T get3_at(const T* __restrict__ f, const int* n, const int* at, int k,
                                     int x)
{
    int q[3] = {at[0], at[1], at[2]};
    q[k] = x;
    return get3(f, n, q);
}

// H, rho, mu at the cells and the interior face densities of the three axes
// (bf_mom_properties in 3-D).
extern "C" __global__ void bf_mom3_properties(
    const T* __restrict__ phi, T* __restrict__ H, T* __restrict__ rho, T* __restrict__ mu,
    T* __restrict__ rho_x, T* __restrict__ rho_y, T* __restrict__ rho_z, const int nx,
    const int ny, const int nz, const T eps, const T rho_g, const T drho, const T mu_g,
    const T dmu, const int rule)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long c = (long long)k * plane + (long long)j * nx + i;
        const T q = phi[c];
        const T r = cell_properties(q, c, eps, rho_g, drho, mu_g, dmu, H, rho, mu);
        if (i < nx - 1)
            rho_x[((long long)k * ny + j) * (nx - 1) + i] =
                face_density(q, phi[c + 1], r, eps, rho_g, drho, rule);
        if (j < ny - 1)
            rho_y[((long long)k * (ny - 1) + j) * nx + i] =
                face_density(q, phi[c + nx], r, eps, rho_g, drho, rule);
        if (k < nz - 1)
            rho_z[c] = face_density(q, phi[c + plane], r, eps, rho_g, drho, rule);
    }
}

// The strides (per array axis) of a 3-D array of nc[0] x nc[1] x nc[2]
// cells with `extra` more entries along array axis kx (a component's faces:
// 1; its interior faces: -1; the cells: 0).
__device__ __forceinline__ void strides3(const int* nc, int kx, int extra, long long* s)
{
    const int n1 = nc[1] + (kx == 1 ? extra : 0), n2 = nc[2] + (kx == 2 ? extra : 0);
    s[0] = (long long)n1 * n2;
    s[1] = n2;
    s[2] = 1;
}

// The flat index of at[] under strides s.
__device__ __forceinline__ long long flat3(const long long* s, const int* at)
{
    return at[0] * s[0] + at[1] * s[1] + at[2];
}

// The edge below (s = 0) or above (s = 1) face at[] of component `axis`
// (its index among all the component's faces; lo and hi its cells, sc the
// cells' strides, nc their shape) in the plane of grid axis b: the edge's
// viscosity, the mean of its four cells clamped at the walls
// (viscosity.edge_viscosity's order), and component b's difference across
// it along the face's axis, dv = u_b(hi side) - u_b(lo side).
template <int axis>
__device__ __forceinline__ void mom3_edge(const T* __restrict__ mu, const T* __restrict__ ub,
                                          const int b, const int* nc, const int* at,
                                          const long long lo, const long long hi,
                                          const long long* sc, const int s, T* mu_e, T* dv)
{
    constexpr int ka = 2 - axis;
    const int kb = 2 - b;
    const int cb = at[kb];
    const long long elo = (s == 0 && cb > 0) ? -sc[kb] : 0;
    const long long ehi = (s == 1 && cb < nc[kb] - 1) ? sc[kb] : 0;
    *mu_e = 0.25 * (mu[lo + elo] + mu[lo + ehi] + mu[hi + elo] + mu[hi + ehi]);
    long long sb[3];
    strides3(nc, kb, 1, sb);
    const long long ge = flat3(sb, at) + (s == 1 ? sb[kb] : 0);   // (fa, cb + s) of component b
    *dv = ub[ge] - ub[ge - sb[ka]];
}

// (u . grad) u_a at face at[] of component `axis` (at[2 - axis] its index
// among all its faces, an interior one; f its flat index, sa the strides of
// the component's faces, nc the cells' shape): momentum.advection_terms, the
// axes in order, the own one with its faces' neighbours, the others with the
// mean of the four b faces around and the walls' ghosts signs[2 b] u,
// signs[2 b + 1] u; r and mu_f the face's density and mean viscosity.  Each
// entry is read at the face's flat index plus strides: a handful of index
// products a face, not one a read.
template <int axis>
__device__ __forceinline__ T mom3_advection(
    const T* const* vel, const T* h, const T* inv_h, const T* signs, const int* nc,
    const int* at, const long long f, const long long* sa, const T centre, const T r,
    const T mu_f)
{
    constexpr int ka = 2 - axis;
    const T* ua = vel[axis];
    T adv = 0.0;
#pragma unroll
    for (int b = 0; b < 3; ++b) {
        T minus, plus, speed;
        const int kb = 2 - b;
        if (b == axis) {
            speed = centre;
            minus = ua[f - sa[ka]];
            plus = ua[f + sa[ka]];
        } else {
            long long sb[3];
            strides3(nc, kb, 1, sb);
            const T* ub = vel[b];
            const long long g = flat3(sb, at) - sb[ka];      // (fa - 1, cb) of component b
            const int cb = at[kb];
            speed = 0.25 * (ub[g] + ub[g + sb[ka]] + ub[g + sb[kb]] + ub[g + sb[ka] + sb[kb]]);
            minus = cb > 0 ? ua[f - sa[kb]] : signs[2 * b] * centre;
            plus = cb < nc[kb] - 1 ? ua[f + sa[kb]] : signs[2 * b + 1] * centre;
        }
        const T term = speed * hybrid(minus, centre, plus, speed, h[b], inv_h[b], r, mu_f);
        adv = b == 0 ? term : adv + term;
    }
    return adv;
}

// u* of component `axis` at its face (k, j, i) (explicit viscosity; a wall
// face copied): momentum.provisional_velocity in 3-D, the advection
// (advection_terms), the viscous stress (viscous_forces: the normal stress,
// then the shear of each other axis in order), the interface force (with
// forces) and reduced gravity's density mismatch on the vertical axis (reduced
// != 0), one after the other.  vel[b]: component b; rho_f, coef: the interior
// faces of `axis`; signs[2 b], signs[2 b + 1]: the walls' ghost signs of axis
// b, low and high; gravity 0 for reduced gravity.
// The axis is a template parameter so that every index array is indexed by
// constants and stays in registers.
template <int axis>
__device__ __forceinline__ void mom3_explicit_face(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    const T* __restrict__ mu, const T* __restrict__ H, const T* __restrict__ rho_f,
    const T* __restrict__ coef, T* __restrict__ out, const int nx, const int ny, const int nz,
    const T dt, const T hx, const T hy, const T hz, const T inv_hx, const T inv_hy,
    const T inv_hz, const T s0, const T s1, const T s2, const T s3, const T s4, const T s5,
    const T gravity, const int forces, const T reduced, const T rho_g, const T rho_l,
    const int k, const int j, const int i)
{
    const T* vel[3] = {u, v, w};
    const T h[3] = {hx, hy, hz};
    // Multiplied by the inverse spacings (the host's 1 / h) where the array
    // code divides (a float64 division is a dozen instructions): equal to
    // it to rounding.
    const T inv_h[3] = {inv_hx, inv_hy, inv_hz};
    const T signs[6] = {s0, s1, s2, s3, s4, s5};
    constexpr int ka = 2 - axis;
    const int nc[3] = {nz, ny, nx};
    long long sa[3], sc[3], si[3];       // strides: the faces, the cells, the interior faces
    strides3(nc, ka, 1, sa);
    strides3(nc, ka, 0, sc);
    strides3(nc, ka, -1, si);
    const T* ua = vel[axis];
    const T inv_ha = inv_h[axis];
    const int at[3] = {k, j, i};
    const long long f = flat3(sa, at);
    const int fa = at[ka];
    if (fa == 0 || fa == nc[ka]) {
        out[f] = ua[f];
        return;
    }
    // The cell above the face (hi) and below it (lo); the interior face.
    const long long hi = flat3(sc, at), lo = hi - sc[ka];
    const long long inner = flat3(si, at) - si[ka];
    const T centre = ua[f];
    const T mu_f = 0.5 * (mu[hi] + mu[lo]);
    const T r = rho_f[inner];
    const T adv = mom3_advection<axis>(vel, h, inv_h, signs, nc, at, f, sa, centre, r, mu_f);
    // The viscous stress.
    const T txx_hi = 2 * mu[hi] * (ua[f + sa[ka]] - centre) * inv_ha;
    const T txx_lo = 2 * mu[lo] * (centre - ua[f - sa[ka]]) * inv_ha;
    T force = (txx_hi - txx_lo) * inv_ha;
#pragma unroll
    for (int b = 0; b < 3; ++b) {
        if (b == axis) continue;
        const int kb = 2 - b;
        T stress[2];
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            const int e = at[kb] + s;        // the edge below (s = 0) and above the face
            T mu_e, dv;
            mom3_edge<axis>(mu, vel[b], b, nc, at, lo, hi, sc, s, &mu_e, &dv);
            const T u_hi = e < nc[kb] ? ua[f + (s == 1 ? sa[kb] : 0)]
                                      : signs[2 * b + 1] * ua[f];
            const T u_lo = e > 0 ? ua[f - (s == 0 ? sa[kb] : 0)] : signs[2 * b] * ua[f];
            stress[s] = mu_e * ((u_hi - u_lo) * inv_h[b] + dv * inv_ha);
        }
        force = force + (stress[1] - stress[0]) * inv_h[b];
    }
    const T H_hi = H[hi], H_lo = H[lo];
    if (forces) force = force - coef[inner] * (H_hi - H_lo) * inv_ha;
    if (axis == 2 && reduced != 0) {
        const T rho_hi = rho_g + (rho_l - rho_g) * H_hi;
        const T rho_lo = rho_g + (rho_l - rho_g) * H_lo;
        force = force + reduced * ((T)0.5 * (rho_hi + rho_lo) - r);
    }
    out[f] = axis == 2 && gravity != 0 ? centre + dt * (-adv + force / r - gravity)
                                       : centre + dt * (-adv + force / r);
}

// u* of the three components on every one of their faces in one pass over
// the cells (mom3_explicit_face): a cell's thread makes the faces on its low
// side, and on its high side where that is the grid's wall.  The three
// components read the same velocities, viscosities and Heaviside about a
// cell, from L1 after the first.  Registers capped for two blocks of
// momentum3_cuda's 32 x 8 threads an SM: the compiler's own choice fits one,
// too few warps to hide the loads' latency (docs/performance.md has the
// timings).
extern "C" __global__ void __launch_bounds__(256, 2) bf_mom3_explicit(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    const T* __restrict__ mu, const T* __restrict__ H, const T* __restrict__ rho_x,
    const T* __restrict__ rho_y, const T* __restrict__ rho_z, const T* __restrict__ coef_x,
    const T* __restrict__ coef_y, const T* __restrict__ coef_z, T* __restrict__ out_u,
    T* __restrict__ out_v, T* __restrict__ out_w, const int nx, const int ny, const int nz,
    const T dt, const T hx, const T hy, const T hz, const T inv_hx, const T inv_hy,
    const T inv_hz, const T s0, const T s1, const T s2, const T s3, const T s4, const T s5,
    const T gravity, const int forces, const T reduced, const T rho_g, const T rho_l)
{
#define BF_MOM3_FACE(A, RHO, COEF, OUT, K, J, I) mom3_explicit_face<A>(u, v, w, mu, H, RHO,     \
    COEF, OUT, nx, ny, nz, dt, hx, hy, hz, inv_hx, inv_hy, inv_hz, s0, s1, s2, s3, s4, s5,    \
    gravity, forces, reduced, rho_g, rho_l, K, J, I)
    BF_CELLS3_RUNS(nx, ny, nz) {
        BF_MOM3_FACE(0, rho_x, coef_x, out_u, k, j, i);
        if (i == nx - 1) BF_MOM3_FACE(0, rho_x, coef_x, out_u, k, j, nx);
        BF_MOM3_FACE(1, rho_y, coef_y, out_v, k, j, i);
        if (j == ny - 1) BF_MOM3_FACE(1, rho_y, coef_y, out_v, k, ny, i);
        BF_MOM3_FACE(2, rho_z, coef_z, out_w, k, j, i);
        if (k == nz - 1) BF_MOM3_FACE(2, rho_z, coef_z, out_w, nz, j, i);
    }
#undef BF_MOM3_FACE
}

// The interface force's coefficients on the interior faces of the three
// axes (bf_mom_interface in 3-D); zc the cells' heights (the x and y
// faces'), zf the interior z faces'.
extern "C" __global__ void bf_mom3_interface(
    const T* __restrict__ kappa, const T* __restrict__ zc, const T* __restrict__ zf,
    T* __restrict__ cx, T* __restrict__ cy, T* __restrict__ cz, const int nx, const int ny,
    const int nz, const T sigma, const T buoyancy, const T y0, const int with_sigma,
    const int with_gravity)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long c = (long long)k * plane + (long long)j * nx + i;
        const T q = kappa[c];
        if (i < nx - 1)
            cx[((long long)k * ny + j) * (nx - 1) + i] = interface_coefficient(
                kappa[c + 1], q, zc[k], sigma, buoyancy, y0, with_sigma, with_gravity);
        if (j < ny - 1)
            cy[((long long)k * (ny - 1) + j) * nx + i] = interface_coefficient(
                kappa[c + nx], q, zc[k], sigma, buoyancy, y0, with_sigma, with_gravity);
        if (k < nz - 1)
            cz[c] = interface_coefficient(kappa[c + plane], q, zf[k], sigma, buoyancy, y0,
                                          with_sigma, with_gravity);
    }
}

// div u at the cells; with with_rhs also -div / dt (bf_mom_divergence in 3-D).
extern "C" __global__ void bf_mom3_divergence(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    T* __restrict__ div, T* __restrict__ rhs, const int nx, const int ny, const int nz,
    const T hx, const T hy, const T hz, const T dt, const int with_rhs)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long c = (long long)k * plane + (long long)j * nx + i;
        const long long U = ((long long)k * ny + j) * (nx + 1) + i;
        const long long V = ((long long)k * (ny + 1) + j) * nx + i;
        const T d = (u[U + 1] - u[U]) / hx + (v[V + nx] - v[V]) / hy + (w[c + plane] - w[c]) / hz;
        div[c] = d;
        if (with_rhs) rhs[c] = -d / dt;
    }
}

// Per-block sums of div_star^2 and of (div u)^2 over the n cells, div u made
// here and not stored: bf_mom_squares_partial of div_star and of
// bf_mom3_divergence's div, with their threads' order of the cells, so the
// same sums to the bit.  partial[k * gridDim.x + block].
extern "C" __global__ void bf_mom3_divergence_squares(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    const T* __restrict__ div_star, T* __restrict__ partial, const int nx, const int ny,
    const int nz, const T hx, const T hy, const T hz)
{
    __shared__ T shm[32];
    T acc[2] = {0.0, 0.0};
    const long long plane = (long long)nx * ny, n = plane * nz;
    const bool narrow = n <= 0xffffffffLL;     // (32-bit divisions where they reach: cheaper)
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x) {
        int i, j, k;
        if (narrow) {
            const unsigned int row = (unsigned int)c / (unsigned int)nx;
            i = (int)((unsigned int)c - row * (unsigned int)nx);
            k = (int)(row / (unsigned int)ny);
            j = (int)(row - (unsigned int)k * (unsigned int)ny);
        } else {
            const long long row = c / nx;
            i = (int)(c - row * nx);
            k = (int)(row / ny);
            j = (int)(row - (long long)k * ny);
        }
        const long long U = ((long long)k * ny + j) * (nx + 1) + i;
        const long long V = ((long long)k * (ny + 1) + j) * nx + i;
        const T d = (u[U + 1] - u[U]) / hx + (v[V + nx] - v[V]) / hy + (w[c + plane] - w[c]) / hz;
        acc[0] += div_star[c] * div_star[c];
        acc[1] += d * d;
    }
    block_sum<2>(acc, shm);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = acc[0];
        partial[gridDim.x + blockIdx.x] = acc[1];
    }
}

// The correction of component `axis` at its face (k, j, i): us - dt / rho_f
// dp/dx_a on an interior face, a wall face copied.  (A template on the axis:
// with the axis known at compile time the index arrays stay in registers, not
// on the stack.)
template <int axis>
__device__ __forceinline__ void mom3_correct_face(
    const T* __restrict__ us, const T* __restrict__ p, const T* __restrict__ rho_f,
    T* __restrict__ out, const int nx, const int ny, const int nz, const T dt, const T h,
    const int k, const int j, const int i)
{
    constexpr int ka = 2 - axis;
    const int nc[3] = {nz, ny, nx};
    int na[3] = {nz, ny, nx};
    na[ka] += 1;
    int ni[3] = {nz, ny, nx};
    ni[ka] -= 1;
    const int at[3] = {k, j, i};
    const long long f = ((long long)k * na[1] + j) * na[2] + i;
    const int fa = at[ka];
    if (fa == 0 || fa == nc[ka]) {
        out[f] = us[f];
        return;
    }
    int inner[3] = {k, j, i};
    inner[ka] = fa - 1;
    out[f] = us[f] - dt / get3(rho_f, ni, inner)
                     * (get3_at(p, nc, at, ka, fa) - get3_at(p, nc, at, ka, fa - 1)) / h;
}

// The three components corrected in one pass over the cells
// (mom3_correct_face): a cell's thread corrects the faces on its low side,
// and on its high side where that is the grid's wall, reading the pressure
// about the cell once for the three.
extern "C" __global__ void bf_mom3_correct(
    const T* __restrict__ us, const T* __restrict__ vs, const T* __restrict__ ws,
    const T* __restrict__ p, const T* __restrict__ rho_x, const T* __restrict__ rho_y,
    const T* __restrict__ rho_z, T* __restrict__ out_u, T* __restrict__ out_v,
    T* __restrict__ out_w, const int nx, const int ny, const int nz, const T dt, const T hx,
    const T hy, const T hz)
{
    BF_CELLS3(nx, ny, nz) {
        mom3_correct_face<0>(us, p, rho_x, out_u, nx, ny, nz, dt, hx, k, j, i);
        if (i == nx - 1) mom3_correct_face<0>(us, p, rho_x, out_u, nx, ny, nz, dt, hx, k, j, nx);
        mom3_correct_face<1>(vs, p, rho_y, out_v, nx, ny, nz, dt, hy, k, j, i);
        if (j == ny - 1) mom3_correct_face<1>(vs, p, rho_y, out_v, nx, ny, nz, dt, hy, k, ny, i);
        mom3_correct_face<2>(ws, p, rho_z, out_w, nx, ny, nz, dt, hz, k, j, i);
        if (k == nz - 1) mom3_correct_face<2>(ws, p, rho_z, out_w, nx, ny, nz, dt, hz, nz, j, i);
    }
}

// ------------------------------------------------------------- implicit path

// The advection (u . grad) u_a of component `axis` on its interior faces
// (momentum.advection_terms in 3-D, mom3_advection): F the interior face,
// at[] the same face among all of the component's faces.
template <int axis>
__device__ __forceinline__ void mom3_advection_faces(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    const T* __restrict__ mu, const T* __restrict__ rho_f, T* __restrict__ adv, const int nx,
    const int ny, const int nz, const T hx, const T hy, const T hz, const T inv_hx,
    const T inv_hy, const T inv_hz, const T s0, const T s1, const T s2, const T s3, const T s4,
    const T s5)
{
    const T* vel[3] = {u, v, w};
    const T h[3] = {hx, hy, hz};
    const T inv_h[3] = {inv_hx, inv_hy, inv_hz};
    const T signs[6] = {s0, s1, s2, s3, s4, s5};
    const int ka = 2 - axis;
    const int nc[3] = {nz, ny, nx};
    int ni[3] = {nz, ny, nx};
    ni[ka] -= 1;
    long long sa[3], sc[3];
    strides3(nc, ka, 1, sa);
    strides3(nc, ka, 0, sc);
    BF_CELLS3_RUNS(ni[2], ni[1], ni[0]) {
        const long long F = ((long long)k * ni[1] + j) * ni[2] + i;
        int at[3] = {k, j, i};
        at[ka] += 1;
        const long long f = flat3(sa, at), hi = flat3(sc, at);
        const T mu_f = 0.5 * (mu[hi] + mu[hi - sc[ka]]);
        adv[F] = mom3_advection<axis>(vel, h, inv_h, signs, nc, at, f, sa, vel[axis][f],
                                      rho_f[F], mu_f);
    }
}

extern "C" __global__ void bf_mom3_advection(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    const T* __restrict__ mu, const T* __restrict__ rho_f, T* __restrict__ adv, const int nx,
    const int ny, const int nz, const int axis, const T hx, const T hy, const T hz,
    const T inv_hx, const T inv_hy, const T inv_hz, const T s0, const T s1, const T s2,
    const T s3, const T s4, const T s5)
{
#define BF_MOM3_ADVECTION(A) mom3_advection_faces<A>(u, v, w, mu, rho_f, adv, nx, ny, nz, hx, \
    hy, hz, inv_hx, inv_hy, inv_hz, s0, s1, s2, s3, s4, s5)
    BF_BY_AXIS(axis, BF_MOM3_ADVECTION);
#undef BF_MOM3_ADVECTION
}

// The right-hand side of component `axis`'s implicit solve on its interior
// faces (momentum.implicit_rhs): rho_f (u_a - dt adv) + dt cross, cross the
// sum over the other axes b in order of d/dx_b (mu_e du_b/dx_a)
// (momentum.cross_viscous_forces: only interior edges, divided by the
// spacings as it divides).  at[ka] is the interior face's index: the face
// between the cells at[ka] and at[ka] + 1.
template <int axis>
__device__ __forceinline__ void mom3_implicit_rhs(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    const T* __restrict__ mu, const T* __restrict__ rho_f, const T* __restrict__ adv,
    T* __restrict__ rhs, const int nx, const int ny, const int nz, const T dt, const T hx,
    const T hy, const T hz)
{
    const T* vel[3] = {u, v, w};
    const T h[3] = {hx, hy, hz};
    const int ka = 2 - axis;
    const int nc[3] = {nz, ny, nx};
    int ni[3] = {nz, ny, nx};
    ni[ka] -= 1;
    long long sa[3], sc[3];              // strides: the faces, the cells
    strides3(nc, ka, 1, sa);
    strides3(nc, ka, 0, sc);
    BF_CELLS3_RUNS(ni[2], ni[1], ni[0]) {
        const int at[3] = {k, j, i};
        int face[3] = {k, j, i};                 // the face among all of the component's
        face[ka] += 1;
        const long long F = ((long long)k * ni[1] + j) * ni[2] + i;
        const long long lo = flat3(sc, at), hi = lo + sc[ka];    // the cells either side
        T cross = 0.0;
        bool first = true;
#pragma unroll
        for (int b = 0; b < 3; ++b) {
            if (b == axis) continue;
            T shear[2];
#pragma unroll
            for (int s = 0; s < 2; ++s) {        // the edge below (s = 0) and above the face
                T mu_e, dv;
                mom3_edge<axis>(mu, vel[b], b, nc, face, lo, hi, sc, s, &mu_e, &dv);
                shear[s] = mu_e * dv / h[axis];
            }
            const T term = (shear[1] - shear[0]) / h[b];
            cross = first ? term : cross + term;
            first = false;
        }
        const T ua = vel[axis][flat3(sa, at) + sa[ka]];
        rhs[F] = rho_f[F] * (ua - dt * adv[F]) + dt * cross;
    }
}

extern "C" __global__ void bf_mom3_implicit_rhs(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    const T* __restrict__ mu, const T* __restrict__ rho_f, const T* __restrict__ adv,
    T* __restrict__ rhs, const int nx, const int ny, const int nz, const int axis, const T dt,
    const T hx, const T hy, const T hz)
{
#define BF_MOM3_IMPLICIT_RHS(A) mom3_implicit_rhs<A>(u, v, w, mu, rho_f, adv, rhs, nx, ny, nz, \
    dt, hx, hy, hz)
    BF_BY_AXIS(axis, BF_MOM3_IMPLICIT_RHS);
#undef BF_MOM3_IMPLICIT_RHS
}

// The implicit path's u* of component `axis` on every one of its faces
// (momentum.implicit_velocity): x + dt (f / rho_f) on the interior faces, f
// the interface force -coef dH/dx_a (with forces) and, on the vertical axis,
// reduced gravity's density mismatch (reduced != 0), one after the other;
// less dt gravity on the vertical axis; the wall faces copied from w.
// inv_h*: the host's 1.0 / h, as the array code forms them.
extern "C" __global__ void bf_mom3_implicit_velocity(
    const T* __restrict__ H, const T* __restrict__ x, const T* __restrict__ w,
    const T* __restrict__ coef, const T* __restrict__ rho_f, T* __restrict__ out, const int nx,
    const int ny, const int nz, const int axis, const T dt, const T inv_hx, const T inv_hy,
    const T inv_hz, const int forces, const T gravity, const T reduced, const T rho_g,
    const T rho_l)
{
    const T inv_h = axis == 0 ? inv_hx : axis == 1 ? inv_hy : inv_hz;
    const int ka = 2 - axis;
    const int nc[3] = {nz, ny, nx};
    int na[3] = {nz, ny, nx};
    na[ka] += 1;
    int ni[3] = {nz, ny, nx};
    ni[ka] -= 1;
    const bool mismatch = axis == 2 && reduced != 0;
    BF_CELLS3_RUNS(na[2], na[1], na[0]) {
        const int at[3] = {k, j, i};
        const long long f = ((long long)k * na[1] + j) * na[2] + i;
        const int fa = at[ka];
        if (fa == 0 || fa == nc[ka]) {
            out[f] = w[f];
            continue;
        }
        int inner[3] = {k, j, i};
        inner[ka] = fa - 1;
        const long long F = get3_index(ni, inner);
        T val = x[F];
        if (forces || mismatch) {
            const T H_hi = get3_at(H, nc, at, ka, fa), H_lo = get3_at(H, nc, at, ka, fa - 1);
            T force = forces ? -coef[F] * (H_hi - H_lo) * inv_h : (T)0;
            if (mismatch) {
                const T rho_hi = rho_g + (rho_l - rho_g) * H_hi;
                const T rho_lo = rho_g + (rho_l - rho_g) * H_lo;
                const T term = reduced * ((T)0.5 * (rho_hi + rho_lo) - rho_f[F]);
                force = forces ? force + term : term;
            }
            val = val + dt * (force / rho_f[F]);
        }
        if (axis == 2 && gravity != 0) val = val - dt * gravity;
        out[f] = val;
    }
}
