// Momentum kernels of the flow step (bubbleflow.flow.momentum; twins:
// fluid_properties, step_scalars, advection_terms, interface_coefficients,
// explicit_velocity_u/_v, implicit_rhs_u/_v, implicit_velocity, divergence,
// pressure_rhs, norms, correct_velocity).  "typedef double T;" precedes this
// text.  Every formula is written in the array code's order of operations
// (compiled without FMA contraction), so a kernel gives its twin's bits (the
// sums of the norms differ by their order); where both multiply by an inverse
// spacing the inverse is 1.0 / h, formed alike.
//
// Layout: cells (j, i) row after row, c = j * nx + i; u (ny, nx + 1) on the
// vertical faces, v (ny + 1, nx) on the horizontal ones; arrays on the
// interior u faces (ny, nx - 1), on the interior v faces (ny - 1, nx).
// Ghosts across the walls mirror the tangential velocity with the sign s
// (-1 no-slip, +1 free-slip).
#include "common.cuh"
// BF_WITHOUT_2D_KERNELS (defined by the 3-D source that includes this one)
// leaves out the kernels only a 2-D grid runs: the 3-D module compiles less.

#define BF_DBL_MAX 1.7976931348623157e308

// Neither infinite nor NaN.
__device__ __forceinline__ bool bf_finite(T x) { return fabs(x) <= BF_DBL_MAX; }

// ------------------------------------------------------------------ properties

// H, rho, mu at the cells; rho_x on the interior u faces (face (j, i) between
// cells i and i + 1), rho_y on the interior v faces.  rule: 0 the level set
// (the Heaviside of the mean phi), 1 harmonic, 2 arithmetic mean of the cells.
__device__ __forceinline__ T face_density(T q, T qn, T r, T eps, T rho_g, T drho, int rule)
{
    if (rule == 0) return rho_g + drho * bf_heaviside(0.5 * (qn + q), eps);
    const T rn = rho_g + drho * bf_heaviside(qn, eps);
    if (rule == 1) return 2.0 * rn * r / (rn + r);
    return 0.5 * (rn + r);
}

// H, rho and mu (arithmetic) of cell c from its level set q; returns rho.
__device__ __forceinline__ T cell_properties(T q, long long c, T eps, T rho_g, T drho, T mu_g,
                                             T dmu, T* __restrict__ H, T* __restrict__ rho,
                                             T* __restrict__ mu)
{
    const T h = bf_heaviside(q, eps);
    const T r = rho_g + drho * h;
    H[c] = h;
    rho[c] = r;
    mu[c] = mu_g + dmu * h;
    return r;
}

#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_properties(
    const T* __restrict__ phi, T* __restrict__ H, T* __restrict__ rho, T* __restrict__ mu,
    T* __restrict__ rho_x, T* __restrict__ rho_y, const int nx, const int ny, const T eps,
    const T rho_g, const T drho, const T mu_g, const T dmu, const int rule)
{
    BF_CELLS(nx, ny) {
        const long long c = (long long)j * nx + i;
        const T q = phi[c];
        const T r = cell_properties(q, c, eps, rho_g, drho, mu_g, dmu, H, rho, mu);
        if (i < nx - 1)
            rho_x[(long long)j * (nx - 1) + i] = face_density(q, phi[c + 1], r, eps, rho_g, drho, rule);
        if (j < ny - 1)
            rho_y[c] = face_density(q, phi[c + nx], r, eps, rho_g, drho, rule);
    }
}
#endif

// ---------------------------------------------------- finite check and maxima

#define BF_NS 5   // non-finite seen, max |u|, max |v|, max |w|, max mu / rho

