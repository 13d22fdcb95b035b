// The 3-D multigrid cycle's kernels (bubbleflow.linalg.precond.multigrid_cuda;
// twins: multigrid.smooth_restrict and multigrid.prolong_smooth, array code).
// "typedef double T; typedef double TI;" (or float) and "#define MG_H degree"
// precede this text.  Arrays hold the axes reversed, (nz, ny, nx) with x
// fastest; the couplings cx (nz, ny, nx-1), cy (nz, ny-1, nx), cz (nz-1, ny,
// nx) are positive, so (A v)_p = sum_f c_f (v_p - v_q).  Aggregates are
// 2 x 2 x 2 cells (the last one of an odd axis alone).
//
// A level's smoothing streams through z (2.5-D blocking): one block owns an
// xy tile of MG3_TX x MG3_TY columns, widened by MG_H on every side, one
// thread a column, and marches up a chunk of planes.  The Chebyshev steps
// are a pipeline of stages, stage s working MG_H - s planes behind the
// plane being loaded: a stage needs its input on the plane below, its own
// and the one above (registers of the column's thread) and on its own
// plane's four xy neighbours (a shared plane, double-buffered, written by
// the previous stage one plane earlier).  Each stage leaves one more ring
// of the widened tile invalid, so after MG_H stages the tile is exact, and
// the steps' vectors never reach DRAM: a level's visit reads its couplings
// and b once (and, up the cycle, x and the coarse x) and writes its result.
// A chunk starts 2 MG_H planes early (its pipeline's warm-up).  D^-1 is
// formed from the couplings.  io_scale and stop as in multigrid.cu.
#include "common.cuh"

// MG3_TX, MG3_TY: the xy tile's columns (multigrid_cuda._TILE_3D), defined
// by the includer.  Offsets are 32-bit (multigrid_cuda checks the level's
// size) and move one plane up a step: 64-bit index products cost the
// issue slots these kernels are short of (docs/performance_records.md).
#define MG3_RX (MG3_TX + 2 * MG_H)
#define MG3_RY (MG3_TY + 2 * MG_H)
#define MG3_CELLS (MG3_RX * MG3_RY)
#define MG3_THREADS MG3_CELLS
// The ring of coupling planes: a power of two of at least MG_H + 1 planes
// (a plane's slot is its index's low bits, negative indices included).
#define MG3_SLOTS (MG_H < 2 ? 2 : (MG_H < 4 ? 4 : 8))

// What a column's thread carries for the plane a stage works on.
struct Mg3Cell {
    T r, x, dinv, zlo, zhi;       // residual, iterate, D^-1, couplings below and above
};

// The shared planes over the widened tile: the east and north couplings of
// the last MG_H + 1 planes (a ring), each stage's output (two planes), the
// last stage's residual (two planes).
struct Mg3Shared {
    T ce[MG3_SLOTS][MG3_CELLS];
    T cn[MG3_SLOTS][MG3_CELLS];
    T u[MG_H][2][MG3_CELLS];
    T res[2][MG3_CELLS];
};

// What a column's thread reads of a plane from global memory (zero outside
// the grid): the couplings to its west, east, south, north and
// upper neighbours (the lower one is the plane below's upper one), s_in b,
// and, up the cycle, the start x + scale P xc.  Read one plane ahead of its
// use, so that a plane's loads are in flight while the stages work.
struct Mg3Raw {
    T w, e, s, n, hi, b, u;
};

// A column: its offsets in a plane of cells, of x faces and of the
// coarse level's cells, and which neighbours it has in its plane.
struct Mg3Column {
    int cell, fx, coarse;
    bool in, w, e, s, n;
};

__device__ __forceinline__ Mg3Column mg3_column(int i, int j, int nx, int ny, int ncx)
{
    Mg3Column c;
    c.in = i >= 0 && i < nx && j >= 0 && j < ny;
    c.cell = j * nx + i;
    c.fx = j * (nx - 1) + i;
    c.coarse = (j >> 1) * ncx + (i >> 1);
    c.w = c.in && i > 0;
    c.e = c.in && i < nx - 1;
    c.s = c.in && j > 0;
    c.n = c.in && j < ny - 1;
    return c;
}

