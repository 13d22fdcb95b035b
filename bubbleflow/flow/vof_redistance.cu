// The level set rebuilt from the volume fraction (bubbleflow.flow.vof_redistance.redistance;
// twin: vof_redistance_cuda.redistance).  "typedef double T;" precedes this
// text.  Every formula is written in the array code's order of operations
// (compiled without FMA contraction), so the kernels give its bits.
//
// Cells (j, i) are stored row after row, p = j * nx + i.  Two kernels:
//   bf_vof_rd_segments: per cell, the flags (an interface cell, the interface
//     faces it holds, the band seed) and, for an interface cell, the eight
//     numbers of its PLIC segment that the search reads (plic_segments.cell_segments with
//     the normals of phi, plic_segments.segment_fields);
//   bf_vof_rd_search: per cell, the band (a seed within `band` cells), for a
//     band cell the nearest segment among the cells in reach (the offsets in
//     the array code's order, its layers in its order, the first met winning
//     a tie), and the new level set with vof_redistance's own-side sign.
#include "common.cuh"
#include "plic.cuh"

#define BF_RD_MASK 1     // an interface cell: it holds a PLIC segment
#define BF_RD_FX 2       // its right face lies between a full and an empty cell
#define BF_RD_FX_NEG 4   //   ... with the gas on the right (sense -1)
#define BF_RD_FY 8       // its top face lies between a full and an empty cell
#define BF_RD_FY_NEG 16  //   ... with the gas above (sense -1)
#define BF_RD_SEED 32    // a cell the band grows from (vof_redistance's band seed)
#define BF_RD_NSEG 8     // per interface cell: mx, my, d, x0, y0, ex, ey, inv_len2

// numpy.sign: +1, -1, 0 for a zero, NaN for a NaN.
__device__ __forceinline__ T np_sign(T x)
{
    return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : (x == 0.0 ? 0.0 : x));
}

// plic_segments.face_segments' sense of the face between cells lo (left or below) and
// hi: +1 gas below/left (lo full, hi empty), -1 the reverse, else 0.
__device__ __forceinline__ int face_sense(T lo, T hi, T tol, T one_tol)
{
    if (lo >= one_tol && hi <= tol) return 1;
    if (lo <= tol && hi >= one_tol) return -1;
    return 0;
}

// plic_segments.cell_segments' bounds: the clip of the line p + s t to |p + s t| <= half.
__device__ __forceinline__ void bounds(T p, T t, T half, T big, T* lo, T* hi)
{
    const bool moving = t != 0.0;
    const T inv = 1.0 / (moving ? t : 1.0);
    const T s0 = (-half - p) * inv, s1 = (half - p) * inv;
    *lo = moving ? np_min(s0, s1) : -big;
    *hi = moving ? np_max(s0, s1) : big;
}

// Flags of every cell; the segment of every interface cell (others untouched).
// tol = CLIP_TOLERANCE, one_tol = 1 - CLIP_TOLERANCE; nx, ny >= 2.
extern "C" __global__ void bf_vof_rd_segments(
    const T* __restrict__ phi, const T* __restrict__ c, unsigned char* __restrict__ flags,
    T* __restrict__ seg, const int nx, const int ny, const T hx, const T hy, const T tol,
    const T one_tol)
{
    BF_CELLS(nx, ny) {
        const long long p = (long long)j * nx + i;
        const T cc = c[p];
        const bool mask = cc > tol && cc < one_tol;               // plic_reconstruction.interface_mask
        const int sx = i < nx - 1 ? face_sense(cc, c[p + 1], tol, one_tol) : 0;
        const int sy = j < ny - 1 ? face_sense(cc, c[p + nx], tol, one_tol) : 0;
        const bool wx = i > 0 && face_sense(c[p - 1], cc, tol, one_tol) != 0;
        const bool wy = j > 0 && face_sense(c[p - nx], cc, tol, one_tol) != 0;
        int fl = (mask ? BF_RD_MASK : 0) | (sx != 0 ? BF_RD_FX : 0) | (sx < 0 ? BF_RD_FX_NEG : 0)
                 | (sy != 0 ? BF_RD_FY : 0) | (sy < 0 ? BF_RD_FY_NEG : 0);
        if (mask || sx != 0 || sy != 0 || wx || wy) fl |= BF_RD_SEED;
        flags[p] = (unsigned char)fl;
        if (mask) {
            T mx, my;
            vof_phi_normal(phi, nx, ny, j, i, hx, hy, &mx, &my);
            const T alpha = vof_line_constant(mx, my, cc, hx, hy);
            // plic_segments.cell_segments: the line from the centre, clipped to the cell.
            const T d = alpha - 0.5 * (mx * hx + my * hy);
            const T px = d * mx, py = d * my;
            const T tx = -my, ty = mx;
            const T big = 2.0 * (hx + hy);
            T lo_x, hi_x, lo_y, hi_y;
            bounds(px, tx, 0.5 * hx, big, &lo_x, &hi_x);
            bounds(py, ty, 0.5 * hy, big, &lo_y, &hi_y);
            T slo = np_max(lo_x, lo_y), shi = np_min(hi_x, hi_y);
            const T mid = 0.5 * (slo + shi);
            const bool crossed = slo <= shi;
            slo = crossed ? slo : mid;
            shi = crossed ? shi : mid;
            const T x0 = px + slo * tx, y0 = py + slo * ty;
            const T x1 = px + shi * tx, y1 = py + shi * ty;
            // plic_segments.segment_fields.
            const T ex = x1 - x0, ey = y1 - y0;
            const T length2 = ex * ex + ey * ey;
            const T inv_len2 = length2 > 0.0 ? 1.0 / (length2 > 0.0 ? length2 : 1.0) : 0.0;
            T* out = seg + p * BF_RD_NSEG;
            out[0] = mx;
            out[1] = my;
            out[2] = d;
            out[3] = x0;
            out[4] = y0;
            out[5] = ex;
            out[6] = ey;
            out[7] = inv_len2;
        }
    }
}

