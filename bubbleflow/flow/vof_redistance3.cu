// The level set rebuilt from the volume fraction in 3-D
// (bubbleflow.flow.vof_redistance; twin: redistance_3d): the 2-D kernels'
// file and the 3-D ones.  A file of its own so that a 2-D run compiles none
// of it.
#include "vof_redistance.cu"
#include "plic3.cuh"

// ---------------------------------------------------------------------------
// 3-D.  Cells (k, j, i) stored plane after plane, p = (k * ny + j) * nx + i.
// The kernels:
//   bf_vof_rd3_planes: per cell, the flags (an interface cell, the interface
//     faces it holds and their sense, the band seed) and, for an interface
//     cell, its PLIC plane m . X = d, X from the cell centre (vof_redistance's
//     plane layers, with the normals of phi);
//   bf_vof_rd3_dilate: the band grown along one axis (three launches make
//     vof_redistance's Chebyshev dilation);
//   bf_vof_rd3_gap: each cell's Chebyshev gap to the nearest cell holding a
//     patch, one axis a launch;
//   bf_vof_rd3_outside: the level set outside the band;
//   bf_vof_rd3_search: per band cell (a list), the nearest patch among the
//     cells in reach (the offsets in the array code's order, its layers in
//     its order: the cell's plane, then the x, y and z faces; the first met
//     winning a tie), stopping where no later offset's box can be nearer (as
//     the array code's cells drop out); then the level set with the own-side
//     sign.
// ---------------------------------------------------------------------------
#define BF_RD3_MASK 1
#define BF_RD3_FACE 2        // + 2 * axis: the face towards +axis is an interface face
#define BF_RD3_NEG 16        // << axis: ... with the gas above it (sense -1)
#define BF_RD3_SEED 128
#define BF_RD3_NPLANE 4      // per interface cell: mx, my, mz, d

extern "C" __global__ void bf_vof_rd3_planes(
    const T* __restrict__ phi, const T* __restrict__ c, unsigned char* __restrict__ flags,
    T* __restrict__ planes, const int nx, const int ny, const int nz, const T hx, const T hy,
    const T hz, const T tol, const T one_tol)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long p = (long long)k * plane + (long long)j * nx + i;
        const T cc = c[p];
        const bool mask = cc > tol && cc < one_tol;               // plic_reconstruction.interface_mask
        const int idx[3] = {i, j, k};
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
            vof_phi_normal3(phi, nx, ny, nz, k, j, i, hx, hy, hz, m);
            const T alpha = vof_plane_constant(m, cc, hx, hy, hz);
            T* out = planes + p * BF_RD3_NPLANE;
            out[0] = m[0];
            out[1] = m[1];
            out[2] = m[2];
            out[3] = alpha - 0.5 * (0.0 + m[0] * hx + m[1] * hy + m[2] * hz);   // sum() from 0
        }
    }
}

// out = 1 where a cell within `band` cells along `axis` has (in & bit), else 0.
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

extern "C" __global__ void bf_vof_rd3_dilate(
    const unsigned char* __restrict__ in, unsigned char* __restrict__ out, const int bit,
    const int axis, const int band, const int nx, const int ny, const int nz)
{
    BF_CELLS3(nx, ny, nz) {
        const long long p = ((long long)k * ny + j) * nx + i;
        const Line3 line = line3(axis, nx, ny, nz, k, j, i);
        const int lo = line.at - band < 0 ? 0 : line.at - band;
        const int hi = line.at + band > line.n - 1 ? line.n - 1 : line.at + band;
        unsigned char hit = 0;
        for (int s = lo; s <= hi && !hit; ++s)
            hit = (in[p + (long long)(s - line.at) * line.stride] & bit) ? 1 : 0;
        out[p] = hit;
    }
}

// The Chebyshev distance in cells to the nearest cell holding a patch, at
// most cap, one axis a launch (three make it): first (axis 0) from the
// flags, then out[p] = min over |s| <= cap of max(|s|, in[p + s stride]).
extern "C" __global__ void bf_vof_rd3_gap(
    const unsigned char* __restrict__ flags, const unsigned char* __restrict__ in,
    unsigned char* __restrict__ out, const int first, const int axis, const int cap,
    const int nx, const int ny, const int nz)
{
    BF_CELLS3(nx, ny, nz) {
        const long long p = ((long long)k * ny + j) * nx + i;
        const Line3 line = line3(axis, nx, ny, nz, k, j, i);
        int best = cap;
        for (int s = -cap; s <= cap; ++s) {
            const int q = line.at + s;
            if (q < 0 || q >= line.n) continue;
            const long long r = p + (long long)s * line.stride;
            const int d = first ? ((flags[r] & (BF_RD3_MASK | (7 * BF_RD3_FACE))) ? 0 : cap) : in[r];
            const int e = (s < 0 ? -s : s) > d ? (s < 0 ? -s : s) : d;
            if (e < best) best = e;
        }
        out[p] = (unsigned char)best;
    }
}

