// Volume-of-fluid advection (bubbleflow.flow.vof_advection; twin: advect).
// "typedef double T;" precedes this text.  Every formula is written in the
// array code's order of operations (compiled without FMA contraction), the
// array code's xp.where selections as ternaries and its xp.minimum,
// xp.maximum and xp.clip as np_min, np_max and np_clip, so kernel and twin
// agree to the bit.  Cells (j, i) are stored row after row: p = j * nx + i.
//
// One launch per direction sweep: a thread per cell computes the geometric
// PLIC fluxes through its two faces along the sweep (each face's flux is
// computed by both of its cells, with the same arithmetic) from the donor
// cell's line, reconstructed on the spot from the sweep's input (Youngs'
// normal from c, or the gradient of the level set), and writes
// c - (F_out - F_in) + indicator * dilatation; the second sweep also clips.
#include "common.cuh"
// BF_WITHOUT_2D_KERNELS (defined by the 3-D source that includes this one)
// leaves out the kernels only a 2-D grid runs: the 3-D module compiles less.
#include "plic.cuh"

// Cell (j + dj, i + di) of f with the indices clamped to the grid: the
// ghost layer of plic_reconstruction's edge padding (a copy of the wall cell).
__device__ __forceinline__ T vof_edge(const T* __restrict__ f, int nx, int ny, int j, int i)
{
    j = j < 0 ? 0 : (j >= ny ? ny - 1 : j);
    i = i < 0 ? 0 : (i >= nx ? nx - 1 : i);
    return f[(long long)j * nx + i];
}

// plic_reconstruction.interface_normal without normal_from: Youngs' -grad c from the 3x3
// neighbourhood, normalised.
__device__ __forceinline__ void vof_youngs(const T* __restrict__ c, int nx, int ny, int j, int i,
                                           T hx, T hy, T* mx, T* my)
{
    const T sw = vof_edge(c, nx, ny, j - 1, i - 1), s = vof_edge(c, nx, ny, j - 1, i);
    const T se = vof_edge(c, nx, ny, j - 1, i + 1), w = vof_edge(c, nx, ny, j, i - 1);
    const T e = vof_edge(c, nx, ny, j, i + 1), nw = vof_edge(c, nx, ny, j + 1, i - 1);
    const T n = vof_edge(c, nx, ny, j + 1, i), ne = vof_edge(c, nx, ny, j + 1, i + 1);
    const T col_l = sw + 2.0 * w + nw;
    const T col_r = se + 2.0 * e + ne;
    const T row_b = sw + 2.0 * s + se;
    const T row_t = nw + 2.0 * n + ne;
    vof_unit(-(col_r - col_l) / (8.0 * hx), -(row_t - row_b) / (8.0 * hy), mx, my);
}

// w dt / h times the fraction of the swept slab of width |w| dt that holds
// gas: 0 and 1 for an empty and a full donor, else mixed(width, w > 0), its
// PLIC cut (computed only there: the array code overrides the pure donors').
template <typename Mixed>
__device__ __forceinline__ T vof_swept(T cd, T w, T dt, T dt_over_h, Mixed mixed)
{
    const T width = fabs(w) * dt;
    const T frac = cd <= 0.0 ? 0.0 : (cd >= 1.0 ? 1.0 : mixed(width, w > 0.0));
    return w * dt_over_h * frac;
}

// The gas volume through one interior face in dt, in units of the cell
// volume (vof_advection's sweep's `inner`): w the face velocity, (dj, di) the donor
// cell (the upwind one), cd its fraction.  The donor's PLIC line
// (plic_reconstruction.reconstruct) is computed only for a donor that is neither full nor
// empty (the array code overrides the fraction of those).
__device__ __forceinline__ T vof_face_flux(
    const T* __restrict__ c, const T* __restrict__ phi, int use_phi, int along_x, int nx, int ny,
    int dj, int di, T cd, T w, T hx, T hy, T dt, T dt_over_h)
{
    const T h_along = along_x ? hx : hy, h_across = along_x ? hy : hx;
    return vof_swept(cd, w, dt, dt_over_h, [&](T width, bool right) {
        T mx, my;
        if (use_phi) vof_phi_normal(phi, nx, ny, dj, di, hx, hy, &mx, &my);
        else         vof_youngs(c, nx, ny, dj, di, hx, hy, &mx, &my);
        const T alpha = vof_line_constant(mx, my, cd, hx, hy);
        const T m_along = along_x ? mx : my, m_across = along_x ? my : mx;
        const T a = right ? alpha - m_along * (h_along - width) : alpha;
        return vof_cut_fraction(m_along, m_across, a, width, h_across);
    });
}