// One segment of vof_redistance's nearest-segment search seen from the centre (px, py) relative
// to the segment's cell centre: keep it if strictly nearer than *best.
__device__ __forceinline__ void visit(T px, T py, T mx, T my, T d, T x0, T y0, T ex, T ey,
                                      T inv_len2, T* best, T* side)
{
    const T rx = px - x0, ry = py - y0;
    const T t = np_clip((rx * ex + ry * ey) * inv_len2, 0.0, 1.0);
    const T qx = rx - t * ex, qy = ry - t * ey;
    const T dist2 = qx * qx + qy * qy;
    if (dist2 < *best) {
        *best = dist2;
        *side = np_sign(mx * px + my * py - d);
    }
}

// The new level set.  offsets: n_offsets pairs (dj, di), nearest first as
// vof_redistance's nearest-segment search sorts them; band <= both reaches.  floor_ = band *
// min(hx, hy).  counts[0], counts[1] (when count): the band cells and the
// sign conflicts, added atomically (integers: the same totals in any order).
extern "C" __global__ void bf_vof_rd_search(
    const T* __restrict__ phi, const T* __restrict__ c, const unsigned char* __restrict__ flags,
    const T* __restrict__ seg, const int* __restrict__ offsets, const int n_offsets,
    T* __restrict__ out, unsigned long long* __restrict__ counts, const int count,
    const int nx, const int ny, const T hx, const T hy, const int band, const T floor_,
    const T tol, const T one_tol)
{
    // The face segments' fields (plic_segments.face_segments, plic_segments.segment_fields): the
    // same for every face of a direction, up to the sense.
    const T half_x = 0.5 * hx, half_y = 0.5 * hy;
    const T fx_ey = half_y - (-half_y);
    const T fx_len2 = (half_x - half_x) * (half_x - half_x) + fx_ey * fx_ey;
    const T fx_inv = fx_len2 > 0.0 ? 1.0 / (fx_len2 > 0.0 ? fx_len2 : 1.0) : 0.0;
    const T fy_ex = half_x - (-half_x);
    const T fy_len2 = fy_ex * fy_ex + (half_y - half_y) * (half_y - half_y);
    const T fy_inv = fy_len2 > 0.0 ? 1.0 / (fy_len2 > 0.0 ? fy_len2 : 1.0) : 0.0;
    BF_CELLS(nx, ny) {
        const long long p = (long long)j * nx + i;
        const int fl = flags[p];
        const T cc = c[p];
        // vof_redistance's own-side sign.
        T own = cc >= one_tol ? -1.0
              : (cc <= tol ? 1.0 : ((fl & BF_RD_MASK) ? np_sign(-seg[p * BF_RD_NSEG + 2]) : 0.0));
        if (own == 0.0) own = cc > 0.5 ? -1.0 : 1.0;
        // The band: a seed within `band` cells (Chebyshev).
        bool in_band = false;
        for (int dj = -band; dj <= band && !in_band; ++dj) {
            const int jj = j + dj;
            if (jj < 0 || jj >= ny) continue;
            const unsigned char* row = flags + (long long)jj * nx;
            for (int di = -band; di <= band; ++di) {
                const int ii = i + di;
                if (ii >= 0 && ii < nx && (row[ii] & BF_RD_SEED)) {
                    in_band = true;
                    break;
                }
            }
        }
        if (!in_band) {
            out[p] = own * np_max(fabs(phi[p]), floor_);
            continue;
        }
        T best = __longlong_as_double(0x7ff0000000000000LL);   // +inf
        T side = 0.0;
        for (int k = 0; k < n_offsets; ++k) {
            const int dj = offsets[2 * k], di = offsets[2 * k + 1];
            const int jj = j + dj, ii = i + di;
            if (jj < 0 || jj >= ny || ii < 0 || ii >= nx) continue;   // the zero padding
            const long long q = (long long)jj * nx + ii;
            const int f = flags[q];
            if (!(f & (BF_RD_MASK | BF_RD_FX | BF_RD_FY))) continue;  // distance inf: never nearer
            // This centre seen from the neighbour's centre.
            const T px = (T)(-di) * hx, py = (T)(-dj) * hy;
            if (f & BF_RD_MASK) {
                const T* s = seg + q * BF_RD_NSEG;
                visit(px, py, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], &best, &side);
            }
            if (f & BF_RD_FX) {
                const T sense = (f & BF_RD_FX_NEG) ? -1.0 : 1.0;
                visit(px, py, sense, 0.0, sense * half_x, half_x, -half_y, half_x - half_x,
                      fx_ey, fx_inv, &best, &side);
            }
            if (f & BF_RD_FY) {
                const T sense = (f & BF_RD_FY_NEG) ? -1.0 : 1.0;
                visit(px, py, 0.0, sense, sense * half_y, -half_x, half_y, fy_ex,
                      half_y - half_y, fy_inv, &best, &side);
            }
        }
        out[p] = own * sqrt(best);
        if (count) {
            atomicAdd(counts, 1ULL);
            if (side != own && side != 0.0) atomicAdd(counts + 1, 1ULL);
        }
    }
}