// A plane's offsets: of its cells (and z faces above it), x faces, y
// faces and its coarse plane's cells; ok: the plane is in the grid.
struct Mg3Plane {
    int cell, fx, fy, coarse;
    bool ok;
};

// Plane pl of the column.
__device__ __forceinline__ Mg3Raw mg3_fetch(const T* __restrict__ cx, const T* __restrict__ cy,
                                            const T* __restrict__ cz, const TI* __restrict__ b,
                                            TI s_in, const T* __restrict__ xin,
                                            const T* __restrict__ xc, T scale,
                                            const Mg3Column& col, const Mg3Plane& pl,
                                            bool top, int nx)
{
    Mg3Raw r = {0, 0, 0, 0, 0, 0, 0};
    if (col.in && pl.ok) {
        const int p = pl.cell + col.cell;
        const int fx = pl.fx + col.fx;
        const int fy = pl.fy + col.cell;
        if (col.w) r.w = cx[fx - 1];
        if (col.e) r.e = cx[fx];
        if (col.s) r.s = cy[fy - nx];
        if (col.n) r.n = cy[fy];
        if (!top) r.hi = cz[p];
        r.b = T(b[p] * s_in);
        if (xin != nullptr) r.u = xin[p] + scale * xc[pl.coarse + col.coarse];
    }
    return r;
}

// The plane's cell from what was read of it and its lower coupling.
__device__ __forceinline__ Mg3Cell mg3_cell(const Mg3Raw& raw, T lo)
{
    const T centre = ((raw.w + raw.e) + (raw.s + raw.n)) + (lo + raw.hi);
    Mg3Cell c;
    c.r = raw.b;
    c.x = 0;
    c.dinv = centre > 0 ? T(1) / centre : T(0);
    c.zlo = lo;
    c.zhi = raw.hi;
    return c;
}

// (A u) at a column's cell: u below, at and above it (registers), its xy
// neighbours from the shared plane up (the cell's index q in the region;
// q not on the region's edge), the couplings of its plane from the ring.
__device__ __forceinline__ T mg3_stencil(const T* ce, const T* cn, const T* up, int q,
                                         const Mg3Cell& c, T below, T u, T above)
{
    return ce[q - 1] * (u - up[q - 1]) + ce[q] * (u - up[q + 1])
         + cn[q - MG3_RX] * (u - up[q - MG3_RX]) + cn[q] * (u - up[q + MG3_RX])
         + c.zlo * (u - below) + c.zhi * (u - above);
}

__device__ __forceinline__ int mg3_slot(int k)
{
    return k & (MG3_SLOTS - 1);
}

