// Sixteen 8-byte words, a launch's arguments, into out[0 .. n) (launch_tables.device_table):
// one block of 16 threads.
extern "C" __global__ void bf_write_words(
    unsigned long long* out, const int n,
    const unsigned long long w0, const unsigned long long w1, const unsigned long long w2,
    const unsigned long long w3, const unsigned long long w4, const unsigned long long w5,
    const unsigned long long w6, const unsigned long long w7, const unsigned long long w8,
    const unsigned long long w9, const unsigned long long w10, const unsigned long long w11,
    const unsigned long long w12, const unsigned long long w13, const unsigned long long w14,
    const unsigned long long w15)
{
    const unsigned long long w[16] = {w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12,
                                      w13, w14, w15};
    if ((int)threadIdx.x < n) out[threadIdx.x] = w[threadIdx.x];
}
