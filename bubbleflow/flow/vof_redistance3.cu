// The level set rebuilt from the volume fraction in 3-D
// (bubbleflow.flow.vof_redistance; twin: redistance_3d): the 2-D kernels'
// file and the 3-D ones.  A file of its own so that a 2-D run compiles none
// of it.
// The 2-D source's shared device code and kernels, without its 2-D-only kernels.
#define BF_WITHOUT_2D_KERNELS
#include "vof_redistance.cu"
#include "plic3.cuh"

// ---------------------------------------------------------------------------
// 3-D.  Cells (k, j, i) stored plane after plane, p = (k * ny + j) * nx + i.
// The kernels:
//   bf_vof_rd3_planes: per cell of the gas's box widened by one, the flags
//     (an interface cell, the interface faces it holds and their sense, the
//     band seed) and, for an interface cell, its PLIC plane m . X = d, X
//     from the cell centre (vof_redistance's plane layers, with the normals
//     of phi);
//   bf_vof_rd3_reach: in the region (the gas's box widened by the band, its
//     own arrays), each cell's Chebyshev distance to the nearest band seed, one
//     axis a launch; vof_redistance's band is the cells within `band` of a
//     seed;
//   bf_vof_rd3_outside: the level set outside the band;
//   bf_vof_rd3_band_blocks: the band's cells, block after block, as flags
//     (their positions listed for the search);
//   bf_vof_rd3_bits: the region's patch cells as bits, a word a block of
//     4 x 4 x 4 cells;
//   bf_vof_rd3_search: per band cell (a list), the nearest patch among the
//     cells in reach, block by block, the array code's choice among equal
//     ones; then the level set with the own-side sign.
// Past the region every cell is as far as the distances count (no seed
// within the band), so the region's kernels take a read outside it as far,
// and its distances are the whole grid's.
// ---------------------------------------------------------------------------
#define BF_RD3_MASK 1
#define BF_RD3_FACE 2        // + 2 * axis: the face towards +axis is an interface face
#define BF_RD3_NEG 16        // << axis: ... with the gas above it (sense -1)
#define BF_RD3_SEED 128
#define BF_RD3_NPLANE 4      // per interface cell: mx, my, mz, d
#define BF_RD3_PATCH (BF_RD3_MASK | (7 * BF_RD3_FACE))   // the cell holds a patch

// Over the cells (k0 + k, j0 + j, i0 + i), k < rz, j < ry, i < rx: the
// gas's box widened by one cell, which holds every patch and seed (a face's
// patch and seeds lie beside a full cell); the flags elsewhere stay zero.
extern "C" __global__ void bf_vof_rd3_planes(
    const T* __restrict__ phi, const T* __restrict__ c, unsigned char* __restrict__ flags,
    T* __restrict__ planes, const int nx, const int ny, const int nz, const int i0,
    const int j0, const int k0, const int rx, const int ry, const int rz, const T hx,
    const T hy, const T hz, const T tol, const T one_tol)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(rx, ry, rz) {
        const int gi = i + i0, gj = j + j0, gk = k + k0;      // the cell in the grid
        const long long p = (long long)gk * plane + (long long)gj * nx + gi;
        const T cc = c[p];
        const bool mask = cc > tol && cc < one_tol;               // plic_reconstruction.interface_mask
        const int idx[3] = {gi, gj, gk};
        const int n[3] = {nx, ny, nz};
        const long long stride[3] = {1, nx, plane};
        int fl = mask ? BF_RD3_MASK : 0;
        bool seed = mask;
        for (int a = 0; a < 3; ++a) {
            const int s = idx[a] < n[a] - 1 ? face_sense(cc, c[p + stride[a]], tol, one_tol) : 0;
            if (s != 0) fl |= BF_RD3_FACE << a;
            if (s < 0) fl |= BF_RD3_NEG << a;
            seed = seed || s != 0 || (idx[a] > 0 && face_sense(c[p - stride[a]], cc, tol, one_tol) != 0);
        }
        if (seed) fl |= BF_RD3_SEED;
        flags[p] = (unsigned char)fl;
        if (mask) {
            T m[3];
            vof_phi_normal3(phi, nx, ny, nz, gk, gj, gi, hx, hy, hz, m);
            const T alpha = vof_plane_constant(m, cc, hx, hy, hz);
            T* out = planes + p * BF_RD3_NPLANE;
            out[0] = m[0];
            out[1] = m[1];
            out[2] = m[2];
            out[3] = alpha - 0.5 * (0.0 + m[0] * hx + m[1] * hy + m[2] * hz);   // sum() from 0
        }
    }
}