// The pipeline of one block; DOWN: from zero, the last stage the residual
// (restricted into bc, x written); else from x + scale P xc, out written
// (plus first where it is given).
template <bool DOWN>
__device__ __forceinline__ void mg3_pipeline(
    Mg3Shared& sh, const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ cz,
    const TI* __restrict__ b, const double* __restrict__ io_scale, const T* __restrict__ coef,
    const T* __restrict__ xin, const T* __restrict__ xc, T scale, T* __restrict__ xout,
    TI* __restrict__ out, const T* __restrict__ first, T* __restrict__ bc, int nx, int ny,
    int nz, int ncx, int ncy, int chunk)
{
    const int q = threadIdx.x;
    const int li = q % MG3_RX, lj = q / MG3_RX;
    const int i = blockIdx.x * MG3_TX - MG_H + li, j = blockIdx.y * MG3_TY - MG_H + lj;
    const bool edge = li == 0 || li == MG3_RX - 1 || lj == 0 || lj == MG3_RY - 1;
    const bool tile = li >= MG_H && li < MG3_RX - MG_H && lj >= MG_H && lj < MG3_RY - MG_H
                      && i < nx && j < ny;
    const bool agg = tile && ((li - MG_H) % 2 == 0) && ((lj - MG_H) % 2 == 0);
    const int z0 = blockIdx.z * chunk, z1 = min(z0 + chunk, nz);
    const int plane = nx * ny, xplane = (nx - 1) * ny, yplane = nx * (ny - 1);
    const TI s_in = TI(io_scale[0]);
    const T inv_theta = coef[0];
    const Mg3Column column = mg3_column(i, j, nx, ny, ncx);

    Mg3Cell c[MG_H + 1];              // c[s]: the plane stage s works on
    T hist[MG_H][3];                  // stage s's output: [0] newest plane, [1], [2] oldest
#pragma unroll
    for (int s = 0; s <= MG_H; ++s) c[s] = Mg3Cell{0, 0, 0, 0, 0};
#pragma unroll
    for (int s = 0; s < MG_H; ++s) hist[s][0] = hist[s][1] = hist[s][2] = 0;
    T zsum = 0;

    // The first plane stage 0 takes, k0, and the coupling below it; the
    // plane read ahead, k0 + 1 (its offsets in pl).
    int k0 = z0 - MG_H;
    Mg3Plane pl = {k0 * plane, k0 * xplane, k0 * yplane, (k0 >> 1) * ncx * ncy,
                   k0 >= 0 && k0 < nz};
    Mg3Raw raw = mg3_fetch(cx, cy, cz, b, s_in, xin, xc, scale, column, pl, k0 == nz - 1, nx);
    T lo = (column.in && k0 > 0 && k0 <= nz - 1) ? cz[pl.cell - plane + column.cell] : T(0);
    for (int t = z0 - 2 * MG_H, m = 0; t < z1; ++t, ++m, ++k0) {
        // Stage 0 takes plane k0 = t + MG_H; the others move one plane on.
#pragma unroll
        for (int s = MG_H; s > 0; --s) c[s] = c[s - 1];
        const Mg3Raw now = raw;
        pl.cell += plane;
        pl.fx += xplane;
        pl.fy += yplane;
        pl.coarse = ((k0 + 1) >> 1) * ncx * ncy;
        pl.ok = k0 + 1 >= 0 && k0 + 1 < nz;
        raw = mg3_fetch(cx, cy, cz, b, s_in, xin, xc, scale, column, pl, k0 + 1 == nz - 1, nx);
        c[0] = mg3_cell(now, lo);
        lo = now.hi;
        sh.ce[mg3_slot(k0)][q] = now.e;
        sh.cn[mg3_slot(k0)][q] = now.n;
        const T u0 = DOWN ? inv_theta * (c[0].dinv * c[0].r) : now.u;   // stage 0's output
        c[0].x = u0;
        hist[0][2] = hist[0][1];
        hist[0][1] = hist[0][0];
        hist[0][0] = u0;
        sh.u[0][m & 1][q] = u0;
        T last_res = 0;
#pragma unroll
        for (int s = 1; s <= MG_H; ++s) {
            const int ks = t + MG_H - s;
            const T* up = sh.u[s - 1][(m - 1) & 1];
            const int slot = mg3_slot(ks);
            const T u = hist[s - 1][1];
            const T au = edge ? T(0)
                              : mg3_stencil(sh.ce[slot], sh.cn[slot], up, q, c[s],
                                            hist[s - 1][2], u, hist[s - 1][0]);
            const T res = c[s].r - au;
            if (DOWN && s == MG_H) {
                last_res = res;
                break;
            }
            T d;
            if (!DOWN && s == 1) {        // from x0 = u: its residual, then the first step
                d = inv_theta * (c[s].dinv * res);
            } else {
                const int step = DOWN ? s : s - 1;
                d = coef[2 * step - 1] * u + coef[2 * step] * (c[s].dinv * res);
            }
            c[s].r = res;
            c[s].x += d;
            if (s < MG_H) {
                hist[s][2] = hist[s][1];
                hist[s][1] = hist[s][0];
                hist[s][0] = d;
                sh.u[s][m & 1][q] = d;
            }
        }
        if (DOWN) sh.res[m & 1][q] = edge ? T(0) : last_res;
        __syncthreads();
        if (t < z0 || !tile) continue;
        const int p = t * plane + column.cell;
        if (DOWN) {
            xout[p] = c[MG_H].x;
            if (agg) {
                const T* rp = sh.res[m & 1];
                zsum += (rp[q] + rp[q + 1]) + (rp[q + MG3_RX] + rp[q + MG3_RX + 1]);
                if (((t - z0) & 1) || t == nz - 1) {
                    bc[(t >> 1) * ncx * ncy + column.coarse] = zsum;
                    zsum = 0;
                }
            }
        } else {
            const TI value = TI(c[MG_H].x) * TI(io_scale[1]);
            out[p] = first != nullptr ? value + TI(first[p]) : value;
        }
    }
}

