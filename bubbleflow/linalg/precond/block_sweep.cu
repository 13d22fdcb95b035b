// Tiled parallel scan of the block IC sweeps (bubbleflow.linalg.precond.block_sweep;
// twin: _block_sweep_numpy).

// Defined before this text: T (double/float), M (sub-block height), K (columns
// per thread per tile), REVERSE (0/1), NAME.
// Logical coordinates run in sweep order: logical column c -> physical
// column (REVERSE ? nx-1-c : c); logical row L of the IC block -> physical row
// (REVERSE ? m-1-L : L).  In logical coordinates both sweeps are the forward
// recurrence  u(L,c) = (r - W*u(L,c-1) - S*u(L-1,c)) * invd.
// This launch sweeps logical rows L0 .. L0+M-1 of every IC block; when L0 > 0
// the row L0-1 has been swept by the previous launch and is read from u.
// One thread block per IC block walks the columns in tiles of NT*K; thread t
// owns columns tile0 + t*K .. tile0 + t*K + K-1 of each tile.
#define NP (M * (M + 1) / 2)             // packed lower-triangular M x M
#define IDX(l, k) ((l) * ((l) + 1) / 2 + (k))

extern "C" __global__ void __launch_bounds__(256)
NAME(const T* __restrict__ r, const T* __restrict__ W, const T* __restrict__ S,
     const T* __restrict__ invd, T* u, const int nx, const int m, const int L0)
{
    extern __shared__ __align__(16) unsigned char bubbleflow_smem[];
    T* sh = reinterpret_cast<T*>(bubbleflow_smem);   // [(NP + M) * NT], element e of thread t at e*NT + t
    const int NT = blockDim.x;
    const int t = threadIdx.x;
    const long long block_row0 = (long long)blockIdx.x * m;   // first physical row of the IC block

    long long rowoff[M];                 // physical offset of the start of each row of the sub-block
#pragma unroll
    for (int l = 0; l < M; ++l) {
        const int L = L0 + l;
        rowoff[l] = (block_row0 + (REVERSE ? (m - 1 - L) : L)) * (long long)nx;
    }
    const bool has_prev = (L0 > 0);
    const long long prevoff = has_prev
        ? (block_row0 + (REVERSE ? (m - L0) : (L0 - 1))) * (long long)nx : 0;

    T carry[M];                          // thread 0: state entering the current tile
#pragma unroll
    for (int l = 0; l < M; ++l) carry[l] = (T)0;

    const int TW = NT * K;
    for (int tile0 = 0; tile0 < nx; tile0 += TW) {       // uniform over the thread block
        const int c0 = min(tile0 + t * K, nx);
        const int c1 = min(c0 + K, nx);

        // ---- pass 1: affine map (P, q) of this thread's columns, v_out = P v_in + q.
        // Thread 0 starts from the constant map (0, carry), so every prefix of the
        // scan below is a constant map and only its q matters.
        T P[NP];
        T q[M];
#pragma unroll
        for (int l = 0; l < M; ++l) {
            q[l] = (t == 0) ? carry[l] : (T)0;
#pragma unroll
            for (int k = 0; k <= l; ++k) P[IDX(l, k)] = (k == l && t != 0) ? (T)1 : (T)0;
        }
#pragma unroll
        for (int kc = 0; kc < K; ++kc) {
            const int c = c0 + kc;
            if (c < c1) {
                const int pc = REVERSE ? (nx - 1 - c) : c;
                T qbelow = (T)0;                                 // q of row l-1, this column
#pragma unroll
                for (int l = 0; l < M; ++l) {
                    const long long p = rowoff[l] + pc;
                    const T id = invd[p];
                    const T a = (c > 0) ? -W[p] * id : (T)0;    // W masked on the first swept column
                    T g = r[p];
                    if (l == 0) {
                        if (has_prev) g -= S[p] * u[prevoff + pc];   // neighbour row, previous launch
                    }
                    g *= id;
                    const T s = (l > 0) ? -S[p] * id : (T)0;     // S masked on the first row
#pragma unroll
                    for (int k = 0; k <= l; ++k) {
                        T v = a * P[IDX(l, k)];
                        if (k < l) v += s * P[IDX(l - 1, k)];    // row l-1 already holds this column
                        P[IDX(l, k)] = v;
                    }
                    q[l] = g + a * q[l] + s * qbelow;
                    qbelow = q[l];
                }
            }
        }

        // ---- pass 2: inclusive scan of the maps, F_t = f_t o f_{t-1} o ... o f_0
        __syncthreads();                                   // the previous tile's readers are done
#pragma unroll
        for (int e = 0; e < NP; ++e) sh[e * NT + t] = P[e];
#pragma unroll
        for (int l = 0; l < M; ++l) sh[(NP + l) * NT + t] = q[l];
        __syncthreads();
        for (int d = 1; d < NT; d <<= 1) {
            const bool active = (t >= d);
            const bool need_P = (2 * d < NT);              // the last step only needs q
            if (active) {
                const int o = t - d;
                // (P, q) o (Po, qo) = (P Po, P qo + q); q first, it needs the old P.
#pragma unroll
                for (int l = 0; l < M; ++l) {
                    T acc = q[l];
#pragma unroll
                    for (int j = 0; j <= l; ++j) acc += P[IDX(l, j)] * sh[(NP + j) * NT + o];
                    q[l] = acc;
                }
                if (need_P) {
                    // (P Po)[l][k] = sum_{j=k..l} P[l][j] Po[j][k]; in place, k ascending.
#pragma unroll
                    for (int l = 0; l < M; ++l) {
#pragma unroll
                        for (int k = 0; k <= l; ++k) {
                            T acc = (T)0;
#pragma unroll
                            for (int j = k; j <= l; ++j) acc += P[IDX(l, j)] * sh[IDX(j, k) * NT + o];
                            P[IDX(l, k)] = acc;
                        }
                    }
                }
            }
            __syncthreads();                               // everyone has read step d's maps
            if (active) {
                if (need_P) {
#pragma unroll
                    for (int e = 0; e < NP; ++e) sh[e * NT + t] = P[e];
                }
#pragma unroll
                for (int l = 0; l < M; ++l) sh[(NP + l) * NT + t] = q[l];
            }
            __syncthreads();                               // step d's results visible
        }

        // ---- pass 3: re-walk the columns from the incoming state, writing u
        T x[M];                                            // state of the column before c0
#pragma unroll
        for (int l = 0; l < M; ++l) {
            x[l] = (t > 0) ? sh[(NP + l) * NT + t - 1] : carry[l];
            if (t == 0) carry[l] = sh[(NP + l) * NT + NT - 1];   // state leaving this tile
        }
#pragma unroll
        for (int kc = 0; kc < K; ++kc) {
            const int c = c0 + kc;
            if (c < c1) {
                const int pc = REVERSE ? (nx - 1 - c) : c;
                T below = (T)0;
#pragma unroll
                for (int l = 0; l < M; ++l) {
                    const long long p = rowoff[l] + pc;
                    T acc = r[p];
                    if (c > 0) acc -= W[p] * x[l];
                    if (l > 0) {
                        acc -= S[p] * below;
                    } else if (has_prev) {
                        acc -= S[p] * u[prevoff + pc];
                    }
                    const T v = acc * invd[p];
                    u[p] = v;
                    x[l] = v;
                    below = v;
                }
            }
        }
    }
}