// A sweep's new fraction of cell p (vof_advection's sweep): the old one less
// the net flux, plus the dilatation times the indicator c0 > 1/2 of the
// step's start; after the last sweep the excursions within tol of [0, 1]
// clipped, the raw value kept in raw when asked.
__device__ __forceinline__ void vof_store(T cc, T flux_in, T flux_out, T w_in, T w_out, T c0p,
                                          T dt_over_h, int last, int keep_raw, T tol,
                                          T one_plus_tol, T* out, T* raw, long long p)
{
    const T dilatation = (w_out - w_in) * dt_over_h;
    const T indicator = c0p > 0.5 ? 1.0 : 0.0;
    const T value = cc - (flux_out - flux_in) + indicator * dilatation;
    if (last) {
        const bool low = value < 0.0 && value > -tol;
        const bool high = value > 1.0 && value < one_plus_tol;
        out[p] = low ? 0.0 : (high ? 1.0 : value);
        if (keep_raw) raw[p] = value;
    } else {
        out[p] = value;
    }
}

// One sweep of vof_advection's sweep along x (along_x = 1: vel = u, (ny, nx + 1)) or y
// (along_x = 0: vel = v, (ny + 1, nx)) of the field c; c0: the fraction at
// the start of the step (the indicator c0 > 1/2); phi: the level set of the
// normals where use_phi (else unused).  last: clip the excursions within
// tol of [0, 1] as vof_advection.advect does, and where keep_raw also write the
// unclipped values to raw (for the info sums).  dt_over_h = dt / h_along.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_vof_sweep(
    const T* __restrict__ c, const T* __restrict__ c0, const T* __restrict__ phi,
    const T* __restrict__ vel, T* out, T* raw, const int nx, const int ny, const int along_x,
    const int use_phi, const int last, const int keep_raw, const T hx, const T hy, const T dt,
    const T dt_over_h, const T tol, const T one_plus_tol)
{
    BF_CELLS(nx, ny) {
        const long long p = (long long)j * nx + i;
        // Faces "in" (lower index) and "out" along the sweep, the cells beyond them.
        long long f_in, f_out, step;
        int k, n, j_prev, i_prev, j_next, i_next;
        if (along_x) {
            f_in = (long long)j * (nx + 1) + i;
            f_out = f_in + 1;
            step = 1;
            k = i;
            n = nx;
            j_prev = j_next = j;
            i_prev = i - 1;
            i_next = i + 1;
        } else {
            f_in = p;
            f_out = p + nx;
            step = nx;
            k = j;
            n = ny;
            j_prev = j - 1;
            j_next = j + 1;
            i_prev = i_next = i;
        }
        const T w_in = vel[f_in], w_out = vel[f_out];
        const T cc = c[p];
        T flux_in = 0.0, flux_out = 0.0;         // no gas through walls
        if (k > 0) {
            const bool from_prev = w_in > 0.0;
            flux_in = vof_face_flux(c, phi, use_phi, along_x, nx, ny, from_prev ? j_prev : j,
                                    from_prev ? i_prev : i, from_prev ? c[p - step] : cc, w_in,
                                    hx, hy, dt, dt_over_h);
        }
        if (k < n - 1) {
            const bool from_here = w_out > 0.0;
            flux_out = vof_face_flux(c, phi, use_phi, along_x, nx, ny, from_here ? j : j_next,
                                     from_here ? i : i_next, from_here ? cc : c[p + step], w_out,
                                     hx, hy, dt, dt_over_h);
        }
        vof_store(cc, flux_in, flux_out, w_in, w_out, c0[p], dt_over_h, last, keep_raw, tol,
                  one_plus_tol, out, raw, p);
    }
}
#endif
