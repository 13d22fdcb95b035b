// Kernels of the fused (deflated) preconditioned CG iteration on the GPU
// (bubbleflow.linalg.fused): the scalars, the direction and its operator
// apply, the restriction of the deflation, and (fused_update.cu) the update.
// Compiled as one module with "#define PREC n" and the optional BF_IDX32,
// DIR_BANDS and UPD_G defines before this text.
typedef double T;
#include "common.cuh"

extern "C" __global__ void bf_alpha(const T* __restrict__ part_pw, const int nparts, T* scal)
{
    __shared__ T shm[32];
    if (scal[4] != 0.0) return;
    const T pw = block_sum_array(part_pw, nparts, shm);
    if (threadIdx.x == 0) {
        T bad = scal[3];
        if (!(pw > 0.0)) bad = 1.0;
        scal[3] = bad;
        scal[0] = bad != 0.0 ? 0.0 : scal[2] / pw;
    }
}

// The solve's scalars, by value (no host-to-device copy): 1 / ||b|| and the
// relative tolerance into scal[5], scal[6]; with ``reset`` (a start) alpha,
// beta, rz, the breakdown and done flags cleared and the counter set.
extern "C" __global__ void bf_set_scalars(T* scal, int* counter, const T inv_bnorm,
        const T tol_rel, const int it, const int reset)
{
    if (reset) {
        for (int i = 0; i < 5; ++i) scal[i] = 0.0;
        counter[0] = it;
    }
    scal[5] = inv_bnorm;
    scal[6] = tol_rel;
}

// The solve's scalars from its start's norms on the device, so that the
// first stretch is queued before the host reads them: norms = [||b||,
// ||r0||, the reference's norm where has_reference]; the tolerance
// max(rtol * against, atol) (against: the reference's norm where nonzero,
// else ||b||, as the host takes Python's max), 1 / ||b|| and the relative
// tolerance into scal[5], scal[6], hist[0] = ||r0|| / ||b||, and the done
// flag where the host's first check ends the solve: ||b|| not positive and
// finite, h0 not finite or at the tolerance, or a breakdown in the start.
extern "C" __global__ void bf_tolerance_from_norms(const T* __restrict__ norms,
        const int has_reference, const T rtol, const T atol, T* scal, T* hist)
{
    const T bnorm = norms[0];
    const T against = (has_reference && norms[2] != 0.0) ? norms[2] : bnorm;
    const T scaled = rtol * against;
    const T tol = atol > scaled ? atol : scaled;
    const T tol_rel = tol / bnorm;
    const T h0 = norms[1] / bnorm;
    scal[5] = 1.0 / bnorm;
    scal[6] = tol_rel;
    hist[0] = h0;
    if (!(bnorm > 0.0 && isfinite(bnorm) && isfinite(h0) && h0 > tol_rel) || scal[3] != 0.0)
        scal[4] = 1.0;
}

// The engine's copies of an operator (diagonals storage), of the
// preconditioner's coefficients and of the deflation's cells, in one pass:
// cx = -E[:, :-1], cy = -N[:-1, :], s = s_src, cxs = -Es[:, :-1],
// cys = -Ns[:-1, :], lab = lab_src, part = part_src (each where given).
extern "C" __global__ void bf_bind_grid(const T* __restrict__ E, const T* __restrict__ N,
        const T* __restrict__ s_src, const T* __restrict__ Es, const T* __restrict__ Ns,
        const int* __restrict__ lab_src, const signed char* __restrict__ part_src,
        T* __restrict__ cx, T* __restrict__ cy, T* __restrict__ s, T* __restrict__ cxs,
        T* __restrict__ cys, int* __restrict__ lab, signed char* __restrict__ part,
        const int nx, const int ny)
{
    const long long n = (long long)nx * ny;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n;
         q += (long long)gridDim.x * blockDim.x) {
        const long long j = q / nx, i = q - j * nx;
        if (i < nx - 1) {
            cx[j * (nx - 1) + i] = -E[q];
            if (Es != NULL) cxs[j * (nx - 1) + i] = -Es[q];
        }
        if (j < ny - 1) {
            cy[q] = -N[q];
            if (Ns != NULL) cys[q] = -Ns[q];
        }
        if (s_src != NULL) s[q] = s_src[q];
        if (lab_src != NULL) {
            lab[q] = lab_src[q];
            part[q] = part_src[q];
        }
    }
}