// One patch of vof_redistance's search seen from X (from the patch cell's centre):
// plane m . X = d; vof_redistance._patch_distance in 3-D with the box bound box2.  Keep it if
// strictly nearer than *best.
__device__ __forceinline__ void visit3(const T* X, const T* m, T d, const T* half, T box2,
                                       T* best, T* side)
{
    const T s = m[0] * X[0] + m[1] * X[1] + m[2] * X[2] - d;
    T dist2 = s * s;
    for (int a = 0; a < 3; ++a) {
        const T e = np_max(fabs(X[a] - s * m[a]) - half[a], 0.0);
        dist2 = dist2 + e * e;
    }
    dist2 = np_max(dist2, box2);
    if (dist2 < *best) {
        *best = dist2;
        *side = np_sign(s);
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

// The new level set outside the band: the old distance, at least floor_,
// with the own-side sign.  floor_ = band * min(h).
extern "C" __global__ void bf_vof_rd3_outside(
    const T* __restrict__ phi, const T* __restrict__ c, const unsigned char* __restrict__ flags,
    const unsigned char* __restrict__ in_band, const T* __restrict__ planes, T* __restrict__ out,
    const int nx, const int ny, const int nz, const T floor_, const T tol, const T one_tol)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long p = (long long)k * plane + (long long)j * nx + i;
        if (in_band[p]) continue;
        out[p] = rd3_own(c[p], flags[p], planes, p, tol, one_tol) * np_max(fabs(phi[p]), floor_);
    }
}

// The new level set in the band: per band cell of the list `cells` (flat
// positions), the nearest patch.  offsets: n_offsets triples (dk, dj, di),
// nearest first as vof_redistance's search sorts them; box2[o] the squared
// distance to the offset's cell's box, later[o] the least of box2[o..].  A
// cell starts at lead[gap[p]]: the offsets shorter than its gap to the
// nearest cell holding a patch (every axis) hold none.  The list holds the
// cells of one gap together, so a warp's threads start at one offset and
// stop near each other.  counts as bf_vof_rd_search's.
extern "C" __global__ void bf_vof_rd3_search(
    const long long* __restrict__ cells, const long long n_cells, const T* __restrict__ c,
    const unsigned char* __restrict__ flags, const T* __restrict__ planes,
    const int* __restrict__ offsets, const T* __restrict__ box2, const T* __restrict__ later,
    const int n_offsets, T* __restrict__ out, unsigned long long* __restrict__ counts,
    const int count, const int nx, const int ny, const int nz, const T hx, const T hy,
    const T hz, const T tol, const T one_tol, const unsigned char* __restrict__ gap,
    const int* __restrict__ lead)
{
    const long long plane = (long long)nx * ny;
    const T h[3] = {hx, hy, hz};
    const T half[3] = {0.5 * hx, 0.5 * hy, 0.5 * hz};
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n_cells;
         t += (long long)gridDim.x * blockDim.x) {
        const long long p = cells[t];
        int k, j, i;
        bf_cell3(p, nx, plane, &k, &j, &i);
        const T own = rd3_own(c[p], flags[p], planes, p, tol, one_tol);
        T best = __longlong_as_double(0x7ff0000000000000LL);   // +inf
        T side = 0.0;
        for (int o = lead[gap[p]]; o < n_offsets; ++o) {
            if (best <= later[o]) break;          // no later patch can be strictly nearer
            const int dk = offsets[3 * o], dj = offsets[3 * o + 1], di = offsets[3 * o + 2];
            const int kk = k + dk, jj = j + dj, ii = i + di;
            if (kk < 0 || kk >= nz || jj < 0 || jj >= ny || ii < 0 || ii >= nx) continue;
            const long long q = (long long)kk * plane + (long long)jj * nx + ii;
            const int f = flags[q];
            if (!(f & (BF_RD3_MASK | (7 * BF_RD3_FACE)))) continue;
            // This centre seen from the neighbour's centre, per grid axis.
            const T X[3] = {(T)(-di) * h[0], (T)(-dj) * h[1], (T)(-dk) * h[2]};
            if (f & BF_RD3_MASK) {
                const T* pl = planes + q * BF_RD3_NPLANE;
                visit3(X, pl, pl[3], half, box2[o], &best, &side);
            }
            for (int a = 0; a < 3; ++a) {
                if (!(f & (BF_RD3_FACE << a))) continue;
                const T sense = (f & (BF_RD3_NEG << a)) ? -1.0 : 1.0;
                const T m[3] = {a == 0 ? sense : 0.0, a == 1 ? sense : 0.0, a == 2 ? sense : 0.0};
                visit3(X, m, sense * half[a], half, box2[o], &best, &side);
            }
        }
        out[p] = own * sqrt(best);
        if (count) {
            atomicAdd(counts, 1ULL);
            if (side != own && side != 0.0) atomicAdd(counts + 1, 1ULL);
        }
    }
}