// Cell (k, j, i)'s grid line along `axis` (0 x, 1 y, 2 z): its stride, the
// cell's index on it and its length.
struct Line3 {
    long long stride;
    int at, n;
};

__device__ __forceinline__ Line3 line3(int axis, int nx, int ny, int nz, int k, int j, int i)
{
    if (axis == 0) return Line3{1, i, nx};
    if (axis == 1) return Line3{(long long)nx, j, ny};
    return Line3{(long long)nx * ny, k, nz};
}

// The region: the grid's cells (k0 + k, j0 + j, i0 + i) for k < rz, j < ry,
// i < rx, its own arrays stored plane after plane.
struct Region3 {
    int i0, j0, k0, rx, ry, rz;
};

// A region cell's Chebyshev distance to the nearest band seed (at most
// band + 1 = seed_cap).  One axis a launch, three make the distances: first
// from the flags, then out[p] = min over s of max(|s|, in[p + s stride]).
extern "C" __global__ void bf_vof_rd3_reach(
    const unsigned char* __restrict__ flags, const unsigned char* __restrict__ in,
    unsigned char* __restrict__ out, const int first, const int axis, const int seed_cap,
    const int nx, const int ny, const int i0, const int j0, const int k0, const int rx,
    const int ry, const int rz)
{
    BF_CELLS3_RUNS(rx, ry, rz) {
        const long long p = ((long long)k * ry + j) * rx + i;
        const Line3 line = line3(axis, rx, ry, rz, k, j, i);
        const long long g = ((long long)(k + k0) * ny + (j + j0)) * nx + (i + i0);
        const long long gstride = axis == 0 ? 1 : (axis == 1 ? (long long)nx : (long long)nx * ny);
        int seed = seed_cap;
        const int lo = line.at - seed_cap < 0 ? -line.at : -seed_cap;
        const int hi = line.at + seed_cap > line.n - 1 ? line.n - 1 - line.at : seed_cap;
        for (int s = lo; s <= hi; ++s) {
            const int ds = first ? ((flags[g + s * gstride] & BF_RD3_SEED) ? 0 : seed_cap)
                                 : in[p + s * line.stride];
            seed = min(seed, max(s < 0 ? -s : s, ds));
        }
        out[p] = (unsigned char)seed;
    }
}

// vof_redistance's own-side sign of cell p.
__device__ __forceinline__ T rd3_own(T cc, int fl, const T* __restrict__ planes, long long p,
                                     T tol, T one_tol)
{
    T own = cc >= one_tol ? -1.0
          : (cc <= tol ? 1.0 : ((fl & BF_RD3_MASK) ? np_sign(-planes[p * BF_RD3_NPLANE + 3]) : 0.0));
    return own == 0.0 ? (cc > 0.5 ? -1.0 : 1.0) : own;
}

// The new level set outside the band (the cells of the region whose seed
// distance is at most band, and no other): far = band * min(h) with the
// own-side sign.
extern "C" __global__ void bf_vof_rd3_outside(
    const T* __restrict__ phi, const T* __restrict__ c, const unsigned char* __restrict__ flags,
    const unsigned char* __restrict__ dist, const int band, const int i0, const int j0,
    const int k0, const int rx, const int ry, const int rz, const T* __restrict__ planes,
    T* __restrict__ out, const int nx, const int ny, const int nz, const T far, const T tol,
    const T one_tol)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3_RUNS(nx, ny, nz) {
        const long long p = (long long)k * plane + (long long)j * nx + i;
        const int li = i - i0, lj = j - j0, lk = k - k0;
        if (li >= 0 && li < rx && lj >= 0 && lj < ry && lk >= 0 && lk < rz
            && dist[((long long)lk * ry + lj) * rx + li] <= band)
            continue;
        out[p] = rd3_own(c[p], flags[p], planes, p, tol, one_tol) * far;
    }
}

