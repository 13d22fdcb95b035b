// The block deflation space on the GPU (bubbleflow.linalg.deflation_cuda;
// twins in bubbleflow.linalg.deflation): parts, labels, (A Z)^T and E.
typedef double T;
#define NC 10
#include "common.cuh"

// One thread block per subdomain block: part = (phi < 0), and which parts of
// the block are present: present[2 B] (liquid), present[2 B + 1] (gas).
extern "C" __global__ void bf_defl_parts(const T* __restrict__ phi, signed char* __restrict__ part,
        bool* __restrict__ present, const int nx, const int bx, const int by, const int px)
{
    __shared__ int shm[32];
    const int B = blockIdx.x, bj = B / px, bi = B - bj * px;
    int cnt = 0;
    for (int w = threadIdx.x; w < bx * by; w += blockDim.x) {
        const int r = w / bx;
        const long long p = (long long)(bj * by + r) * nx + bi * bx + (w - r * bx);
        const signed char g = phi[p] < 0.0;
        part[p] = g;
        cnt += g;
    }
    cnt = warp_allsum(cnt);
    if ((threadIdx.x & 31) == 0) shm[threadIdx.x >> 5] = cnt;
    __syncthreads();
    if (threadIdx.x == 0) {
        int t = 0;
        for (int q = 0; q < (int)(blockDim.x >> 5); q++) t += shm[q];
        present[2 * B] = t < bx * by;
        present[2 * B + 1] = t > 0;
    }
}

// The vector of every cell: slot[nparts * block + part] (int32).
extern "C" __global__ void bf_defl_labels(const signed char* __restrict__ part,
        const long long* __restrict__ slot, int* __restrict__ lab, const int nx, const int ny,
        const int bx, const int by, const int px, const int nparts)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx) return;
    for (int j = blockIdx.y; j < ny; j += gridDim.y) {
        const long long p = (long long)j * nx + i;
        const int B = (j / by) * px + i / bx;
        const int P = nparts == 2 ? (int)part[p] : 0;
        lab[p] = (int)slot[(long long)B * nparts + P];
    }
}

// Face couplings: east of (j, i) is cx[j * sx + i], north is cy[j * nx + i];
// sign -1 when they are read from the (negative) E and N diagonals.
__device__ __forceinline__ T cpl(const T* __restrict__ a, const long long q, const T sign) {
    return sign * a[q];
}

