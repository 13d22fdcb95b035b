// The overlap table of two label fields (bubbleflow.flow.bubble_tracking's
// pair_counts; its CuPy variant).  "typedef double T;" precedes this text.
//
// table[(p - 1) * count + (q - 1)] += 1 for each cell whose previous label p
// and label q are both regions (> 0).  The lanes of a warp holding the same
// pair add once, by how many they are: the cells of one region meet the
// same entry, and one atomic a lane would queue them all on it.  Integer
// adds: the table is the same in any order.
extern "C" __global__ void bf_pair_counts(const int* __restrict__ prev,
                                          const int* __restrict__ labels, const long long n,
                                          const int count, unsigned long long* __restrict__ table)
{
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    // Whole warps step together (every lane reaches __match_any_sync).
    for (long long base = warp * 32; base < n; base += warps * 32) {
        const long long p = base + lane;
        long long pair = -1;
        if (p < n) {
            const int a = prev[p], b = labels[p];
            if (a > 0 && b > 0) pair = (long long)(a - 1) * count + (b - 1);
        }
        const unsigned same = __match_any_sync(0xffffffffu, pair);
        if (pair >= 0 && lane == __ffs(same) - 1)
            atomicAdd(table + pair, (unsigned long long)__popc(same));
    }
}