// The region's cells holding a patch as bits, a word a block of 4 x 4 x 4
// cells (bz, by, bx blocks, plane after plane): bit z * 16 + y * 4 + x for
// the block's cell (z, y, x).
extern "C" __global__ void bf_vof_rd3_bits(
    const unsigned char* __restrict__ flags, unsigned long long* __restrict__ bits, const int nx,
    const int ny, const int i0, const int j0, const int k0, const int rx, const int ry,
    const int rz, const int bx, const int by, const int bz)
{
    BF_CELLS3(bx, by, bz) {
        unsigned long long m = 0;
        for (int b = 0; b < 64; ++b) {
            const int li = 4 * i + (b & 3), lj = 4 * j + ((b >> 2) & 3), lk = 4 * k + (b >> 4);
            if (li < rx && lj < ry && lk < rz
                && (flags[((long long)(lk + k0) * ny + (lj + j0)) * nx + (li + i0)] & BF_RD3_PATCH))
                m |= 1ULL << b;
        }
        bits[((long long)k * by + j) * bx + i] = m;
    }
}

// Position t of the region padded to whole blocks of 4 x 4 x 4 cells, taken
// block after block (the bz x by x bx blocks plane after plane, a block's
// cells as bf_vof_rd3_bits' bits): its region cell (lk, lj, li).
__device__ __forceinline__ void rd3_block_cell(long long t, int bx, int by, int* lk, int* lj,
                                               int* li)
{
    const int b = (int)(t & 63);
    const long long blk = t >> 6;
    const long long row = blk / bx;
    const int ei = (int)(blk - row * bx), ej = (int)(row % by), ek = (int)(row / by);
    *li = 4 * ei + (b & 3);
    *lj = 4 * ej + ((b >> 2) & 3);
    *lk = 4 * ek + (b >> 4);
}

// Per position t of the padded region in block order (rd3_block_cell),
// whether it is a band cell (its seed distance at most band): the search's
// list, in that order, gives a warp the cells of one or two blocks, whose
// threads then meet the same blocks and patches in step.
extern "C" __global__ void bf_vof_rd3_band_blocks(
    const unsigned char* __restrict__ dist, bool* __restrict__ in_band, const int band,
    const int rx, const int ry, const int rz, const int bx, const int by, const long long n)
{
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        int lk, lj, li;
        rd3_block_cell(t, bx, by, &lk, &lj, &li);
        in_band[t] = lk < rz && lj < ry && li < rx
                     && dist[((long long)lk * ry + lj) * rx + li] <= band;
    }
}

// One patch of vof_redistance's search seen from X (from the patch cell's
// centre): plane m . X = d; vof_redistance._patch_distance in 3-D with the
// box bound box2.  The first met of equal distances is the least key: keep
// the patch if strictly nearer than *best, or as near and of a smaller key
// than the kept one's (none is kept before one nearer than +inf).
__device__ __forceinline__ void visit3(const T* X, const T* m, T d, const T* half, T box2,
                                             int key, T* best, int* best_key, T* side)
{
    const T s = m[0] * X[0] + m[1] * X[1] + m[2] * X[2] - d;
    T dist2 = s * s;
    for (int a = 0; a < 3; ++a) {
        const T e = np_max(fabs(X[a] - s * m[a]) - half[a], 0.0);
        dist2 = dist2 + e * e;
    }
    dist2 = np_max(dist2, box2);
    if (dist2 < *best || (dist2 == *best && key < *best_key)) {
        *best = dist2;
        *best_key = key;
        *side = np_sign(s);
    }
}

// How far, in cells, a cell at index c lies from the cells lo..lo + 3 along
// an axis: to their box's nearer face, 0 if among them.
__device__ __forceinline__ T rd3_block_gap(int c, int lo)
{
    return c < lo ? T(lo - c) - 0.5 : (c > lo + 3 ? T(c - lo - 3) - 0.5 : T(0));
}

