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

// mu at corner (J, I) of the (ny+1) x (nx+1) corners: the mean of the four
// cells around it, edge-copied at the walls (viscosity.corner_viscosity).
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

// rhs - S x on the component's interior faces (viscosity.viscous_residual).
extern "C" __global__ void bf_visc_residual(
    const T* __restrict__ rho, const T* __restrict__ kp, const T* __restrict__ km,
    const T* __restrict__ tp, const T* __restrict__ tm, const T* __restrict__ rhs,
    const T* __restrict__ x, T* __restrict__ out, int ny, int nx, int normal_is_x,
    T s_low, T s_high)
{
    const long long n = (long long)ny * nx;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int j = (int)(p / nx), i = (int)(p - (long long)j * nx);
        const T c = x[p];
        T xm, xq, ym, yq;
        if (normal_is_x) {
            xm = i > 0 ? x[p - 1] : (T)0;
            xq = i < nx - 1 ? x[p + 1] : (T)0;
            ym = j > 0 ? x[p - nx] : s_low * c;
            yq = j < ny - 1 ? x[p + nx] : s_high * c;
        } else {
            xm = j > 0 ? x[p - nx] : (T)0;
            xq = j < ny - 1 ? x[p + nx] : (T)0;
            ym = i > 0 ? x[p - 1] : s_low * c;
            yq = i < nx - 1 ? x[p + 1] : s_high * c;
        }
        const T Lx = kp[p] * (xq - c) - km[p] * (c - xm) + tp[p] * (yq - c) - tm[p] * (c - ym);
        out[p] = rhs[p] - (rho[p] * c - Lx);
    }
}