// Row v of (A Z)^T and of E, one thread block per vector (with ``kcount``:
// the grid is the most vectors there can be, k = kcount[0] read here).  The row's cells lie
// in v's block widened by one cell (corners excluded): a cell p of v has the
// entry sum c over its faces to cells outside v, a cell p outside v has
// -sum c over its faces into v; a cell without such a face has none.  The
// block walks the window in row-major order, rounds of blockDim cells, so the
// entries are found in increasing cell order.  fill = 0: counts (entries of the
// row, and E's entries: the diagonal and every candidate with a face).  fill =
// 1: writes the row at azt_ptr[v] (an ordered block scan per round) and E's
// row as 10 candidates (direction S, W, self, E, N x part) with their sums.
extern "C" __global__ void bf_defl_rows(const int* __restrict__ lab,
        const signed char* __restrict__ part, const long long* __restrict__ original,
        const long long* __restrict__ slot, const int nparts,
        const T* __restrict__ cx, const int sx, const T* __restrict__ cy, const T sign,
        const int nx, const int ny, const int bx, const int by, const int px, const int py,
        int* __restrict__ azt_cnt, int* __restrict__ e_cnt,
        const int* __restrict__ azt_ptr, int* __restrict__ azt_idx, T* __restrict__ azt_val,
        T* __restrict__ ell_val, int* __restrict__ ell_col, const int fill,
        const int* __restrict__ kcount)
{
    __shared__ int wsum[32];
    __shared__ unsigned wmask[32];
    __shared__ T wacc[NC][32];
    const int v = blockIdx.x;
    if (kcount != NULL && v >= kcount[0]) return;   // launched for the most vectors there can be
    const long long o = original[v];
    const int B = (int)(o / nparts), P = (int)(o - (long long)(o / nparts) * nparts);
    const int bj = B / px, bi = B - bj * px;
    const int jb0 = bj * by, ib0 = bi * bx;
    const int j0 = jb0 > 0 ? jb0 - 1 : 0, j1 = jb0 + by < ny ? jb0 + by : ny - 1;
    const int i0 = ib0 > 0 ? ib0 - 1 : 0, i1 = ib0 + bx < nx ? ib0 + bx : nx - 1;
    const int wd = i1 - i0 + 1, total = wd * (j1 - j0 + 1);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int rowstart = fill ? azt_ptr[v] : 0;
    int cnt = 0, base = 0;
    unsigned mask = 0;
    T acc[NC];
    #pragma unroll
    for (int c = 0; c < NC; c++) acc[c] = 0.0;
    for (int r0 = 0; r0 < total; r0 += blockDim.x) {
        const int w = r0 + threadIdx.x;
        bool has = false;
        T val = 0.0;
        long long p = 0;
        if (w < total) {
            const int r = w / wd;
            const int j = j0 + r, i = i0 + (w - r * wd);
            const bool inj = j >= jb0 && j < jb0 + by, ini = i >= ib0 && i < ib0 + bx;
            if (inj || ini) {
                p = (long long)j * nx + i;
                const bool inv = lab[p] == v;
                T sum = 0.0;
                if (j > 0 && ((lab[p - nx] != v) == inv)) { sum += cpl(cy, p - nx, sign); has = true; }
                if (i > 0 && ((lab[p - 1] != v) == inv)) {
                    sum += cpl(cx, (long long)j * sx + i - 1, sign); has = true; }
                if (i < nx - 1 && ((lab[p + 1] != v) == inv)) {
                    sum += cpl(cx, (long long)j * sx + i, sign); has = true; }
                if (j < ny - 1 && ((lab[p + nx] != v) == inv)) { sum += cpl(cy, p, sign); has = true; }
                if (has) {
                    val = inv ? sum : -sum;
                    const int d = !inj ? (j < jb0 ? 0 : 4) : (!ini ? (i < ib0 ? 1 : 3) : 2);
                    const int c = 2 * d + (nparts == 2 ? (int)part[p] : 0);
                    if (!inv) mask |= 1u << c;
                    if (fill) {
                        #pragma unroll
                        for (int q = 0; q < NC; q++) if (q == c) acc[q] += val;
                    }
                    cnt++;
                }
            }
        }
        if (fill) {
            const unsigned bal = __ballot_sync(0xffffffffu, has);
            if (lane == 0) wsum[warp] = __popc(bal);
            __syncthreads();
            int off = 0, tot = 0;
            for (int q = 0; q < nwarps; q++) {
                const int c = wsum[q];
                off += q < warp ? c : 0;
                tot += c;
            }
            if (has) {
                const int pos = rowstart + base + off + __popc(bal & ((1u << lane) - 1u));
                azt_idx[pos] = (int)p;
                azt_val[pos] = val;
            }
            base += tot;
            __syncthreads();
        }
    }
    // Reductions in a fixed order (warp butterflies, then the warps in turn).
    cnt = warp_allsum(cnt);
    mask = warp_or(mask);
    if (lane == 0) { wsum[warp] = cnt; wmask[warp] = mask; }
    if (fill) {
        #pragma unroll
        for (int c = 0; c < NC; c++) {
            const T a = warp_allsum(acc[c]);
            if (lane == 0) wacc[c][warp] = a;
        }
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    int tcnt = 0;
    unsigned tmask = 1u << (4 + P);                 // the diagonal is always stored
    for (int q = 0; q < nwarps; q++) { tcnt += wsum[q]; tmask |= wmask[q]; }
    if (!fill) {
        azt_cnt[v] = tcnt;
        e_cnt[v] = __popc(tmask);
        return;
    }
    const int nb[5] = {bj > 0 ? B - px : -1, bi > 0 ? B - 1 : -1, B,
                       bi < px - 1 ? B + 1 : -1, bj < py - 1 ? B + px : -1};
    for (int c = 0; c < NC; c++) {
        T a = 0.0;
        for (int q = 0; q < nwarps; q++) a += wacc[c][q];
        const int d = c >> 1, pp = c & 1;
        const bool on = (tmask >> c) & 1u;
        ell_col[(long long)v * NC + c] = on ? (int)slot[(long long)nb[d] * nparts + pp] : -1;
        ell_val[(long long)v * NC + c] = a;
    }
}

// E in CSR from the candidate rows: the entry (v, w) is the mean of v's sum
// and w's (the same faces, summed in two orders): exactly symmetric.  The
// candidates of a row are in increasing vector order (blocks S < W < self <
// E < N, parts 0 < 1), so are the columns.
extern "C" __global__ void bf_defl_e(const T* __restrict__ ell_val, const int* __restrict__ ell_col,
        const long long* __restrict__ original, const int nparts, const int* __restrict__ e_ptr,
        int* __restrict__ e_idx, T* __restrict__ e_val, const int k)
{
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= k) return;
    const int P = (int)(original[v] % nparts);
    int pos = e_ptr[v];
    for (int c = 0; c < NC; c++) {
        const int w = ell_col[(long long)v * NC + c];
        if (w < 0) continue;
        T a = ell_val[(long long)v * NC + c];
        if (w != v) {
            const int m = 2 * (4 - (c >> 1)) + P;   // v among w's candidates
            a = 0.5 * (a + ell_val[(long long)w * NC + m]);
        }
        e_idx[pos] = w;
        e_val[pos] = a;
        pos++;
    }
}