// Per-block maxima: partial[k * gridDim.x + block].  The arrays flat: the
// components' nu, nv, nw entries (nw = 0 in 2-D, w then unread), the cells'
// nc; the maxima are exact, so any order gives the array code's bits.
extern "C" __global__ void bf_mom_scalars_partial(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ w,
    const T* __restrict__ phi, const T* __restrict__ rho, const T* __restrict__ mu,
    T* __restrict__ partial, const long long nu, const long long nv, const long long nw,
    const long long nc, const int maxima, const int viscous)
{
    __shared__ T shm[32];
    T acc[BF_NS] = {0.0, 0.0, 0.0, 0.0, BF_NEG_INF};
    long long n = nu > nv ? nu : nv;
    n = n > nw ? n : nw;
    n = n > nc ? n : nc;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x) {
        if (k < nu) {
            const T a = u[k];
            if (!bf_finite(a)) acc[0] = 1.0;
            if (maxima) acc[1] = np_max(acc[1], fabs(a));
        }
        if (k < nv) {
            const T b = v[k];
            if (!bf_finite(b)) acc[0] = 1.0;
            if (maxima) acc[2] = np_max(acc[2], fabs(b));
        }
        if (k < nw) {
            const T c = w[k];
            if (!bf_finite(c)) acc[0] = 1.0;
            if (maxima) acc[3] = np_max(acc[3], fabs(c));
        }
        if (k < nc) {
            if (!bf_finite(phi[k])) acc[0] = 1.0;
            if (viscous) acc[4] = np_max(acc[4], mu[k] / rho[k]);
        }
    }
    block_max<BF_NS>(acc, shm);
    if (threadIdx.x == 0)
        for (int k = 0; k < BF_NS; ++k) partial[(long long)k * gridDim.x + blockIdx.x] = acc[k];
}

// [finite, max |u_a| for the ndim axes, max mu / rho] from the per-block
// maxima (one block); 0.0 for what was not asked.
extern "C" __global__ void bf_mom_scalars_final(
    const T* __restrict__ partial, const int nblocks, T* __restrict__ out, const int ndim,
    const int maxima, const int viscous)
{
    __shared__ T shm[32];
    T acc[BF_NS] = {0.0, 0.0, 0.0, 0.0, BF_NEG_INF};
    for (int b = threadIdx.x; b < nblocks; b += blockDim.x)
        for (int k = 0; k < BF_NS; ++k) acc[k] = np_max(acc[k], partial[(long long)k * nblocks + b]);
    block_max<BF_NS>(acc, shm);
    if (threadIdx.x == 0) {
        out[0] = acc[0] > 0.0 ? 0.0 : 1.0;
        for (int a = 0; a < ndim; ++a) out[1 + a] = maxima ? acc[1 + a] : 0.0;
        out[1 + ndim] = viscous ? acc[4] : 0.0;
    }
}

// ------------------------------------------------------------------ advection

// d/dx of a face velocity: central, or upwind where rho |c| h / mu > 2; only
// the one chosen is formed, multiplied by inv_h = 1 / h (0.5 inv_h for the
// central 2 h) where the array code divides: equal to it to rounding.
__device__ __forceinline__ T hybrid(T minus, T centre, T plus, T velocity, T h, T inv_h, T rho,
                                    T mu)
{
    if (rho * fabs(velocity) * h <= 2.0 * mu) return (plus - minus) * (0.5 * inv_h);
    return (velocity > 0 ? centre - minus : plus - centre) * inv_h;
}

// Thread (j, i): adv_u on the interior u face (j, i + 1) when i < nx - 1, adv_v
// on the interior v face (j + 1, i) when j < ny - 1.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_advection(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ rho_x,
    const T* __restrict__ rho_y, const T* __restrict__ mu, T* __restrict__ adv_u,
    T* __restrict__ adv_v, const int nx, const int ny, const T hx, const T hy, const T s_left,
    const T s_right, const T s_bottom, const T s_top)
{
    const long long su = nx + 1;
    const T inv_hx = 1.0 / hx, inv_hy = 1.0 / hy;
    BF_CELLS(nx, ny) {
        if (i < nx - 1) {
            const int I = i + 1;
            const long long U = (long long)j * su + I, C = (long long)j * nx + I;
            const T ui = u[U];
            const T vau = 0.25 * (v[C - 1] + v[C] + v[C + nx - 1] + v[C + nx]);
            const T mux = 0.5 * (mu[C] + mu[C - 1]);
            const T r = rho_x[(long long)j * (nx - 1) + i];
            const T dudx = hybrid(u[U - 1], ui, u[U + 1], ui, hx, inv_hx, r, mux);
            const T us_ = j > 0 ? u[U - su] : s_bottom * ui;
            const T un_ = j < ny - 1 ? u[U + su] : s_top * ui;
            const T dudy = hybrid(us_, ui, un_, vau, hy, inv_hy, r, mux);
            adv_u[(long long)j * (nx - 1) + i] = ui * dudx + vau * dudy;
        }
        if (j < ny - 1) {
            const int J = j + 1;
            const long long V = (long long)J * nx + i, U = (long long)J * su + i;
            const T vi = v[V];
            const T uav = 0.25 * (u[U - su] + u[U - su + 1] + u[U] + u[U + 1]);
            const T muy = 0.5 * (mu[V] + mu[V - nx]);
            const T r = rho_y[(long long)j * nx + i];
            const T dvdy = hybrid(v[V - nx], vi, v[V + nx], vi, hy, inv_hy, r, muy);
            const T vw = i > 0 ? v[V - 1] : s_left * vi;
            const T ve = i < nx - 1 ? v[V + 1] : s_right * vi;
            const T dvdx = hybrid(vw, vi, ve, uav, hx, inv_hx, r, muy);
            adv_v[(long long)j * nx + i] = uav * dvdx + vi * dvdy;
        }
    }
}
#endif

