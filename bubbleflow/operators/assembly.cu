// Assembly of the 5-point pressure operator on the GPU
// (bubbleflow.operators.poisson; twin: diagonals_from_couplings).
typedef double T;

// beta of a face: the value given, or 1 / rho when given densities.
__device__ __forceinline__ T face(const T v, const int reciprocal) {
    return reciprocal ? 1.0 / v : v;
}

// S, W, C, E, N of -div(beta grad) from beta_x (ny, nx-1) and beta_y (ny-1, nx):
// couplings beta / h^2 (divided, as the array code does), zero across the walls,
// C summed in the order S, W, E, N (bit for bit the array code's C).
extern "C" __global__ void bf_op_diagonals(const T* __restrict__ beta_x,
        const T* __restrict__ beta_y, const T hx2, const T hy2, T* __restrict__ S,
        T* __restrict__ W, T* __restrict__ C, T* __restrict__ E, T* __restrict__ N,
        const int nx, const int ny, const int reciprocal)
{
    // Grid (columns / blockDim, rows): no index division.
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx) return;
    for (int j = blockIdx.y; j < ny; j += gridDim.y) {
        const long long p = (long long)j * nx + i;
        const long long fx = (long long)j * (nx - 1) + i;
        T c = 0.0;
        T s = 0.0, w = 0.0, e = 0.0, nn = 0.0;
        if (j > 0)      { s = face(beta_y[p - nx], reciprocal) / hy2; c = s; }
        if (i > 0)      { w = face(beta_x[fx - 1], reciprocal) / hx2; c += w; }
        if (i < nx - 1) { e = face(beta_x[fx], reciprocal) / hx2;     c += e; }
        if (j < ny - 1) { nn = face(beta_y[p], reciprocal) / hy2;     c += nn; }
        S[p] = j > 0 ? -s : 0.0;
        W[p] = i > 0 ? -w : 0.0;
        E[p] = i < nx - 1 ? -e : 0.0;
        N[p] = j < ny - 1 ? -nn : 0.0;
        C[p] = c;
    }
}