// An exclusive scan of the flags or counts a[0 .. n) by one block of
// blockDim.x threads (a multiple of 32, at most 1024), each thread a run of
// consecutive entries: every thread gets the sum of the runs before its own
// (``before``), and the block's total.  Integer sums: exact in any order.
__device__ __forceinline__ int block_runs_before(const int mine, int* shm, int* total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    int incl = mine;
    for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
    }
    if (lane == 31) shm[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        int w = lane < nwarps ? shm[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += v;
        }
        if (lane < nwarps) shm[lane] = w;       // inclusive sums of the warps
    }
    __syncthreads();
    *total = shm[nwarps - 1];
    return incl - mine + (warp > 0 ? shm[warp - 1] : 0);
}

// The vectors of a level-set block space from the parts present (one block):
// slot[i] = the vector of (block, part) i = 2 B + P (-1 where that part is
// empty) and lut = slot as int32; for every vector c: original[c] = its
// (block, part) index, owner[c] = the same as int32 (where the engines' per-
// tile sums of Z^T r land), groups[c] = its block; sizes[0] = k.
extern "C" __global__ void bf_defl_table(const bool* __restrict__ present, const int total,
        long long* __restrict__ slot, int* __restrict__ lut, long long* __restrict__ original,
        int* __restrict__ owner, int* __restrict__ groups, int* __restrict__ sizes)
{
    __shared__ int shm[32];
    const int per = (total + blockDim.x - 1) / blockDim.x;
    const int i0 = min(total, (int)threadIdx.x * per), i1 = min(total, i0 + per);
    int mine = 0;
    for (int i = i0; i < i1; ++i) mine += present[i] ? 1 : 0;
    int k;
    int c = block_runs_before(mine, shm, &k);
    for (int i = i0; i < i1; ++i) {
        if (present[i]) {
            slot[i] = c;
            lut[i] = c;
            original[c] = i;
            owner[c] = i;
            groups[c] = i / 2;
            ++c;
        } else {
            slot[i] = -1;
            lut[i] = -1;
        }
    }
    if (threadIdx.x == 0) sizes[0] = k;
}

// Row pointers of (A Z)^T and E from the counts of bf_defl_rows (one block):
// ptr[0] = 0, ptr[v + 1] = ptr[v] + cnt[v] for the k = sizes[0] vectors;
// sizes[1], sizes[2] = the numbers of entries.
extern "C" __global__ void bf_defl_ptrs(const int* __restrict__ azt_cnt,
        const int* __restrict__ e_cnt, int* __restrict__ azt_ptr, int* __restrict__ e_ptr,
        int* __restrict__ sizes)
{
    __shared__ int shm[32];
    const int k = sizes[0];
    const int per = (k + blockDim.x - 1) / blockDim.x;
    const int i0 = min(k, (int)threadIdx.x * per), i1 = min(k, i0 + per);
    for (int pass = 0; pass < 2; ++pass) {
        const int* cnt = pass == 0 ? azt_cnt : e_cnt;
        int* ptr = pass == 0 ? azt_ptr : e_ptr;
        int mine = 0;
        for (int i = i0; i < i1; ++i) mine += cnt[i];
        int tot;
        int c = block_runs_before(mine, shm, &tot);
        for (int i = i0; i < i1; ++i) {
            c += cnt[i];
            ptr[i + 1] = c;
        }
        if (threadIdx.x == 0) {
            ptr[0] = 0;
            sizes[1 + pass] = tot;
        }
        __syncthreads();
    }
}