// -------------------------------------------------------- interface coefficients

// One face's coefficient: sigma times the mean curvature of its two cells
// (with_sigma), less buoyancy (height - y0) (with_gravity, reduced gravity).
__device__ __forceinline__ T interface_coefficient(T kappa_hi, T kappa_lo, T height, T sigma,
                                                   T buoyancy, T y0, int with_sigma,
                                                   int with_gravity)
{
    T a = 0.0;
    if (with_sigma) a = sigma * (0.5 * (kappa_hi + kappa_lo));
    if (with_gravity) {
        const T g = buoyancy * (height - y0);
        a = with_sigma ? a - g : -g;
    }
    return a;
}

// cx on the interior u faces, cy on the interior v faces.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_interface(
    const T* __restrict__ kappa, const T* __restrict__ yc, const T* __restrict__ yf,
    T* __restrict__ cx, T* __restrict__ cy, const int nx, const int ny, const T sigma,
    const T buoyancy, const T y0, const int with_sigma, const int with_gravity)
{
    BF_CELLS(nx, ny) {
        const long long c = (long long)j * nx + i;
        if (i < nx - 1)
            cx[(long long)j * (nx - 1) + i] = interface_coefficient(
                kappa[c + 1], kappa[c], yc[j], sigma, buoyancy, y0, with_sigma, with_gravity);
        if (j < ny - 1)
            cy[c] = interface_coefficient(kappa[c + nx], kappa[c], yf[j], sigma, buoyancy, y0,
                                          with_sigma, with_gravity);
    }
}
#endif

// ------------------------------------------------------------ viscous stresses

// mu at corner (J, I), 0 <= J <= ny, 0 <= I <= nx: the mean of the four
// cells around it, edge-copied at the walls (viscosity.edge_viscosity).
__device__ __forceinline__ T corner_mu(const T* __restrict__ mu, int nx, int ny, int J, int I)
{
    const long long j0 = J > 0 ? J - 1 : 0, j1 = J < ny ? J : ny - 1;
    const int i0 = I > 0 ? I - 1 : 0, i1 = I < nx ? I : nx - 1;
    return 0.25 * (mu[j0 * nx + i0] + mu[j1 * nx + i0] + mu[j0 * nx + i1] + mu[j1 * nx + i1]);
}

// u with its ghost rows: row r of (ny + 2, nx + 1), 0 <= r <= ny + 1.
__device__ __forceinline__ T u_ghost(const T* __restrict__ u, int nx, int ny, int r, int I,
                                     T s_bottom, T s_top)
{
    if (r == 0) return s_bottom * u[I];
    if (r == ny + 1) return s_top * u[(long long)(ny - 1) * (nx + 1) + I];
    return u[(long long)(r - 1) * (nx + 1) + I];
}

// v with its ghost columns: column q of (ny + 1, nx + 2), 0 <= q <= nx + 1.
__device__ __forceinline__ T v_ghost(const T* __restrict__ v, int nx, int J, int q, T s_left,
                                     T s_right)
{
    const long long row = (long long)J * nx;
    if (q == 0) return s_left * v[row];
    if (q == nx + 1) return s_right * v[row + nx - 1];
    return v[row + q - 1];
}

