// PLIC geometry of the 3-D volume-of-fluid kernels (vof3.cu and
// vof_redistance3.cu): the unit normal, the level set's normal, and the
// plane's volume and constant in a box, in the array code's order of
// operations (bubbleflow.flow.plic, plic_reconstruction).  Where the array
// code evaluates every branch and selects with xp.where, a function here
// evaluates the selected branch only: the same bits.  "typedef double T;",
// common.cuh and plic.cuh precede this text.
#ifndef BUBBLEFLOW_PLIC3_CUH
#define BUBBLEFLOW_PLIC3_CUH

// ---------------------------------------------------------------------------

// plic_reconstruction's unit normal in 3-D: a zero vector becomes (0, 0, -1).
__device__ __forceinline__ void vof_unit3(T gx, T gy, T gz, T* m)
{
    const T norm = sqrt(gx * gx + gy * gy + gz * gz);
    const bool zero = norm == 0.0;
    const T inv = 1.0 / (zero ? 1.0 : norm);
    m[0] = zero ? 0.0 : gx * inv;
    m[1] = zero ? 0.0 : gy * inv;
    m[2] = zero ? -1.0 : gz * inv;
}

// plic_reconstruction.interface_normal with normal_from = phi in 3-D.
__device__ __forceinline__ void vof_phi_normal3(const T* __restrict__ phi, int nx, int ny, int nz,
                                                int k, int j, int i, T hx, T hy, T hz, T* m)
{
    const long long plane = (long long)nx * ny;
    const long long p = (long long)k * plane + (long long)j * nx + i;
    const T f0 = phi[p];
    const T gx = vof_gradient_1(i > 0 ? phi[p - 1] : f0, f0, i < nx - 1 ? phi[p + 1] : f0, i, nx, hx);
    const T gy = vof_gradient_1(j > 0 ? phi[p - nx] : f0, f0, j < ny - 1 ? phi[p + nx] : f0, j, ny, hy);
    const T gz = vof_gradient_1(k > 0 ? phi[p - plane] : f0, f0, k < nz - 1 ? phi[p + plane] : f0,
                                k, nz, hz);
    vof_unit3(gx, gy, gz, m);
}

// x if positive, else 1 (plic._safe: a divisor for the branches not taken).
__device__ __forceinline__ T vof_safe(T x) { return x > 0.0 ? x : 1.0; }

// plic._unit_cube_plane's scaling and sort: m1 <= m2 <= m3 (scaled |n_a| l_a summing
// to one), the scale s and its inverse.
__device__ __forceinline__ void vof_cube_normal(T n0, T n1, T n2, T l0, T l1, T l2, T* m1, T* m2,
                                                T* m3, T* s, T* inv)
{
    T p = fabs(n0) * l0, q = fabs(n1) * l1, r = fabs(n2) * l2;
    *s = p + q + r;
    *inv = 1.0 / (*s > 0.0 ? *s : 1.0);
    p = p * *inv;
    q = q * *inv;
    r = r * *inv;
    const T lo = np_min(p, q), hi = np_max(p, q);
    *m1 = np_min(lo, r);
    *m3 = np_max(hi, r);
    *m2 = np_max(lo, np_min(hi, r));
}

// plic._half_volume: the volume under m . x = a in the unit cube for 0 <= a <= 1/2 and
// its derivative in a (branches as increments on the previous one).
__device__ __forceinline__ void vof_half_volume(T m1, T m2, T m3, T a, T* v, T* g)
{
    const T m12 = m1 + m2;
    const T six = 6.0 * m1 * m2 * m3;
    const T inv_six = 1.0 / vof_safe(six);
    const T inv_23 = 1.0 / vof_safe(m2 * m3);
    if (a < m1) {
        *v = a * a * a * inv_six;
        *g = 3.0 * a * a * inv_six;
        return;
    }
    const T v2 = (3.0 * a * a - 3.0 * a * m1 + m1 * m1) * inv_23 / 6.0;
    const T g2 = (2.0 * a - m1) * inv_23 / 2.0;
    if (a < m2) {
        *v = v2;
        *g = g2;
        return;
    }
    if (a < m12) {
        const T d2 = np_max(a - m2, 0.0), d3 = np_max(a - m3, 0.0);
        *v = v2 - (d2 * d2 * d2 + d3 * d3 * d3) * inv_six;
        *g = g2 - 3.0 * (d2 * d2 + d3 * d3) * inv_six;
        return;
    }
    *v = (2.0 * a - m12) / (2.0 * m3);
    *g = 1.0 / m3;
}

