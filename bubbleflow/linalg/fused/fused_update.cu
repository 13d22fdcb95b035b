// The update kernel of the fused iteration (included by fused.cu, after T
// and the helpers of common.cuh): one block per tile of BY x BX cells, walked
// by columns like bf_direction_spmv: G tiles of BY x BX / G (the subdomain
// blocks when deflating) side by side, each with its own sums.  PREC: 0
// none, 1 jacobi, 2 scaled incomplete Poisson, 3 none but y not written
// (generic M after).

#ifndef PREC
#define PREC 2
#endif
#ifndef UPD_G
#define UPD_G 1
#endif
// r' = r - alpha w at (jj, ii) and z = s r' there; 0 outside the grid.
__device__ __forceinline__ T ip_z(const T* __restrict__ s, const T* __restrict__ r_old,
        const T* __restrict__ w, const T alpha, const int jj, const int ii, const int nx,
        const int ny)
{
    if (jj < 0 || jj >= ny || ii < 0 || ii >= nx) return 0.0;
    const long long q = (long long)jj * nx + ii;
    return s[q] * (r_old[q] - alpha * w[q]);
}

extern "C" __global__ void bf_update(const T* __restrict__ p, const T* __restrict__ w,
        const T* __restrict__ r_old, T* __restrict__ r_new, T* __restrict__ x, T* __restrict__ y,
        const T* __restrict__ s, const T* __restrict__ cxs, const T* __restrict__ cys,
        const signed char* __restrict__ part, const T* __restrict__ scal,
        T* __restrict__ part_ry, T* __restrict__ part_rr, T* __restrict__ part_zr,
        const int nx, const int ny, const int BX, const int BY, const int BXP, const int H)
{
    __shared__ T red[32];
    if (scal[4] != 0.0) return;
    const T alpha = scal[0];
    const int SW = BXP < 32 ? BXP : 32;
    const Walk wk = walk_setup(nx, BX, BY, BXP, H, SW);
    const int ii = wk.ii;
    T acc[4] = {0.0, 0.0, 0.0, 0.0};    // r.y, r.r, Z^T r (part 0), Z^T r (part 1)
#if PREC == 2
    // Scaled incomplete Poisson, y = s (I + L) (I + L^T) s r', as t = (I + L^T) z,
    // z = s r' (east and north couplings cxs, cys), then y = s (t + L t).  Step
    // jj computes t on row jj of the column from z on rows jj and jj + 1, and
    // y on row jj from t on rows jj and jj - 1: the walk starts one row below.
    // Halo column ih: z there on rows jj and jj + 1, loaded by every lane
    // (the first and the last lane of a segment use it).
    // (Kept out of Walk: with ih and both stored there, a measured run of
    // this kernel was slower; docs/performance_records.md.)
    const int ih = wk.first ? ii - 1 : ii + 1;
    const bool both = wk.first && wk.last;
    T rC = 0.0, sC = 0.0, zC = 0.0, zHC = 0.0;
    if (wk.active && wk.ja >= 1) {
        const long long q = (long long)(wk.ja - 1) * nx + ii;
        rC = r_old[q] - alpha * w[q];
        sC = s[q];
        zC = sC * rC;
    }
    if (wk.active) zHC = ip_z(s, r_old, w, alpha, wk.ja - 1, ih, nx, ny);
    T tS = 0.0, cysS = 0.0;
    for (int st = 0; st <= wk.R; ++st) {
        const int jj = wk.ja - 1 + st;
        const bool need = wk.active && jj < wk.jb;        // t is needed on this row
        const bool inrow = need && jj >= 0;
        const int jn = jj + 1;
        T rN = 0.0, sN = 0.0, zN = 0.0;
        if (need && jn < ny) {
            const long long q = (long long)jn * nx + ii;
            rN = r_old[q] - alpha * w[q];
            sN = s[q];
            zN = sN * rN;
        }
        const T zHN = need ? ip_z(s, r_old, w, alpha, jn, ih, nx, ny) : 0.0;
        const T cxsE = (inrow && ii < nx - 1) ? cxs[(long long)jj * (nx - 1) + ii] : 0.0;
        const T cysN = (inrow && jj < ny - 1) ? cys[(long long)jj * nx + ii] : 0.0;
        const T cxsH = (inrow && ih >= 0 && ih < nx - 1)
                       ? cxs[(long long)jj * (nx - 1) + ih] : 0.0;
        const T cysH = (inrow && ih >= 0 && ih < nx && jj < ny - 1)
                       ? cys[(long long)jj * nx + ih] : 0.0;
        T zE = __shfl_down_sync(FULL_MASK, zC, 1, SW);
        if (wk.last) zE = zHC;
        if (both) zE = inrow ? ip_z(s, r_old, w, alpha, jj, ii + 1, nx, ny) : 0.0;
        T t = 0.0;
        if (inrow) {
            t = zC;
            if (ii < nx - 1) t += cxsE * zE;
            if (jj < ny - 1) t += cysN * zN;
        }
        T tW = __shfl_up_sync(FULL_MASK, t, 1, SW);
        T cxsW = __shfl_up_sync(FULL_MASK, cxsE, 1, SW);
        if (wk.first) {
            // t at (jj, ii - 1) from z on the halo column and this one.
            T th = 0.0;
            if (inrow && ii > 0) {
                th = zHC;
                th += cxsH * zC;
                if (jj < ny - 1) th += cysH * zHN;
            }
            tW = th;
            cxsW = cxsH;
        }
        if (inrow && jj >= wk.ja) {
            T u = t;
            if (ii > 0) u += cxsW * tW;
            if (jj > 0) u += cysS * tS;
            const T yv = sC * u;
            const long long q = (long long)jj * nx + ii;
            x[q] += alpha * p[q];
            r_new[q] = rC;
            y[q] = yv;
            acc[0] += rC * yv;
            acc[1] += rC * rC;
            if (part != NULL && part[q]) acc[3] += rC; else acc[2] += rC;
        }
        tS = t;
        cysS = cysN;
        rC = rN;
        sC = sN;
        zC = zN;
        zHC = zHN;
    }
#else
    for (int st = 0; st < wk.R; ++st) {
        const int jj = wk.ja + st;
        if (!(wk.active && jj < wk.jb)) continue;
        const long long q = (long long)jj * nx + ii;
        const T rn = r_old[q] - alpha * w[q];
        x[q] += alpha * p[q];
        r_new[q] = rn;
#if PREC == 1
        const T yv = s[q] * rn;
#else
        const T yv = rn;
#endif
#if PREC != 3
        y[q] = yv;
        acc[0] += rn * yv;
#endif
        acc[1] += rn * rn;
        if (part != NULL && part[q]) acc[3] += rn; else acc[2] += rn;
    }
#endif
#if UPD_G == 1
    block_sum<4>(acc, red);
    if (threadIdx.x == 0) {
        const int tile = blockIdx.x;
        part_ry[tile] = acc[0];
        part_rr[tile] = acc[1];
        if (part_zr != NULL) { part_zr[2 * tile] = acc[2]; part_zr[2 * tile + 1] = acc[3]; }
    }
#else
    // UPD_G tiles side by side (each a whole number of warps wide): for each
    // sum, every warp sums its lanes, then thread g adds the warps of tile g
    // in warp order.  (The four sums in one table of warps, or G a run-time
    // argument, took the kernel to more registers and made it slower;
    // measured: docs/performance_records.md.)
    const int G = UPD_G, SBX = BX / G;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int ntxb = nx / BX;
    const int tile = (blockIdx.x / ntxb) * (nx / SBX) + (blockIdx.x % ntxb) * G + threadIdx.x;
    for (int k = 0; k < 4; ++k) {
        const T sk = warp_sum(acc[k]);
        __syncthreads();
        if (lane == 0) red[warp] = sk;
        __syncthreads();
        if (threadIdx.x < G) {
            T v = 0.0;
            for (int u = 0; u < (int)(blockDim.x >> 5); ++u)
                if (((u * 32) % BXP) / SBX == (int)threadIdx.x) v += red[u];
            if (k == 0) part_ry[tile] = v;
            else if (k == 1) part_rr[tile] = v;
            else if (part_zr != NULL) part_zr[2 * tile + k - 2] = v;
        }
    }
#endif
}