// The engine's copies of the deflation's vectors: owner (k), the row
// pointers of (A Z)^T (k + 1), its column indices and values (nnz).
extern "C" __global__ void bf_bind_vectors(const int* __restrict__ owner_src,
        const int* __restrict__ indptr_src, const int* __restrict__ indices_src,
        const T* __restrict__ data_src, int* __restrict__ owner, int* __restrict__ indptr,
        int* __restrict__ indices, T* __restrict__ data, const int k, const int nnz)
{
    const int m = max(k + 1, nnz);
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < m; q += gridDim.x * blockDim.x) {
        if (q < k) owner[q] = owner_src[q];
        if (q <= k) indptr[q] = indptr_src[q];
        if (q < nnz) {
            indices[q] = indices_src[q];
            data[q] = data_src[q];
        }
    }
}

// What a host check reads, in one transfer: the iteration count, its relative
// recursive residual and the breakdown flag.
extern "C" __global__ void bf_status(const int* __restrict__ counter, const T* __restrict__ hist,
        const T* __restrict__ scal, T* __restrict__ out)
{
    const int it = counter[0];
    out[0] = (T)it;
    out[1] = hist[it];
    out[2] = scal[3];
}

extern "C" __global__ void bf_dot_tiles(const T* __restrict__ a, const T* __restrict__ b,
        T* __restrict__ part, const long long n)
{
    __shared__ T shm[32];
    T acc[1] = {0.0};
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n;
         q += (long long)gridDim.x * blockDim.x)
        acc[0] += a[q] * b[q];
    block_sum<1>(acc, shm);
    if (threadIdx.x == 0) part[blockIdx.x] = acc[0];
}

// beta, rz and the history.  part_ry / part_rr: nry / nrr entries; with
// deflation r.y' = r.y + e . Z^T r, Z^T r of vector k at part_zr[owner[k]].
// The solve's 1 / ||b|| and relative tolerance are read from scal[5] and
// scal[6] (device memory: a captured graph stays valid from solve to solve).
// With ``take_out`` this kernel is also the condensed coarse solve's last
// step (bf_cs_out's twin): e = (t | y_S | 0)[take_out], minus its mean when
// E is singular; each thread gathers the entries it then reads.
extern "C" __global__ void bf_beta(const T* __restrict__ part_ry, const int nry,
        const T* __restrict__ part_rr, const int nrr,
        T* __restrict__ e, const T* __restrict__ part_zr, const int* __restrict__ owner,
        const int k, T* scal, T* hist, int* counter, const int start, const T* __restrict__ cs_t, const T* __restrict__ cs_yS,
        const int* __restrict__ take_out, const int GbM, const int nS, const int singular)
{
    __shared__ T shm[32];
    __shared__ T mean;
    if (scal[4] != 0.0) return;
    T mu = 0.0;
    if (take_out != NULL) {
        T m[1] = {0.0};
        for (int c = threadIdx.x; c < k; c += blockDim.x) {
            const int o = take_out[c];
            const T v = o < GbM ? cs_t[o] : (o < GbM + nS ? cs_yS[o - GbM] : 0.0);
            e[c] = v;
            m[0] += v;
        }
        if (singular) {
            block_sum<1>(m, shm);
            if (threadIdx.x == 0) mean = m[0] / k;
            __syncthreads();
            mu = mean;
        }
    }
    // r.y, r.r and e . Z^T r in one pass and one block reduction.
    T v[3] = {0.0, 0.0, 0.0};
    const int nmax = max(max(nry, nrr), k);
    for (int c = threadIdx.x; c < nmax; c += blockDim.x) {
        if (c < nry) v[0] += part_ry[c];
        if (c < nrr) v[1] += part_rr[c];
        if (c < k) {
            T ec = e[c];
            if (take_out != NULL && singular) {
                ec -= mu;
                e[c] = ec;
            }
            v[2] += ec * part_zr[owner[c]];
        }
    }
    block_sum<3>(v, shm);
    T ry = v[0];
    const T rr = v[1];
    if (threadIdx.x == 0) {
        ry += v[2];
        T bad = scal[3];
        if (!(ry >= 0.0)) bad = 1.0;
        scal[3] = bad;
        if (start) {                     // the first direction is y itself
            scal[1] = 0.0;
            scal[2] = ry;
            return;
        }
        scal[1] = bad != 0.0 ? 0.0 : ry / scal[2];
        scal[2] = ry;
        const int it = counter[0] + 1;
        counter[0] = it;
        const T h = sqrt(rr) * scal[5];
        hist[it] = h;
        if (h <= scal[6]) scal[4] = 1.0;
    }
}

