// The plan of the Chebyshev solves of several systems, where their scalars
// are (viscosity_chebyshev.chebyshev_plan): a thread per system, in the
// order of operations of the array code's twin (needed_steps,
// chebyshev_interval, chebyshev_iterations, chebyshev_schedule).

// totals: a row per system, [||rhs||, ||r||, min rho / D, max D, min D];
// schedule: systems x width x (keep, gain); first, needed: one per system.
extern "C" __global__ void bf_chebyshev_plan(
    const T* __restrict__ totals, const T rtol, const int systems, const int width,
    const int max_steps, T* __restrict__ schedule, T* __restrict__ first,
    T* __restrict__ needed)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= systems) return;
    const T fnorm = totals[5 * i], rnorm = totals[5 * i + 1], lo = totals[5 * i + 2];
    const T dmax = totals[5 * i + 3], dmin = totals[5 * i + 4];
    const T a = lo, b = 2.0 - lo;
    const T tol = rtol * fnorm;
    T k = 0.0;
    if (rnorm > tol) {
        const T reduction = tol / (rnorm * sqrt(dmax / dmin));
        if (reduction >= 2.0) {
            k = 0.0;
        } else {
            const T root = sqrt(b / a);
            const T sigma = (root - 1.0) / (root + 1.0);
            if (sigma <= 0.0) {
                k = 1.0;
            } else {
                const T q = ceil(log(reduction / 2.0) / log(sigma));
                k = (q < (T)max_steps) ? fmax(q, 1.0) : (T)max_steps;
            }
        }
    }
    needed[i] = k;
    const T theta = 0.5 * (b + a), delta = 0.5 * (b - a);
    const T sigma1 = theta / delta;
    T rho_k = 1.0 / sigma1;
    for (int j = 0; j < width; ++j) {
        const T rho_next = 1.0 / (2.0 * sigma1 - rho_k);
        const long long at = 2 * ((long long)i * width + j);
        schedule[at] = rho_next * rho_k;
        schedule[at + 1] = 2.0 * rho_next / delta;
        rho_k = rho_next;
    }
    first[i] = 1.0 / theta;
}