// ---------------------------------------------------------------------------
// 3-D.  Cells (k, j, i) stored plane after plane, p = (k * ny + j) * nx + i.
// Three kernels:
//   bf_vof_rd3_planes: per cell, the flags (an interface cell, the interface
//     faces it holds and their sense, the band seed) and, for an interface
//     cell, its PLIC plane m . X = d, X from the cell centre (vof_redistance's
//     plane layers, with the normals of phi);
//   bf_vof_rd3_dilate: the band grown along one axis (three launches make
//     vof_redistance's Chebyshev dilation);
//   bf_vof_rd3_search: per band cell, the nearest patch among the cells in
//     reach (the offsets in the array code's order, its layers in its order:
//     the cell's plane, then the x, y and z faces; the first met winning a
//     tie), stopping where no later offset's box can be nearer (as the array
//     code's cells drop out); then the level set with the own-side sign.
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
extern "C" __global__ void bf_vof_rd3_dilate(
    const unsigned char* __restrict__ in, unsigned char* __restrict__ out, const int bit,
    const int axis, const int band, const int nx, const int ny, const int nz)
{
    const long long plane = (long long)nx * ny;
    const long long stride = axis == 0 ? 1 : (axis == 1 ? (long long)nx : plane);
    BF_CELLS3(nx, ny, nz) {
        const long long p = (long long)k * plane + (long long)j * nx + i;
        const int at = axis == 0 ? i : (axis == 1 ? j : k);
        const int n = axis == 0 ? nx : (axis == 1 ? ny : nz);
        const int lo = at - band < 0 ? 0 : at - band;
        const int hi = at + band > n - 1 ? n - 1 : at + band;
        unsigned char hit = 0;
        for (int s = lo; s <= hi && !hit; ++s)
            hit = (in[p + (long long)(s - at) * stride] & bit) ? 1 : 0;
        out[p] = hit;
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

// The new level set.  offsets: n_offsets triples (dk, dj, di), nearest first
// as vof_redistance's search sorts them; box2[o] the squared distance to the
// offset's cell's box, later[o] the least of box2[o..]; in_band: the dilated
// seed.  floor_ = band * min(h).  counts as bf_vof_rd_search's.
extern "C" __global__ void bf_vof_rd3_search(
    const T* __restrict__ phi, const T* __restrict__ c, const unsigned char* __restrict__ flags,
    const unsigned char* __restrict__ in_band, const T* __restrict__ planes,
    const int* __restrict__ offsets, const T* __restrict__ box2, const T* __restrict__ later,
    const int n_offsets, T* __restrict__ out, unsigned long long* __restrict__ counts,
    const int count, const int nx, const int ny, const int nz, const T hx, const T hy,
    const T hz, const T floor_, const T tol, const T one_tol)
{
    const long long plane = (long long)nx * ny;
    const T h[3] = {hx, hy, hz};
    const T half[3] = {0.5 * hx, 0.5 * hy, 0.5 * hz};
    BF_CELLS3(nx, ny, nz) {
        const long long p = (long long)k * plane + (long long)j * nx + i;
        const int fl = flags[p];
        const T cc = c[p];
        // vof_redistance's own-side sign.
        T own = cc >= one_tol ? -1.0
              : (cc <= tol ? 1.0 : ((fl & BF_RD3_MASK) ? np_sign(-planes[p * BF_RD3_NPLANE + 3]) : 0.0));
        if (own == 0.0) own = cc > 0.5 ? -1.0 : 1.0;
        if (!in_band[p]) {
            out[p] = own * np_max(fabs(phi[p]), floor_);
            continue;
        }
        T best = __longlong_as_double(0x7ff0000000000000LL);   // +inf
        T side = 0.0;
        for (int o = 0; o < n_offsets; ++o) {
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