// Down the cycle: x = S(b) from zero, bc = P^T (b - A x).
extern "C" __global__ void __launch_bounds__(MG3_THREADS) bf_mg3_down(
    const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ cz,
    const TI* __restrict__ b, const double* __restrict__ io_scale, const T* __restrict__ coef,
    T* __restrict__ x, T* __restrict__ bc, const int nx, const int ny, const int nz,
    const int ncx, const int ncy, const int chunk, const double* __restrict__ stop)
{
    if (stop[0] != 0.0) return;         // the Krylov solve has converged: nothing to do
    __shared__ Mg3Shared sh;
    mg3_pipeline<true>(sh, cx, cy, cz, b, io_scale, coef, nullptr, nullptr, T(0), x, nullptr,
                       nullptr, bc, nx, ny, nz, ncx, ncy, chunk);
}

// Up the cycle: out = S(b) from x + scale P xc; bf_mg3_up_sum (the coarse
// level of a W level visited the second time): out = S(b) + first.
extern "C" __global__ void __launch_bounds__(MG3_THREADS) bf_mg3_up(
    const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ cz,
    const TI* __restrict__ b, const double* __restrict__ io_scale, const T* __restrict__ x,
    const T* __restrict__ xc, const T* __restrict__ coef, TI* __restrict__ out, const int nx,
    const int ny, const int nz, const int ncx, const int ncy, const int chunk, const T scale,
    const double* __restrict__ stop)
{
    if (stop[0] != 0.0) return;
    __shared__ Mg3Shared sh;
    mg3_pipeline<false>(sh, cx, cy, cz, b, io_scale, coef, x, xc, scale, nullptr, out, nullptr,
                        nullptr, nx, ny, nz, ncx, ncy, chunk);
}

extern "C" __global__ void __launch_bounds__(MG3_THREADS) bf_mg3_up_sum(
    const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ cz,
    const TI* __restrict__ b, const double* __restrict__ io_scale, const T* __restrict__ x,
    const T* __restrict__ xc, const T* __restrict__ coef, TI* __restrict__ out,
    const T* __restrict__ first, const int nx, const int ny, const int nz, const int ncx,
    const int ncy, const int chunk, const T scale, const double* __restrict__ stop)
{
    if (stop[0] != 0.0) return;
    __shared__ Mg3Shared sh;
    mg3_pipeline<false>(sh, cx, cy, cz, b, io_scale, coef, x, xc, scale, nullptr, out, first,
                        nullptr, nx, ny, nz, ncx, ncy, chunk);
}

// b -= A x on one level (a W level's second visit), one thread a cell.
extern "C" __global__ void bf_mg3_residual_inplace(
    const T* __restrict__ cx, const T* __restrict__ cy, const T* __restrict__ cz,
    const T* __restrict__ x, T* __restrict__ b, const int nx, const int ny, const int nz)
{
    const long long plane = (long long)nx * ny;
    BF_CELLS3(nx, ny, nz) {
        const long long p = (long long)k * plane + (long long)j * nx + i;
        b[p] -= bf_face_flux7(cx, cy, cz, x, nx, ny, nz, p, k, j, i);
    }
}
