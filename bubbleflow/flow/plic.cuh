// PLIC geometry shared by the volume-of-fluid kernels (vof.cu,
// vof_redistance.cu and vof_fraction.cu): the unit normal, the level set's
// normal, the line's fraction and constant of a cell, in the array code's
// order of operations (bubbleflow.flow.plic, plic_reconstruction).
// "typedef double T;" and common.cuh precede this text.
#ifndef BUBBLEFLOW_PLIC_CUH
#define BUBBLEFLOW_PLIC_CUH

// plic_reconstruction's unit normal: (mx, my) normalised; a zero vector becomes (0, -1).
__device__ __forceinline__ void vof_unit(T gx, T gy, T* mx, T* my)
{
    const T norm = sqrt(gx * gx + gy * gy);
    const bool zero = norm == 0.0;
    const T inv = 1.0 / (zero ? 1.0 : norm);
    *mx = zero ? 0.0 : gx * inv;
    *my = zero ? -1.0 : gy * inv;
}

// plic_reconstruction.cell_gradient along one axis at index i of n cells (f0 the cell's
// value, fm / fp its neighbours'; at least 2 cells).
__device__ __forceinline__ T vof_gradient_1(T fm, T f0, T fp, int i, int n, T h)
{
    if (i == 0)     return (fp - f0) / h;
    if (i == n - 1) return (f0 - fm) / h;
    return (fp - fm) / (2.0 * h);
}

// plic_reconstruction.interface_normal with normal_from = phi: plic_reconstruction.cell_gradient (central
// differences, one-sided at the walls; at least 2 cells per axis), normalised.
__device__ __forceinline__ void vof_phi_normal(const T* __restrict__ phi, int nx, int ny, int j,
                                               int i, T hx, T hy, T* mx, T* my)
{
    const long long p = (long long)j * nx + i;
    T gx, gy;
    if (i == 0)           gx = (phi[p + 1] - phi[p]) / hx;
    else if (i == nx - 1) gx = (phi[p] - phi[p - 1]) / hx;
    else                  gx = (phi[p + 1] - phi[p - 1]) / (2.0 * hx);
    if (j == 0)           gy = (phi[p + nx] - phi[p]) / hy;
    else if (j == ny - 1) gy = (phi[p] - phi[p - nx]) / hy;
    else                  gy = (phi[p + nx] - phi[p - nx]) / (2.0 * hy);
    vof_unit(gx, gy, mx, my);
}

// plic's unit-square line's scaled normal: lo, hi and the scale s.
__device__ __forceinline__ void vof_scaled(T mx, T my, T lx, T ly, T* lo, T* hi, T* s, T* inv)
{
    T m1 = fabs(mx) * lx;
    T m2 = fabs(my) * ly;
    *s = m1 + m2;
    *inv = 1.0 / (*s > 0.0 ? *s : 1.0);
    m1 = m1 * *inv;
    m2 = m2 * *inv;
    *lo = np_min(m1, m2);
    *hi = np_max(m1, m2);
}

// plic.plane_constant of a line: alpha such that mx x + my y <= alpha covers the
// fraction c of [0, lx] x [0, ly].
__device__ __forceinline__ T vof_line_constant(T mx, T my, T c, T lx, T ly)
{
    T lo, hi, s, inv;
    vof_scaled(mx, my, lx, ly, &lo, &hi, &s, &inv);
    const T v = np_clip(c, 0.0, 1.0);
    const T hi_safe = hi > 0.0 ? hi : 1.0;
    const T c1 = lo / (2.0 * hi_safe);
    const T two_lo_hi = 2.0 * lo * hi;
    const T a = v < c1 ? sqrt(two_lo_hi * v)
              : (v <= 1.0 - c1 ? hi * v + 0.5 * lo : 1.0 - sqrt(two_lo_hi * (1.0 - v)));
    return a * s + np_min(mx, 0.0) * lx + np_min(my, 0.0) * ly;
}

// plic.cut_fraction: the fraction of [0, lx] x [0, ly] where mx x + my y <= alpha.
__device__ __forceinline__ T vof_cut_fraction(T mx, T my, T alpha, T lx, T ly)
{
    const T shifted = alpha - np_min(mx, 0.0) * lx - np_min(my, 0.0) * ly;
    T lo, hi, s, inv;
    vof_scaled(mx, my, lx, ly, &lo, &hi, &s, &inv);
    const T a = np_clip(shifted * inv, 0.0, 1.0);
    const T two_lo_hi = 2.0 * lo * hi;
    const T corner = 1.0 / (two_lo_hi > 0.0 ? two_lo_hi : 1.0);
    const T middle = (a - 0.5 * lo) / (hi > 0.0 ? hi : 1.0);
    const T f = a < lo ? a * a * corner
              : (a <= hi ? middle : 1.0 - (1.0 - a) * (1.0 - a) * corner);
    const T degenerate = alpha >= 0.0 ? 1.0 : 0.0;
    return s > 0.0 ? np_clip(f, 0.0, 1.0) : degenerate;
}

#endif
