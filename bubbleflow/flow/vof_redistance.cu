// The level set rebuilt from the volume fraction (bubbleflow.flow.vof_redistance.redistance;
// twin: vof_redistance_cuda.redistance).  "typedef double T;" precedes this
// text.  Every formula is written in the array code's order of operations
// (compiled without FMA contraction), so the kernels give its bits.
//
// Cells (j, i) are stored row after row, p = j * nx + i.  Three kernels:
//   bf_vof_rd_segments: per cell, the flags (an interface cell, the interface
//     faces it holds, the band seed) and, for an interface cell, the eight
//     numbers of its PLIC segment that the search reads (plic_segments.cell_segments with
//     the normals of phi, plic_segments.segment_fields);
//   bf_vof_rd_band_rows: per cell, whether its row holds a band seed within
//     `band` cells (the band's Chebyshev test split by axis: a cell far from
//     the interface then reads 2 band + 1 bytes, not their square);
//   bf_vof_rd_search: per cell, the band (a seed within `band` cells), for a
//     band cell the nearest segment among the cells in reach (the offsets in
//     the array code's order, its layers in its order, the first met winning
//     a tie), and the new level set with vof_redistance's own-side sign.
#include "common.cuh"
// BF_WITHOUT_2D_KERNELS (defined by the 3-D source that includes this one)
// leaves out the kernels only a 2-D grid runs: the 3-D module compiles less.
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
#ifndef BF_WITHOUT_2D_KERNELS
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
#endif

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

// near[p]: 1 where a band seed lies in cell p's row within `band` cells of
// it, else 0.
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_vof_rd_band_rows(
    const unsigned char* __restrict__ flags, unsigned char* __restrict__ near, const int nx,
    const int ny, const int band)
{
    BF_CELLS(nx, ny) {
        const unsigned char* row = flags + (long long)j * nx;
        const int lo = i - band < 0 ? 0 : i - band, hi = i + band >= nx ? nx - 1 : i + band;
        unsigned char found = 0;
        for (int ii = lo; ii <= hi && !found; ++ii) found = (row[ii] & BF_RD_SEED) ? 1 : 0;
        near[(long long)j * nx + i] = found;
    }
}
#endif

// The new level set.  offsets: n_offsets pairs (dj, di), nearest first as
// vof_redistance's nearest-segment search sorts them; band <= both reaches.  far = band *
// min(hx, hy), outside the band with the own-side sign.  counts[0], counts[1] (when count): the band cells and the
// sign conflicts, added atomically (integers: the same totals in any order).
#ifndef BF_WITHOUT_2D_KERNELS
extern "C" __global__ void bf_vof_rd_search(
    const T* __restrict__ phi, const T* __restrict__ c, const unsigned char* __restrict__ flags,
    const unsigned char* __restrict__ near, const T* __restrict__ seg,
    const int* __restrict__ offsets, const int n_offsets,
    T* __restrict__ out, unsigned long long* __restrict__ counts, const int count,
    const int nx, const int ny, const T hx, const T hy, const int band, const T far,
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
        // The band: a seed within `band` cells (Chebyshev), by the rows' tests.
        bool in_band = false;
        const int jlo = j - band < 0 ? 0 : j - band, jhi = j + band >= ny ? ny - 1 : j + band;
        for (int jj = jlo; jj <= jhi && !in_band; ++jj) in_band = near[(long long)jj * nx + i] != 0;
        if (!in_band) {
            out[p] = own * far;
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
#endif