// The shear stress mu_n (du/dy + dv/dx) at corner (J, I); inv_hx = 1 / hx,
// inv_hy = 1 / hy (the array code multiplies by them: momentum._hybrid).
__device__ __forceinline__ T shear(const T* __restrict__ u, const T* __restrict__ v,
                                   const T* __restrict__ mu, int nx, int ny, int J, int I,
                                   T inv_hx, T inv_hy, T s_left, T s_right, T s_bottom, T s_top)
{
    const T dudy = (u_ghost(u, nx, ny, J + 1, I, s_bottom, s_top)
                    - u_ghost(u, nx, ny, J, I, s_bottom, s_top)) * inv_hy;
    const T dvdx = (v_ghost(v, nx, J, I + 1, s_left, s_right)
                    - v_ghost(v, nx, J, I, s_left, s_right)) * inv_hx;
    return corner_mu(mu, nx, ny, J, I) * (dudy + dvdx);
}

// rho_hat - rho_y at the interior v face F between cells V - nx and V: the
// two cells' densities formed as bf_mom_properties forms them (reduced
// gravity's consistency term, momentum._density_mismatch).
__device__ __forceinline__ T density_mismatch(const T* __restrict__ H, const T* __restrict__ rho_y,
                                              long long V, int nx, long long F, T rho_g, T rho_l)
{
    const T rho_n = rho_g + (rho_l - rho_g) * H[V];
    const T rho_s = rho_g + (rho_l - rho_g) * H[V - nx];
    return (T)0.5 * (rho_n + rho_s) - rho_y[F];
}

// u* on every u face (explicit viscosity): the wall faces copied.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_explicit_u(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ mu,
    const T* __restrict__ H, const T* __restrict__ rho_x, const T* __restrict__ adv_u,
    const T* __restrict__ cx, T* __restrict__ us, const int nx, const int ny, const T dt,
    const T hx, const T hy, const T s_bottom, const T s_top, const int forces)
{
    const T inv_hx = 1.0 / hx, inv_hy = 1.0 / hy;
    BF_CELLS(nx + 1, ny) {
        const int I = i;
        const long long U = (long long)j * (nx + 1) + I;
        if (I == 0 || I == nx) {
            us[U] = u[U];
            continue;
        }
        const long long C = (long long)j * nx + I, F = (long long)j * (nx - 1) + I - 1;
        const T txx_e = 2 * mu[C] * (u[U + 1] - u[U]) * inv_hx;
        const T txx_w = 2 * mu[C - 1] * (u[U] - u[U - 1]) * inv_hx;
        const T txy_n = shear(u, v, mu, nx, ny, j + 1, I, inv_hx, inv_hy, 1.0, 1.0, s_bottom,
                              s_top);
        const T txy_s = shear(u, v, mu, nx, ny, j, I, inv_hx, inv_hy, 1.0, 1.0, s_bottom, s_top);
        T force = (txx_e - txx_w) * inv_hx + (txy_n - txy_s) * inv_hy;
        if (forces) force = force - cx[F] * (H[C] - H[C - 1]) * inv_hx;
        us[U] = u[U] + dt * (-adv_u[F] + force / rho_x[F]);
    }
}
#endif

// v* on every v face (explicit viscosity): the wall faces copied; gravity 0
// for reduced gravity.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_explicit_v(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ mu,
    const T* __restrict__ H, const T* __restrict__ rho_y, const T* __restrict__ adv_v,
    const T* __restrict__ cy, T* __restrict__ vs, const int nx, const int ny, const T dt,
    const T hx, const T hy, const T s_left, const T s_right, const T gravity, const int forces,
    const T reduced, const T rho_g, const T rho_l)
{
    const T inv_hx = 1.0 / hx, inv_hy = 1.0 / hy;
    BF_CELLS(nx, ny + 1) {
        const int J = j;
        const long long V = (long long)J * nx + i;
        if (J == 0 || J == ny) {
            vs[V] = v[V];
            continue;
        }
        const long long F = (long long)(J - 1) * nx + i;
        const T tyy_n = 2 * mu[V] * (v[V + nx] - v[V]) * inv_hy;
        const T tyy_s = 2 * mu[V - nx] * (v[V] - v[V - nx]) * inv_hy;
        const T txy_e = shear(u, v, mu, nx, ny, J, i + 1, inv_hx, inv_hy, s_left, s_right, 1.0,
                              1.0);
        const T txy_w = shear(u, v, mu, nx, ny, J, i, inv_hx, inv_hy, s_left, s_right, 1.0, 1.0);
        T force = (txy_e - txy_w) * inv_hx + (tyy_n - tyy_s) * inv_hy;
        if (forces) force = force - cy[F] * (H[V] - H[V - nx]) * inv_hy;
        if (reduced != 0) force = force + reduced * density_mismatch(H, rho_y, V, nx, F, rho_g, rho_l);
        vs[V] = v[V] + dt * (-adv_v[F] + force / rho_y[F] - gravity);
    }
}
#endif

