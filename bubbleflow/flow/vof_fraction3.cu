// The gas fraction of a level set's cells in 3-D (bubbleflow.flow.vof_fraction.volume_fraction;
// twin: vof_fraction_cuda.volume_fraction), as vof_fraction.cu in 2-D (its
// conventions hold): one cut a cell, and the quadratic sub-cell cuts.
// "typedef double T;" precedes this text.
#include "common.cuh"
#include "plic.cuh"
#include "plic3.cuh"

// One cut a cell in 3-D, as bf_fraction_cut2 with a plane.
extern "C" __global__ void bf_fraction_cut3(const T* __restrict__ phi, T* __restrict__ c,
                                            int nx, int ny, int nz, T hx, T hy, T hz)
{
    const long long plane = (long long)nx * ny, n = plane * nz;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(p % nx), j = (int)((p / nx) % ny), k = (int)(p / plane);
        const T f0 = phi[p];
        const T gx = vof_gradient_1(i > 0 ? phi[p - 1] : f0, f0, i < nx - 1 ? phi[p + 1] : f0,
                                    i, nx, hx);
        const T gy = vof_gradient_1(j > 0 ? phi[p - nx] : f0, f0,
                                    j < ny - 1 ? phi[p + nx] : f0, j, ny, hy);
        const T gz = vof_gradient_1(k > 0 ? phi[p - plane] : f0, f0,
                                    k < nz - 1 ? phi[p + plane] : f0, k, nz, hz);
        const T alpha = 0.5 * (((0.0 + gx * hx) + gy * hy) + gz * hz) - f0;
        c[p] = vof_cut_fraction3(gx, gy, gz, alpha, hx, hy, hz);
    }
}

// The level set with one linearly extrapolated ghost layer along each array
// axis, padded axis 0 first, then 1, then 2 (vof_fraction._pad_linear: the
// edges and corners extrapolated from the layers padded before them).  a0,
// a1, a2: array indices from -1 to n.
struct Padded3 {
    const T* phi;
    int n0, n1, n2;

    __device__ __forceinline__ T at(int a0, int a1, int a2) const
    {
        return phi[((long long)a0 * n1 + a1) * n2 + a2];
    }
    __device__ __forceinline__ T axis0(int a0, int a1, int a2) const
    {
        if (a0 < 0)   return 2.0 * at(0, a1, a2) - at(1, a1, a2);
        if (a0 >= n0) return 2.0 * at(n0 - 1, a1, a2) - at(n0 - 2, a1, a2);
        return at(a0, a1, a2);
    }
    __device__ __forceinline__ T axis1(int a0, int a1, int a2) const
    {
        if (a1 < 0)   return 2.0 * axis0(a0, 0, a2) - axis0(a0, 1, a2);
        if (a1 >= n1) return 2.0 * axis0(a0, n1 - 1, a2) - axis0(a0, n1 - 2, a2);
        return axis0(a0, a1, a2);
    }
    __device__ __forceinline__ T operator()(int a0, int a1, int a2) const
    {
        if (a2 < 0)   return 2.0 * axis1(a0, a1, 0) - axis1(a0, a1, 1);
        if (a2 >= n2) return 2.0 * axis1(a0, a1, n2 - 1) - axis1(a0, a1, n2 - 2);
        return axis1(a0, a1, a2);
    }
};

// The constants of bf_fraction_taylor3, per array axis a (z, y, x) as the
// array code computes them on the host (vof_fraction_cuda.taylor_constants).
#define TC_TWO_H 0          // 2 h_a
#define TC_H2 3             // h_a^2
#define TC_FOUR_HH 6        // 4 h_a h_b for (a, b) = (1, 0), (2, 0), (2, 1)
#define TC_REACH 9          // (1/2 - 1/(2k)) h_a
#define TC_HALF_SUB 12      // h_a / (2k)
#define TC_MARGIN 15        // 1 - the cut test's relative margin
#define TC_SUB 16           // h / k per grid axis (x, y, z)
#define TC_COUNT 19         // k^3
#define TC_OFFSETS 20       // the sub-cell centres' offsets: k per array axis

