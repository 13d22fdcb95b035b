// The boxes of cells a step's work may be confined to (bubbleflow.flow.boxes;
// twin of boxes_cuda).  "typedef double T;" precedes this text.
#include "common.cuh"

// ---------------------------------------------------------------------------
// The box of the cells of nz planes of ny x nx (nz = 1 in 2-D) that meet the
// test of `mode`, as (imin, jmin, kmin, imax, jmax, kmax) folded into box by
// atomics (bf_box_fold; box starts as no cell met).  NaN meets both tests.
//   mode 0, boxes.gas_box: a volume fraction neither zero nor at or below
//     -bound (the cells whose advection is not the identity);
//   mode 1, boxes.interface_box: a level set below bound (the gas and the
//     cells within bound of it).
// ---------------------------------------------------------------------------
extern "C" __global__ void bf_box_where(const T* __restrict__ a, int* __restrict__ box,
                                        const int nx, const int ny, const int nz,
                                        const int mode, const T bound)
{
    int lo[3] = {0x7fffffff, 0x7fffffff, 0x7fffffff}, hi[3] = {-1, -1, -1};   // none met
    BF_CELLS3(nx, ny, nz) {
        const T q = a[((long long)k * ny + j) * nx + i];
        const bool met = mode == 0 ? (q != 0.0 && !(q <= -bound)) : !(q >= bound);
        if (met) {
            lo[0] = min(lo[0], i), lo[1] = min(lo[1], j), lo[2] = min(lo[2], k);
            hi[0] = max(hi[0], i), hi[1] = max(hi[1], j), hi[2] = max(hi[2], k);
        }
    }
    bf_box_fold(lo, hi, box);
}