// Tiles (one per block) are walked by columns: thread t owns column
// c = t % BXP of the tile in chunk h = t / BXP of its rows (rows
// j0 + h BY / H .. j0 + (h + 1) BY / H), keeps the column's values of the
// rows below and above in registers, and takes its east and west
// neighbours from the adjacent lanes by warp shuffles (segments of SW =
// min(BXP, 32) lanes: one chunk of the tile's columns).  The first and the
// last lane of a segment read the one-cell halo themselves.  BXP is BX
// rounded up to a power of two (BX < 32) or to a multiple of 32; lanes past
// BX (and padding threads past H chunks) hold zeros and only join the
// shuffles.  Every value is read from memory once per cell (the halos of
// neighbouring tiles and chunks are cache hits), with no shared memory.
// Cell offsets of bf_direction_spmv: 32-bit where the grid allows (fewer
// registers, more warps in flight: measured faster, docs/performance_records.md).
#ifdef BF_IDX32
typedef int idx_t;
#else
typedef long long idx_t;
#endif

struct Walk {
    int ii, ja, jb, R;
    bool active, first, last;
};

__device__ __forceinline__ Walk walk_setup(const int nx, const int BX, const int BY,
                                           const int BXP, const int H, const int SW)
{
    Walk wk;
    const int t = threadIdx.x;
    const int ntx = nx / BX;
    const int i0 = (blockIdx.x % ntx) * BX, j0 = (blockIdx.x / ntx) * BY;
    const int c = t % BXP, h = t / BXP;
    wk.active = c < BX && h < H;
    wk.ii = i0 + c;
    wk.ja = h < H ? j0 + (h * BY) / H : j0;
    wk.jb = h < H ? j0 + ((h + 1) * BY) / H : j0;
    wk.R = (BY + H - 1) / H;                     // steps: the same for every lane
    const int sl = (t & 31) & (SW - 1);
    wk.first = sl == 0;
    wk.last = sl == SW - 1 || c == BX - 1;
    return wk;
}

// Row bands instead of tiles: block b walks columns i0 .. i0 + BX of strip
// b % (nx / BX) on rows band * ny / NB .. (band + 1) * ny / NB of band
// b / (nx / BX), one thread per column (BXP threads a block, or a warp).
__device__ __forceinline__ Walk walk_band(const int nx, const int ny, const int BX,
                                          const int NB, const int BXP, const int SW)
{
    Walk wk;
    const int t = threadIdx.x;
    const int ntx = nx / BX;
    const int band = blockIdx.x / ntx;
    const int c = t % BXP;
    wk.active = c < BX && t < BXP;
    wk.ii = (blockIdx.x % ntx) * BX + c;
    wk.ja = (band * ny) / NB;                    // ny * NB < 2^31 (checked by the host)
    wk.jb = ((band + 1) * ny) / NB;
    wk.R = (ny + NB - 1) / NB;
    const int sl = (t & 31) & (SW - 1);
    wk.first = sl == 0;
    wk.last = sl == SW - 1 || c == BX - 1;
    return wk;
}

#define FULL_MASK 0xffffffffu

// The vector label of cell (jj, ii), 0 outside the grid or without labels.
__device__ __forceinline__ int cell_label(const int* __restrict__ labels, const int jj,
        const int ii, const int nx, const int ny)
{
    if (labels == NULL || jj < 0 || jj >= ny || ii < 0 || ii >= nx) return 0;
    return labels[(idx_t)jj * nx + ii];
}

// p' at (jj, ii): y + beta p (+ e of the cell's vector, its label read a row
// earlier so that the gather waits for one load only); 0 outside the grid.
__device__ __forceinline__ T dir_value(const T* __restrict__ y, const T* __restrict__ p,
        const T* __restrict__ e, const bool deflate, const int lab, const T beta,
        const int jj, const int ii, const int nx, const int ny)
{
    if (jj < 0 || jj >= ny || ii < 0 || ii >= nx) return 0.0;
    const idx_t q = (idx_t)jj * nx + ii;
    T v = y[q] + beta * p[q];
    if (deflate) v += e[lab];
    return v;
}

