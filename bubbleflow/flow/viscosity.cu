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
extern "C" __global__ void bf_visc_chebyshev_step(
    const T* __restrict__ rho, const T* __restrict__ kp, const T* __restrict__ km,
    const T* __restrict__ tp, const T* __restrict__ tm, const T* __restrict__ inv_diag,
    T* __restrict__ x, T* __restrict__ r, const T* __restrict__ d, T* __restrict__ dn,
    int ny, int nx, int normal_is_x, T s_low, T s_high, T keep, T gain)
{
    const long long n = (long long)ny * nx;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int j = (int)(p / nx), i = (int)(p - (long long)j * nx);
        const T c = d[p];
        T xm, xq, ym, yq;
        if (normal_is_x) {
            xm = i > 0 ? d[p - 1] : (T)0;
            xq = i < nx - 1 ? d[p + 1] : (T)0;
            ym = j > 0 ? d[p - nx] : s_low * c;
            yq = j < ny - 1 ? d[p + nx] : s_high * c;
        } else {
            xm = j > 0 ? d[p - nx] : (T)0;
            xq = j < ny - 1 ? d[p + nx] : (T)0;
            ym = i > 0 ? d[p - 1] : s_low * c;
            yq = i < nx - 1 ? d[p + 1] : s_high * c;
        }
        const T Lx = kp[p] * (xq - c) - km[p] * (c - xm) + tp[p] * (yq - c) - tm[p] * (c - ym);
        const T Sd = rho[p] * c - Lx;
        x[p] = x[p] + c;
        const T rn = r[p] - Sd;
        r[p] = rn;
        dn[p] = keep * c + gain * (inv_diag[p] * rn);
    }
}