// The new level set in the band: per band cell of the list `cells` (their
// flat positions in the region), the nearest patch among the cells within
// wk, wj, wi cells (per array axis) that hold one.  The array code visits
// those offsets nearest first (rank[] of an offset: its place in that
// order), within an offset its layers in its order (the cell's plane, then
// the x, y and z faces), and keeps the first met of equal distances: so the
// nearest wins here, and of equal ones the least key, 4 rank + layer; the
// order of the visits then is free.  They go block by block (bits), the
// n_near block offsets near a cell's block (triples dk, dj, di) by their
// floor (near_floor: the least squared distance from any cell of a block to
// that block's box), one order for every cell (a warp's threads load the
// same blocks' words), the search ending at the first block whose floor is
// past the best yet, a block skipped where its box is farther than it (each
// of its patches' distances is at least its cell's box2[rank], the array
// code's floor, and that at least the block's), a cell of a block the same
// way.  The list holds the band's positions in block order
// (bf_vof_rd3_band_blocks), so a warp's threads meet the same blocks.
// counts as bf_vof_rd_search's.
extern "C" __global__ void bf_vof_rd3_search(
    const long long* __restrict__ cells, const long long n_cells, const T* __restrict__ c,
    const unsigned char* __restrict__ flags, const T* __restrict__ planes,
    const unsigned long long* __restrict__ bits, const int* __restrict__ near,
    const T* __restrict__ near_floor, const int n_near,
    const int* __restrict__ rank, const T* __restrict__ box2,
    T* __restrict__ out, unsigned long long* __restrict__ counts, const int count, const int nx,
    const int ny, const T hx, const T hy, const T hz, const T tol, const T one_tol, const int i0,
    const int j0, const int k0, const int rx, const int ry, const int rz, const int wi,
    const int wj, const int wk)
{
    const long long plane = (long long)nx * ny;
    const int bx = (rx + 3) >> 2, by = (ry + 3) >> 2, bz = (rz + 3) >> 2;
    const T h[3] = {hx, hy, hz};
    const T half[3] = {0.5 * hx, 0.5 * hy, 0.5 * hz};
    // A block's floor, shrunk past rounding: never above a cell's box2.
    const T shrink = 1.0 - 1e-9;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n_cells;
         t += (long long)gridDim.x * blockDim.x) {
        int lk, lj, li;
        rd3_block_cell(cells[t], bx, by, &lk, &lj, &li);
        const long long p = ((long long)(lk + k0) * ny + (lj + j0)) * nx + (li + i0);
        const T own = rd3_own(c[p], flags[p], planes, p, tol, one_tol);
        T best = __longlong_as_double(0x7ff0000000000000LL);   // +inf
        int best_key = 0x7fffffff;
        T side = 0.0;
        for (int n = 0; n < n_near; ++n) {
            if (near_floor[n] * shrink > best) break;    // this block and every later one farther
            const int ek = (lk >> 2) + near[3 * n], ej = (lj >> 2) + near[3 * n + 1],
                      ei = (li >> 2) + near[3 * n + 2];
            if (ek < 0 || ek >= bz || ej < 0 || ej >= by || ei < 0 || ei >= bx) continue;
            unsigned long long m = bits[((long long)ek * by + ej) * bx + ei];
            if (m == 0) continue;
            const T gx = rd3_block_gap(li, 4 * ei) * hx, gy = rd3_block_gap(lj, 4 * ej) * hy,
                    gz = rd3_block_gap(lk, 4 * ek) * hz;
            if ((gx * gx + gy * gy + gz * gz) * shrink > best) continue;
            while (m != 0) {
                const int b = __ffsll((long long)m) - 1;
                m &= m - 1;
                const int di = 4 * ei + (b & 3) - li, dj = 4 * ej + ((b >> 2) & 3) - lj,
                          dk = 4 * ek + (b >> 4) - lk;
                if (abs(di) > wi || abs(dj) > wj || abs(dk) > wk) continue;
                const int o = rank[((dk + wk) * (2 * wj + 1) + (dj + wj)) * (2 * wi + 1) + di + wi];
                if (box2[o] > best) continue;     // every patch of the cell is farther
                const long long q = p + (long long)dk * plane + (long long)dj * nx + di;
                const int f = flags[q];
                // This centre seen from the neighbour's centre, per grid axis.
                const T X[3] = {(T)(-di) * h[0], (T)(-dj) * h[1], (T)(-dk) * h[2]};
                if (f & BF_RD3_MASK) {
                    const T* pl = planes + q * BF_RD3_NPLANE;
                    visit3(X, pl, pl[3], half, box2[o], 4 * o, &best, &best_key, &side);
                }
                for (int a = 0; a < 3; ++a) {
                    if (!(f & (BF_RD3_FACE << a))) continue;
                    const T sense = (f & (BF_RD3_NEG << a)) ? -1.0 : 1.0;
                    const T mv[3] = {a == 0 ? sense : 0.0, a == 1 ? sense : 0.0,
                                     a == 2 ? sense : 0.0};
                    visit3(X, mv, sense * half[a], half, box2[o], 4 * o + 1 + a, &best,
                           &best_key, &side);
                }
            }
        }
        out[p] = own * sqrt(best);
        if (count) {
            atomicAdd(counts, 1ULL);
            if (side != own && side != 0.0) atomicAdd(counts + 1, 1ULL);
        }
    }
}