// The quadratic sub-cell cuts in 3-D (vof_fraction._taylor_fractions): the
// cell's gradient and Hessian from the padded level set, its test whether a
// sub-cell's plane may cross it (_may_be_cut), else the mean of the k^3
// sub-cells' cut fractions (_taylor_cuts).
extern "C" __global__ void bf_fraction_taylor3(const T* __restrict__ phi, T* __restrict__ c,
                                               int nx, int ny, int nz,
                                               const T* __restrict__ tc, int k)
{
    const Padded3 P{phi, nz, ny, nx};
    const long long plane = (long long)nx * ny, n = plane * nz;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int a2 = (int)(p % nx), a1 = (int)((p / nx) % ny), a0 = (int)(p / plane);
        const T f0 = phi[p];
        T g[3], H[3][3];
        const int at[3] = {a0, a1, a2};
        for (int a = 0; a < 3; ++a) {
            int up[3] = {a0, a1, a2}, down[3] = {a0, a1, a2};
            up[a] += 1;
            down[a] -= 1;
            const T u = P(up[0], up[1], up[2]), d = P(down[0], down[1], down[2]);
            g[a] = (u - d) / tc[TC_TWO_H + a];
            H[a][a] = (u - 2.0 * f0 + d) / tc[TC_H2 + a];
            for (int b = 0; b < a; ++b) {
                int q[4][3];
                const int sa[4] = {1, 1, -1, -1}, sb[4] = {1, -1, 1, -1};
                for (int m = 0; m < 4; ++m) {
                    for (int e = 0; e < 3; ++e) q[m][e] = at[e];
                    q[m][a] += sa[m];
                    q[m][b] += sb[m];
                }
                const int pair = a == 1 ? 0 : (b == 0 ? 1 : 2);
                H[a][b] = H[b][a] = (P(q[0][0], q[0][1], q[0][2]) - P(q[1][0], q[1][1], q[1][2])
                                     - P(q[2][0], q[2][1], q[2][2])
                                     + P(q[3][0], q[3][1], q[3][2])) / tc[TC_FOUR_HH + pair];
            }
        }
        const T* reach = tc + TC_REACH;
        T change = 0.0, curve = 0.0, bound = 0.0;
        for (int a = 0; a < 3; ++a) change = change + fabs(g[a]) * reach[a];
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) curve = curve + fabs(H[a][b]) * reach[a] * reach[b];
        change = change + 0.5 * curve;
        for (int a = 0; a < 3; ++a) {
            T s = 0.0;
            for (int b = 0; b < 3; ++b) s = s + fabs(H[a][b]) * reach[b];
            bound = bound + (fabs(g[a]) + s) * tc[TC_HALF_SUB + a];
        }
        bound = change + bound;
        if (fabs(f0) * tc[TC_MARGIN] > bound) {
            c[p] = f0 < 0.0 ? 1.0 : 0.0;        // every sub-cell on phi's side
            continue;
        }
        const T* offsets = tc + TC_OFFSETS;
        T sum = 0.0;
        #pragma unroll 1
        for (int q0 = 0; q0 < k; ++q0)
            #pragma unroll 1
            for (int q1 = 0; q1 < k; ++q1)
                #pragma unroll 1
                for (int q2 = 0; q2 < k; ++q2) {
                    const T x[3] = {offsets[q0], offsets[k + q1], offsets[2 * k + q2]};
                    T grad[3], val = 0.0;
                    for (int a = 0; a < 3; ++a) {
                        T s = 0.0;
                        for (int b = 0; b < 3; ++b) s = s + H[a][b] * x[b];
                        grad[a] = g[a] + s;
                        val = val + (g[a] + 0.5 * s) * x[a];
                    }
                    val = f0 + val;
                    // The normal in grid-axis order (x, y, z): array axes 2, 1, 0.
                    const T alpha = 0.5 * (((0.0 + grad[2] * tc[TC_SUB]) + grad[1] * tc[TC_SUB + 1])
                                           + grad[0] * tc[TC_SUB + 2]) - val;
                    sum = sum + vof_cut_fraction3(grad[2], grad[1], grad[0], alpha, tc[TC_SUB],
                                                  tc[TC_SUB + 1], tc[TC_SUB + 2]);
                }
        c[p] = sum / tc[TC_COUNT];
    }
}