// ------------------------------------------------------------- implicit path

// Right-hand side of the u solve on the interior u faces: rho_x (u - dt adv_u)
// + dt d/dy(mu dv/dx).
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_implicit_rhs_u(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ mu,
    const T* __restrict__ rho_x, const T* __restrict__ adv_u, T* __restrict__ rhs, const int nx,
    const int ny, const T dt, const T hx, const T hy)
{
    BF_CELLS(nx - 1, ny) {
        const int I = i + 1;
        const long long C = (long long)j * nx + I, F = (long long)j * (nx - 1) + i;
        const T sx_s = corner_mu(mu, nx, ny, j, I) * (v[C] - v[C - 1]) / hx;
        const T sx_n = corner_mu(mu, nx, ny, j + 1, I) * (v[C + nx] - v[C + nx - 1]) / hx;
        const T cross = (sx_n - sx_s) / hy;
        rhs[F] = rho_x[F] * (u[(long long)j * (nx + 1) + I] - dt * adv_u[F]) + dt * cross;
    }
}
#endif

// Right-hand side of the v solve on the interior v faces: rho_y (v - dt adv_v)
// + dt d/dx(mu du/dy).
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_implicit_rhs_v(
    const T* __restrict__ u, const T* __restrict__ v, const T* __restrict__ mu,
    const T* __restrict__ rho_y, const T* __restrict__ adv_v, T* __restrict__ rhs, const int nx,
    const int ny, const T dt, const T hx, const T hy)
{
    BF_CELLS(nx, ny - 1) {
        const int J = j + 1;
        const long long V = (long long)J * nx + i, F = (long long)j * nx + i;
        const long long U = (long long)J * (nx + 1) + i;
        const T sy_w = corner_mu(mu, nx, ny, J, i) * (u[U] - u[U - nx - 1]) / hy;
        const T sy_e = corner_mu(mu, nx, ny, J, i + 1) * (u[U + 1] - u[U - nx]) / hy;
        const T cross = (sy_e - sy_w) / hx;
        rhs[F] = rho_y[F] * (v[V] - dt * adv_v[F]) + dt * cross;
    }
}
#endif

// The implicit path's u*: x + dt (-cx dH/dx) / rho_x on the interior u faces
// (x alone without forces), w on the wall faces.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_implicit_velocity_u(
    const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ H,
    const T* __restrict__ cx, const T* __restrict__ rho_x, T* __restrict__ out, const int nx,
    const int ny, const T dt, const T hx, const int forces)
{
    BF_CELLS(nx + 1, ny) {
        const long long f = (long long)j * (nx + 1) + i;
        if (i == 0 || i == nx) { out[f] = w[f]; continue; }
        const long long C = (long long)j * nx + i, F = (long long)j * (nx - 1) + i - 1;
        T val = x[F];
        if (forces) {
            const T force = -cx[F] * (H[C] - H[C - 1]) * (1.0 / hx);
            val = val + dt * (force / rho_x[F]);
        }
        out[f] = val;
    }
}
#endif

// The implicit path's v*: x + dt (f_v / rho_y - gravity), f_v = -cy dH/dy (with
// forces) + reduced (rho_hat - rho_y) (reduced gravity), w on the wall faces.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_implicit_velocity_v(
    const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ H,
    const T* __restrict__ cy, const T* __restrict__ rho_y, T* __restrict__ out, const int nx,
    const int ny, const T dt, const T hy, const int forces, const T gravity, const T reduced,
    const T rho_g, const T rho_l)
{
    BF_CELLS(nx, ny + 1) {
        const long long f = (long long)j * nx + i;
        if (j == 0 || j == ny) { out[f] = w[f]; continue; }
        const long long F = (long long)(j - 1) * nx + i;
        T val = x[F];
        if (forces || reduced != 0) {
            T force = forces ? -cy[F] * (H[f] - H[f - nx]) * (1.0 / hy) : (T)0;
            if (reduced != 0) force = force + reduced * density_mismatch(H, rho_y, f, nx, F, rho_g, rho_l);
            val = val + dt * (force / rho_y[F]);
        }
        if (gravity != 0) val = val - dt * gravity;
        out[f] = val;
    }
}
#endif