// One tile per block: p' = y + Z e + beta p (p is double-buffered), w = A p'
// and the tile's sum of p' . w.  The first and the last lane of a segment
// also walk a halo column ``ih`` (the west one for the first lane, else the
// east one: a neighbour's column, cache hits); a lane that is first and
// last of its segment (one-lane segments) reads its east halo separately.
// (Halo loads by every lane, the earlier form, were measured slower here;
// bf_update keeps them: there the predicated form was slower.  Figures:
// docs/performance_records.md.)
extern "C" __global__ void bf_direction_spmv(const T* __restrict__ y, const T* __restrict__ e,
        const int* __restrict__ labels, const T* __restrict__ scal,
        const T* __restrict__ p_old, T* __restrict__ p_new, T* __restrict__ w,
        const T* __restrict__ cx, const T* __restrict__ cy, T* __restrict__ part_pw,
        const int nx, const int ny, const int BX, const int BY, const int BXP, const int H)
{
    __shared__ T red[32];
    if (scal[4] != 0.0) return;
    const T beta = scal[1];
    const int SW = BXP < 32 ? BXP : 32;
#ifdef DIR_BANDS
    const Walk wk = walk_band(nx, ny, BX, BY, BXP, SW);       // BY: the number of bands
#else
    const Walk wk = walk_setup(nx, BX, BY, BXP, H, SW);
#endif
    const int ii = wk.ii;
    const int ih = wk.first ? ii - 1 : ii + 1;
    const bool both = wk.first && wk.last;
    const bool dfl = labels != NULL;
    const bool act = wk.active;
    const bool acth = act && (wk.first || wk.last);
    T acc[1] = {0.0};
    const int ja = wk.ja;
    T pS = act ? dir_value(y, p_old, e, dfl, cell_label(labels, ja - 1, ii, nx, ny), beta,
                           ja - 1, ii, nx, ny) : 0.0;
    T pC = act ? dir_value(y, p_old, e, dfl, cell_label(labels, ja, ii, nx, ny), beta,
                           ja, ii, nx, ny) : 0.0;
    T pHC = acth ? dir_value(y, p_old, e, dfl, cell_label(labels, ja, ih, nx, ny), beta,
                            ja, ih, nx, ny) : 0.0;
    int labN = act ? cell_label(labels, ja + 1, ii, nx, ny) : 0;
    int labHN = acth ? cell_label(labels, ja + 1, ih, nx, ny) : 0;
    T cS = (act && ja > 0 && ja < ny) ? cy[(idx_t)(ja - 1) * nx + ii] : 0.0;
    for (int s = 0; s < wk.R; ++s) {
        const int jj = ja + s;
        const bool on = act && jj < wk.jb;
        const T pN = on ? dir_value(y, p_old, e, dfl, labN, beta, jj + 1, ii, nx, ny) : 0.0;
        const bool onh = on && acth;
        const T pHN = onh ? dir_value(y, p_old, e, dfl, labHN, beta, jj + 1, ih, nx, ny) : 0.0;
        labN = on ? cell_label(labels, jj + 2, ii, nx, ny) : 0;
        labHN = onh ? cell_label(labels, jj + 2, ih, nx, ny) : 0;
        const T cN = (on && jj < ny - 1) ? cy[(idx_t)jj * nx + ii] : 0.0;
        const T cE = (on && ii < nx - 1) ? cx[(idx_t)jj * (nx - 1) + ii] : 0.0;
        const T cH = (onh && ih >= 0 && ih < nx - 1) ? cx[(idx_t)jj * (nx - 1) + ih] : 0.0;
        T pW = __shfl_up_sync(FULL_MASK, pC, 1, SW);
        T cW = __shfl_up_sync(FULL_MASK, cE, 1, SW);
        T pE = __shfl_down_sync(FULL_MASK, pC, 1, SW);
        if (wk.first) { pW = pHC; cW = cH; }
        if (wk.last) pE = pHC;
        if (both) pE = on ? dir_value(y, p_old, e, dfl, cell_label(labels, jj, ii + 1, nx, ny),
                                      beta, jj, ii + 1, nx, ny) : 0.0;
        if (on) {
            T aw = 0.0;
            if (ii > 0)      aw += cW * (pC - pW);
            if (ii < nx - 1) aw += cE * (pC - pE);
            if (jj > 0)      aw += cS * (pC - pS);
            if (jj < ny - 1) aw += cN * (pC - pN);
            const idx_t q = (idx_t)jj * nx + ii;
            p_new[q] = pC;
            w[q] = aw;
            acc[0] += pC * aw;
        }
        pS = pC;
        pC = pN;
        pHC = pHN;
        cS = cN;
    }
    block_sum<1>(acc, red);
    if (threadIdx.x == 0) part_pw[blockIdx.x] = acc[0];
}

// g[k] = Z^T r [k] - sum_j AZT[k, j] y[j]: one block per row (a row holds the
// cells along the vector's cut faces, hundreds of entries: a warp per row
// waited on a chain of dependent loads).
extern "C" __global__ void bf_restrict(const int* __restrict__ indptr, const int* __restrict__ indices,
        const T* __restrict__ data, const T* __restrict__ y, const T* __restrict__ part_zr,
        const int* __restrict__ owner, T* __restrict__ g, const int k, const T* __restrict__ scal)
{
    __shared__ T shm[32];
    if (scal[4] != 0.0) return;
    const int row = blockIdx.x;
    T v[1] = {0.0};
    for (int c = indptr[row] + threadIdx.x; c < indptr[row + 1]; c += blockDim.x)
        v[0] += data[c] * y[indices[c]];
    block_sum<1>(v, shm);
    if (threadIdx.x == 0) g[row] = part_zr[owner[row]] - v[0];
}

#include "fused_update.cu"