// plic._cube_volume: V(a) = 1 - V(1 - a) above 1/2, and the derivative.
__device__ __forceinline__ void vof_cube_volume(T m1, T m2, T m3, T a, T* v, T* g)
{
    a = np_clip(a, 0.0, 1.0);
    const bool upper = a > 0.5;
    T hv;
    vof_half_volume(m1, m2, m3, upper ? 1.0 - a : a, &hv, g);
    *v = upper ? 1.0 - hv : hv;
}

// plic._cubic_root: the root of a^3 + b a^2 + c1 a + c0 the PLIC branches need.
__device__ __forceinline__ T vof_cubic_root(T b, T c1, T c0)
{
    const T p = c1 / 3.0 - b * b / 9.0;
    const T q = (c1 * b - 3.0 * c0) / 6.0 - b * b * b / 27.0;
    const T minus_p = np_max(-p, 0.0);
    const T root = sqrt(minus_p);
    const T cos3 = q / vof_safe(minus_p * root);
    const T theta = acos(np_clip(cos3, -1.0, 1.0)) / 3.0;
    return root * (1.7320508075688772 * sin(theta) - cos(theta)) - b / 3.0;   // sqrt(3)
}

// plic._half_constant: a in [0, 1/2] with volume v in [0, 1/2] under the plane.
__device__ __forceinline__ T vof_half_constant(T m1, T m2, T m3, T v)
{
    const T m12 = m1 + m2;
    const T six = 6.0 * m1 * m2 * m3;
    const T v1 = m1 * m1 / (6.0 * vof_safe(m2 * m3));
    if (v < v1) return cbrt(six * v);
    const T v2 = v1 + (m2 - m1) / (2.0 * m3);
    if (v < v2) return 0.5 * (m1 + sqrt(np_max(m1 * m1 + 8.0 * m2 * m3 * (v - v1), 0.0)));
    const bool plane_kink = m3 < m12;
    T v3, unused;
    if (plane_kink) vof_half_volume(m1, m2, m3, np_min(m3, m12), &v3, &unused);
    else            v3 = m12 / (2.0 * m3);
    const T s2 = m1 * m1 + m2 * m2;
    const T s3 = m1 * m1 * m1 + m2 * m2 * m2;
    if (v < v3) return vof_cubic_root(-3.0 * m12, 3.0 * s2, six * v - s3);
    return plane_kink
        ? vof_cubic_root(-1.5, 1.5 * (s2 + m3 * m3), 0.5 * (six * v - s3 - m3 * m3 * m3))
        : m3 * v + 0.5 * m12;
}

// plic._cube_constant: the analytic inverse, then two Newton steps on the volume.
__device__ __forceinline__ T vof_cube_constant(T m1, T m2, T m3, T c)
{
    const bool upper = c > 0.5;
    T a = vof_half_constant(m1, m2, m3, upper ? 1.0 - c : c);
    a = upper ? 1.0 - a : a;
    const bool inner = c > 0.0 && c < 1.0;
    for (int it = 0; it < 2; ++it) {
        T v, g;
        vof_cube_volume(m1, m2, m3, a, &v, &g);
        const T step = (v - c) / vof_safe(g);
        a = (inner && g > 0.0) ? np_clip(a - step, 0.0, 1.0) : a;
    }
    return a;
}

// plic.plane_constant of a plane: alpha such that m . x <= alpha covers the fraction c
// of the box [0, l0] x [0, l1] x [0, l2].
__device__ __forceinline__ T vof_plane_constant(const T* m, T c, T l0, T l1, T l2)
{
    T m1, m2, m3, s, inv;
    vof_cube_normal(m[0], m[1], m[2], l0, l1, l2, &m1, &m2, &m3, &s, &inv);
    const T a = vof_cube_constant(m1, m2, m3, np_clip(c, 0.0, 1.0));
    T out = a * s;
    out = out + np_min(m[0], 0.0) * l0;
    out = out + np_min(m[1], 0.0) * l1;
    out = out + np_min(m[2], 0.0) * l2;
    return out;
}

// plic.cut_fraction of a plane: the fraction of [0, l0] x [0, l1] x [0, l2] where
// n0 x + n1 y + n2 z <= alpha.
__device__ __forceinline__ T vof_cut_fraction3(T n0, T n1, T n2, T alpha, T l0, T l1, T l2)
{
    T a = alpha;
    a = a - np_min(n0, 0.0) * l0;
    a = a - np_min(n1, 0.0) * l1;
    a = a - np_min(n2, 0.0) * l2;
    T m1, m2, m3, s, inv;
    vof_cube_normal(n0, n1, n2, l0, l1, l2, &m1, &m2, &m3, &s, &inv);
    T v, g;
    vof_cube_volume(m1, m2, m3, a * inv, &v, &g);
    const T degenerate = alpha >= 0.0 ? 1.0 : 0.0;
    return s > 0.0 ? np_clip(v, 0.0, 1.0) : degenerate;
}

#endif