// ----------------------------------------------------------------- projection

// div u at the cells; with with_rhs also -div / dt.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_divergence(
    const T* __restrict__ u, const T* __restrict__ v, T* __restrict__ div, T* __restrict__ rhs,
    const int nx, const int ny, const T hx, const T hy, const T dt, const int with_rhs)
{
    BF_CELLS(nx, ny) {
        const long long c = (long long)j * nx + i, U = (long long)j * (nx + 1) + i;
        const T d = (u[U + 1] - u[U]) / hx + (v[c + nx] - v[c]) / hy;
        div[c] = d;
        if (with_rhs) rhs[c] = -d / dt;
    }
}
#endif

// The corrected u on face (j, I) and v on face (J, i).
__device__ __forceinline__ T corrected_u(const T* __restrict__ us, const T* __restrict__ p,
                                         const T* __restrict__ rho_x, int nx, int j, int I,
                                         T dt, T hx)
{
    const long long U = (long long)j * (nx + 1) + I;
    if (I == 0 || I == nx) return us[U];
    const long long C = (long long)j * nx + I;
    return us[U] - dt / rho_x[(long long)j * (nx - 1) + I - 1] * (p[C] - p[C - 1]) / hx;
}

__device__ __forceinline__ T corrected_v(const T* __restrict__ vs, const T* __restrict__ p,
                                         const T* __restrict__ rho_y, int nx, int ny, int J,
                                         int i, T dt, T hy)
{
    const long long V = (long long)J * nx + i;
    if (J == 0 || J == ny) return vs[V];
    return vs[V] - dt / rho_y[V - nx] * (p[V] - p[V - nx]) / hy;
}

// The correction u = u* - dt/rho grad p, each cell writing its west and south
// faces (the last column and row their east and north ones too), and the
// per-block sums of div_star^2 and (div u)^2: partial[k * gridDim.x + block].
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_correct_partial(
    const T* __restrict__ us, const T* __restrict__ vs, const T* __restrict__ p,
    const T* __restrict__ rho_x, const T* __restrict__ rho_y, const T* __restrict__ div_star,
    T* __restrict__ u, T* __restrict__ v, T* __restrict__ partial, const int nx, const int ny,
    const T dt, const T hx, const T hy)
{
    __shared__ T shm[32];
    T acc[2] = {0.0, 0.0};
    const long long n = (long long)nx * ny;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(c % nx), j = (int)(c / nx);
        const T uw = corrected_u(us, p, rho_x, nx, j, i, dt, hx);
        const T ue = corrected_u(us, p, rho_x, nx, j, i + 1, dt, hx);
        const T vsth = corrected_v(vs, p, rho_y, nx, ny, j, i, dt, hy);
        const T vnth = corrected_v(vs, p, rho_y, nx, ny, j + 1, i, dt, hy);
        const long long U = (long long)j * (nx + 1) + i;
        u[U] = uw;
        if (i == nx - 1) u[U + 1] = ue;
        v[c] = vsth;
        if (j == ny - 1) v[c + nx] = vnth;
        const T d = (ue - uw) / hx + (vnth - vsth) / hy;
        const T s = div_star[c];
        acc[0] += s * s;
        acc[1] += d * d;
    }
    block_sum<2>(acc, shm);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = acc[0];
        partial[gridDim.x + blockIdx.x] = acc[1];
    }
}
#endif

// Per-block sums of a^2 and b^2 (na, nb entries): partial[k * gridDim.x + block].
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_squares_partial(
    const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ partial,
    const long long na, const long long nb)
{
    __shared__ T shm[32];
    T acc[2] = {0.0, 0.0};
    const long long n = na > nb ? na : nb;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x) {
        if (k < na) acc[0] += a[k] * a[k];
        if (k < nb) acc[1] += b[k] * b[k];
    }
    block_sum<2>(acc, shm);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = acc[0];
        partial[gridDim.x + blockIdx.x] = acc[1];
    }
}
#endif

// The two norms, the square roots of the totals of the per-block sums (one block).
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_mom_norms_final(
    const T* __restrict__ partial, const int nblocks, T* __restrict__ out)
{
    __shared__ T shm[32];
    block_norms(partial, nblocks, 2, out, shm);
}
#endif
