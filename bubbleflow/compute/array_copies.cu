// Up to eight contiguous arrays copied in one launch (array_copies.copy_arrays):
// blockIdx.y the array, the blocks along x striding over its 8-byte words,
// or over its bytes where its size or an address is not a multiple of 8.
#define BF_COPIES 8

extern "C" __global__ void bf_copy_arrays(
    const int count,
    unsigned char* d0, const unsigned char* s0, const long long n0,
    unsigned char* d1, const unsigned char* s1, const long long n1,
    unsigned char* d2, const unsigned char* s2, const long long n2,
    unsigned char* d3, const unsigned char* s3, const long long n3,
    unsigned char* d4, const unsigned char* s4, const long long n4,
    unsigned char* d5, const unsigned char* s5, const long long n5,
    unsigned char* d6, const unsigned char* s6, const long long n6,
    unsigned char* d7, const unsigned char* s7, const long long n7)
{
    const int j = blockIdx.y;
    if (j >= count) return;
    unsigned char* const dsts[BF_COPIES] = {d0, d1, d2, d3, d4, d5, d6, d7};
    const unsigned char* const srcs[BF_COPIES] = {s0, s1, s2, s3, s4, s5, s6, s7};
    const long long sizes[BF_COPIES] = {n0, n1, n2, n3, n4, n5, n6, n7};
    unsigned char* d = dsts[j];
    const unsigned char* s = srcs[j];
    const long long n = sizes[j];
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    if (n % 8 == 0 && ((unsigned long long)d) % 8 == 0 && ((unsigned long long)s) % 8 == 0) {
        unsigned long long* dw = (unsigned long long*)d;
        const unsigned long long* sw = (const unsigned long long*)s;
        for (long long i = start; i < n / 8; i += stride) dw[i] = sw[i];
    } else {
        for (long long i = start; i < n; i += stride) d[i] = s[i];
    }
}
