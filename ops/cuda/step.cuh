// The kernels of a whole decode step on the device (included by kernels.cu):
// mat-vecs and the FFN with the row count read from device memory (the
// predictor's output), q8_0 activations for q4_0 weights, norms fused with
// the residual add, and rope, attention and embedding reading the token and
// position from device memory, so a captured step replays unchanged.
//
// params, where a kernel takes it, is int64[2] in device memory: the token
// id and the position.

// --- q8_0 activations ---
//
// A vector of n = 32·nb floats quantized as the CPU's q4_0 path quantizes its
// activations (ops/avx2: d = amax/127 rounded to f16, q = round(x/d), halves
// away from zero), so a q4_0 mat-vec here sums the same integers. Layout,
// chosen so a lane's block loads as two aligned 16-byte vectors with
// consecutive lanes on consecutive banks: lo[nb][16] int8 (elements 0..15 of
// each block), hi[nb][16] (16..31), d[nb] float, s[nb] int (the block's sum
// of quants: a q4_0 weight's offset of 8 is taken off through it).
struct QX {
    const int4 *lo, *hi;
    const float *d;
    const int *s;
};

__device__ __forceinline__ QX qx_view(const signed char *xq, i64 nb) {
    QX q;
    q.lo = (const int4 *)xq;
    q.hi = (const int4 *)(xq + nb * 16);
    q.d = (const float *)(xq + nb * 32);
    q.s = (const int *)(xq + nb * 36);
    return q;
}

__device__ __forceinline__ int warp_isum(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// quant_block: the 32 lanes of a warp hold elements of block b, lane j
// element j; all lanes must call it.
__device__ __forceinline__ void quant_block(float v, int lane, i64 b, i64 nb, signed char *xq) {
    float amax = warp_max(fabsf(v));
    float d = amax / 127.f;
    float id = d != 0.f ? 1.f / d : 0.f;
    int q = (int)roundf(v * id);
    int s = warp_isum(q);
    if (lane < 16) xq[b * 16 + lane] = (signed char)q;
    else xq[nb * 16 + b * 16 + lane - 16] = (signed char)q;
    if (lane == 0) {
        ((float *)(xq + nb * 32))[b] = __half2float(__float2half_rn(d));
        ((int *)(xq + nb * 36))[b] = s;
    }
}

// quant_q8: xq = q8_0(x), one warp per block.
extern "C" __global__ void quant_q8(signed char *xq, const float *x, i64 n) {
    i64 nb = n / 32;
    int lane = threadIdx.x % WARP;
    i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / WARP, nw = (i64)gridDim.x * blockDim.x / WARP;
    for (i64 b = w; b < nb; b += nw) quant_block(x[b * 32 + lane], lane, b, nb, xq);
}

// q4_0 row vector w (one block, scale dw) · q8_0 block (a, b: its quants,
// d its scale, qs their sum): integer dot by dp4a, then the two scales, as
// the CPU's q4_0 × q8_0 kernel.
__device__ __forceinline__ float dot_q4q8v(uint4 w, float dw, int4 a, int4 b, float d, int qs) {
    int s = 0;
    s = __dp4a((int)(w.x & 0x0F0F0F0Fu), a.x, s);
    s = __dp4a((int)((w.x >> 4) & 0x0F0F0F0Fu), b.x, s);
    s = __dp4a((int)(w.y & 0x0F0F0F0Fu), a.y, s);
    s = __dp4a((int)((w.y >> 4) & 0x0F0F0F0Fu), b.y, s);
    s = __dp4a((int)(w.z & 0x0F0F0F0Fu), a.z, s);
    s = __dp4a((int)((w.z >> 4) & 0x0F0F0F0Fu), b.z, s);
    s = __dp4a((int)(w.w & 0x0F0F0F0Fu), a.w, s);
    s = __dp4a((int)((w.w >> 4) & 0x0F0F0F0Fu), b.w, s);
    return dw * d * (float)(s - 8 * qs);
}

// The same against block v of x.
__device__ __forceinline__ float dot_q4q8(uint4 w, float dw, i64 v, const QX &x) {
    return dot_q4q8v(w, dw, __ldg(x.lo + v), __ldg(x.hi + v), __ldg(x.d + v), __ldg(x.s + v));
}

// --- mat-vec: rows gathered by an index ---

// The previous step kernels (run 5 of NOTES.md: lane groups of 8 or 32,
// 256-thread blocks, U loads in flight, x read as each vector is dotted),
// kept for the bandwidth test's side-by-side only.
template <int T>
__device__ __forceinline__ float prev_dot_vec(uint4 w, const unsigned char *row, i64 qbytes, i64 v, const float *x,
                                              const QX &qx) {
    const int EPV = Fmt<T>::EPV;
    if (T == T_Q4_0) return dot_q4q8(w, h2f(((const uint16_t *)(row + qbytes))[v]), v, qx);
    return Fmt<T>::scale(row, qbytes, v * EPV) * Fmt<T>::dot(w, nullptr, 0, x + v * EPV);
}

template <int T, int G>
__device__ __forceinline__ float prev_row_dot(const unsigned char *row, bool live, i64 qbytes, i64 cols, int gl,
                                              const float *x, const QX &qx) {
    const int EPV = Fmt<T>::EPV, U = 4;
    i64 nv = vec_elems<T>(cols) / EPV;
    float acc = 0.f;
    for (i64 v0 = gl; v0 < nv; v0 += G * U) {
        uint4 buf[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (live && v0 + u * G < nv) buf[u] = ld_stream(row + (v0 + u * G) * 16);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (live && v0 + u * G < nv) acc += prev_dot_vec<T>(buf[u], row, qbytes, v0 + u * G, x, qx);
    }
    if ((T == T_F32 || T == T_F16) && live)
        for (i64 e = nv * EPV + gl; e < cols; e += G) acc += tail_elem<T>(row, e) * x[e];
    return acc;
}

template <int G> __device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <int T, int G>
__device__ void prev_gv(float *out, const unsigned char *W, i64 stride, i64 qbytes, const int *idx, i64 n,
                        i64 cols, const float *x, const signed char *xq) {
    const int RPW = WARP / G;
    int gl = threadIdx.x % G;
    QX qx;
    if (T == T_Q4_0) qx = qx_view(xq, cols / 32);
    i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / WARP, nw = (i64)gridDim.x * blockDim.x / WARP;
    for (i64 kb = w * RPW; kb < n; kb += nw * RPW) {
        i64 k = kb + (threadIdx.x % WARP) / G;
        bool live = k < n;
        i64 r = live ? (idx ? idx[k] : k) : 0;
        float s = group_sum<G>(prev_row_dot<T, G>(W + r * stride, live, qbytes, cols, gl, x, qx));
        if (live && gl == 0) out[k] = s;
    }
}

// Programmatic dependent launch (Hopper): device.go launches the gathers so
// that they may start while the kernel before them still drains, which
// hides part of their launch. pdl_wait blocks until that kernel has
// finished and its writes are visible: nothing may be read before it.
// Launched plainly, it returns at once.
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// How a round of row_dot gets x. XP_GLOBAL: each vector's dot loads its
// part of x from global memory when it runs. The dots run one after
// another once the weights have arrived, and every warp of an SM starts at
// once, so none finds x in L1 and each of those loads is a trip to L2 in
// a row. XP_TOUCH: a 4-byte load per 32-byte sector of x that a vector
// needs goes out with the weights, so the dots find x in L1: f16 at 20%
// rows 7.7 -> 7.0 us. q8_0 keeps XP_GLOBAL (its two touches per vector:
// 8.4 -> 10.2 us), and q4_0 too: four touches per vector (x's quants,
// scale and sum) cost more than they saved, and so did copying its q8_0 x
// into shared memory (NOTES.md, run 6).
enum { XP_GLOBAL = 0, XP_TOUCH = 1 };

// touch loads the word at p through L1 (the default caching of a global
// load), so the line is there when a dot reads it.
__device__ __forceinline__ unsigned touch(const void *p) { return *(const unsigned *)p; }

// row_dot: a group of G lanes dots one row (live false: no loads, 0); lane
// gl takes vectors gl, gl+G, ... and returns its partial sum. A round
// issues all U loads of weights (and their scales, and with XP_TOUCH the
// touches of x) before it uses any, so a row of up to G·U vectors costs
// one trip to memory.
template <int T, int G, int U, int XP>
__device__ __forceinline__ float row_dot(const unsigned char *row, bool live, i64 qbytes, i64 cols, int gl,
                                         const float *x, const QX &qx) {
    const int EPV = Fmt<T>::EPV;
    i64 nv = vec_elems<T>(cols) / EPV;
    float acc = 0.f;
    for (i64 v0 = gl; v0 < nv; v0 += G * U) {
        uint4 buf[U];
        float sc[U];
        unsigned tch = 0;
#pragma unroll
        for (int u = 0; u < U; u++)
            if (live && v0 + u * G < nv) {
                buf[u] = ld_stream(row + (v0 + u * G) * 16);
                sc[u] = Fmt<T>::scale(row, qbytes, (v0 + u * G) * EPV);
            }
        if (XP == XP_TOUCH)
#pragma unroll
            for (int u = 0; u < U; u++)
                if (v0 + u * G < nv)
#pragma unroll
                    for (int b = 0; b < EPV * 4; b += 32) tch ^= touch(x + (v0 + u * G) * EPV + b / 4);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (live && v0 + u * G < nv) {
                i64 v = v0 + u * G;
                if (T == T_Q4_0) acc += dot_q4q8(buf[u], sc[u], v, qx);
                else acc += sc[u] * Fmt<T>::dot(buf[u], nullptr, 0, x + v * EPV);
            }
        // Use the touches, or they would not be loaded: their sign bit only,
        // which turns a sum of -0 into +0 at most.
        if (XP == XP_TOUCH) acc += __uint_as_float(tch & 0x80000000u);
    }
    if ((T == T_F32 || T == T_F16) && live)
        for (i64 e = nv * EPV + gl; e < cols; e += G) acc += tail_elem<T>(row, e) * x[e];
    return acc;
}

// group_total is the sum of v over a lane group of G lanes, in lane gl 0
// of the group (G up to a warp: in every lane). Groups wider than a warp
// add their warps' sums through part; every thread of the block must call
// it.
template <int G> __device__ __forceinline__ float group_total(float v, float *part) {
    if (G <= WARP) return group_sum<G>(v);
    v = warp_sum(v);
    if (threadIdx.x % WARP == 0) part[threadIdx.x / WARP] = v;
    __syncthreads();
    int first = threadIdx.x / G * (G / WARP);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < G / WARP; i++) s += part[first + i];
    __syncthreads();
    return s;
}

// gv: out[k] = W[r_k] · x for k < n, r_k = idx[k] (k when idx is null), n
// read from *np when np is set. A block of blockDim.x/G lane groups takes
// one row each and the grid strides over the rows; every thread reaches
// the loop's reductions, live or not.
// epi 0: out[k] = dot (+ bias[r_k]); 1: out[k] = relu(dot); 2: mask[k] =
// dot > cut (PowerInfer's predictor: the neurons worth computing).
template <int T, int G, int U, int XP>
__device__ void gv(float *out, const unsigned char *W, i64 stride, i64 qbytes, const int *idx, i64 n,
                   const int *np, i64 cols, const float *x, const signed char *xq, const float *bias, i64 epi,
                   double cut, int *mask) {
    __shared__ float part[G > WARP ? 1024 / WARP : 1];
    pdl_wait();
    if (np) n = *np;
    int gl = threadIdx.x % G, rpb = blockDim.x / G;
    QX qx;
    if (T == T_Q4_0) qx = qx_view(xq, cols / 32);
    for (i64 kb = (i64)blockIdx.x * rpb; kb < n; kb += (i64)gridDim.x * rpb) {
        i64 k = kb + threadIdx.x / G;
        bool live = k < n;
        i64 r = live ? (idx ? idx[k] : k) : 0;
        float s = group_total<G>(row_dot<T, G, U, XP>(W + r * stride, live, qbytes, cols, gl, x, qx), part);
        if (!live || gl != 0) continue;
        if (epi == 2) mask[k] = s > (float)cut;
        else if (epi == 1) out[k] = s < 0.f ? 0.f : s;
        else out[k] = bias ? s + bias[r] : s;
    }
}

// gu: the FFN's gate and up rows of neuron r_k and its activation, a[k] =
// act(gate·x + bias[r_k], up·x); gate and up share one layout. With up,
// lane groups come in pairs, the first on a neuron's gate row and the
// second on its up row (the same registers as gv, so as many rows in
// flight), meeting in shared memory.
template <int T, int G, int U, int XP>
__device__ void gu(float *a, const unsigned char *gate, const unsigned char *up, i64 stride, i64 qbytes,
                   const int *idx, i64 n, const int *np, i64 cols, const float *x, const signed char *xq,
                   const float *gbias, i64 act, double thr) {
    __shared__ float part[G > WARP ? 1024 / WARP : 1];
    __shared__ float ush[1024 / 16];
    pdl_wait();
    if (np) n = *np;
    int gl = threadIdx.x % G, grp = threadIdx.x / G;
    int pair = up ? 2 : 1, npb = blockDim.x / G / pair; // neurons per block
    int slot = grp / pair;
    bool isup = up && grp % 2 == 1;
    QX qx;
    if (T == T_Q4_0) qx = qx_view(xq, cols / 32);
    for (i64 kb = (i64)blockIdx.x * npb; kb < n; kb += (i64)gridDim.x * npb) {
        i64 k = kb + slot;
        bool live = k < n;
        i64 r = live ? (idx ? idx[k] : k) : 0;
        const unsigned char *row = (isup ? up : gate) + r * stride;
        float s = group_total<G>(row_dot<T, G, U, XP>(row, live, qbytes, cols, gl, x, qx), part);
        if (up) {
            if (isup && gl == 0) ush[slot] = s;
            __syncthreads();
        }
        if (live && !isup && gl == 0) {
            float u = up ? ush[slot] : 1.f;
            if (gbias) s += gbias[r];
            a[k] = ffn_activation(s, u, act, (float)thr);
        }
        if (up) __syncthreads();
    }
}

// The kernels, 128-thread blocks: G lanes per row (step.go picks G from
// the row's length), 4 loads in flight per lane, x touched into L1 for f32
// and f16. The launch bounds keep 8 blocks (9 with 64 lanes) resident per
// SM, enough for a sparse gather of a few thousand rows to be in flight at
// once.
#define STEP_KERNELS(sfx, T, G, U, XP, MB)                                                             \
    extern "C" __global__ void __launch_bounds__(128, MB) gv_##sfx(float *out, const unsigned char *W, \
        i64 stride, i64 qbytes, const int *idx, i64 n, const int *np, i64 cols, const float *x,        \
        const signed char *xq, const float *bias, i64 epi, double cut, int *mask) {                    \
        gv<T, G, U, XP>(out, W, stride, qbytes, idx, n, np, cols, x, xq, bias, epi, cut, mask);        \
    }                                                                                                  \
    extern "C" __global__ void __launch_bounds__(128, MB) gu_##sfx(float *a, const unsigned char *gate,\
        const unsigned char *up, i64 stride, i64 qbytes, const int *idx, i64 n, const int *np,         \
        i64 cols, const float *x, const signed char *xq, const float *gbias, i64 act, double thr) {    \
        gu<T, G, U, XP>(a, gate, up, stride, qbytes, idx, n, np, cols, x, xq, gbias, act, thr);        \
    }
#define STEP_TYPE(t, T, XP)                                                                            \
    STEP_KERNELS(t##_8, T, 8, 4, XP, 8)                                                                \
    STEP_KERNELS(t##_16, T, 16, 4, XP, 8)                                                              \
    STEP_KERNELS(t##_32, T, 32, 4, XP, 8)                                                              \
    STEP_KERNELS(t##_64, T, 64, 4, XP, 9)
STEP_TYPE(f32, T_F32, XP_TOUCH)
STEP_TYPE(f16, T_F16, XP_TOUCH)
STEP_TYPE(q8_0, T_Q8_0, XP_GLOBAL)
STEP_TYPE(q4_0, T_Q4_0, XP_GLOBAL)

// For the bandwidth tests only: the previous kernels, this one without the
// touches of x, an empty kernel (a graph node's fixed cost) and one with a
// gather's dependent loads but not its bytes (out[k] = idx[k], or with
// deref the first word of row idx[k]).
#define PREV_KERNEL(sfx, T)                                                                            \
    extern "C" __global__ void __launch_bounds__(256) gvprev_##sfx(float *out, const unsigned char *W, \
        i64 stride, i64 qbytes, const int *idx, i64 n, const int *np, i64 cols, const float *x,        \
        const signed char *xq, const float *bias, i64 epi, double cut, int *mask) {                    \
        prev_gv<T, 32>(out, W, stride, qbytes, idx, n, cols, x, xq);                                   \
    }
PREV_KERNEL(f16, T_F16)
PREV_KERNEL(q4_0, T_Q4_0)
STEP_KERNELS(noxt_f16_64, T_F16, 64, 4, XP_GLOBAL, 9)

extern "C" __global__ void nop(float *out) { pdl_wait(); }

extern "C" __global__ void chain(float *out, const unsigned char *W, i64 stride, const int *idx, i64 n, i64 deref) {
    pdl_wait();
    i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    i64 r = idx[k];
    out[k] = deref ? (float)__ldcs((const int *)(W + r * stride)) : (float)r;
}

// ax: y[c] (+)= Σ_k a[k] · W[r_k][c], the down projection of the chosen
// neurons over a neuron-major down_t. Block x covers a slice of G vectors
// of every row (plus the f32/f16 tail in the last slice), block y a chunk
// of the n rows; the block's 256/G lane groups share out the chunk's rows
// (U in flight each, rows with a zero coefficient skipped) and add up in
// shared memory. One chunk writes y itself; several write partials that
// the last chunk of a slice to finish adds in chunk order, so the sum does
// not depend on scheduling. overwrite sets y = base (0 when null) + sum
// instead of adding: the FFN's output needs no clearing first.
template <int T, int G>
__device__ void ax(float *y, const unsigned char *W, i64 stride, i64 qbytes, const int *idx, const float *a,
                   i64 n, const int *np, i64 cols, float *scratch, unsigned int *counters, const float *base,
                   i64 overwrite) {
    const int EPV = Fmt<T>::EPV, NG = 256 / G, U = 4;
    const int GS = G * EPV + (G < WARP ? 8 : 0); // a group's row of sh, padded off the other groups' banks
    __shared__ float sh[NG * GS];
    __shared__ float tsh[NG * 8];
    __shared__ bool last;
    if (np) n = *np;
    int gl = threadIdx.x % G, g = threadIdx.x / G;
    i64 nv = vec_elems<T>(cols) / EPV;
    i64 v = (i64)blockIdx.x * G + gl;
    i64 chunk = (n + gridDim.y - 1) / gridDim.y;
    i64 k0 = (i64)blockIdx.y * chunk, k1 = min(n, k0 + chunk);
    i64 ntail = cols - nv * EPV;
    bool tailblk = (T == T_F32 || T == T_F16) && blockIdx.x == gridDim.x - 1;
    bool tail = tailblk && gl < ntail;
    float acc[EPV], tacc = 0.f;
#pragma unroll
    for (int i = 0; i < EPV; i++) acc[i] = 0.f;
    for (i64 k = k0 + g; k < k1; k += NG * U) {
        uint4 buf[U];
        float s[U], av[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            i64 kk = k + u * NG;
            av[u] = kk < k1 ? a[kk] : 0.f;
            if (av[u] != 0.f) {
                const unsigned char *row = W + (i64)(idx ? idx[kk] : kk) * stride;
                if (v < nv) {
                    buf[u] = ld_stream(row + v * 16);
                    s[u] = Fmt<T>::scale(row, qbytes, v * EPV);
                }
                if (tail) tacc += av[u] * tail_elem<T>(row, nv * EPV + gl);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            if (av[u] != 0.f && v < nv) Fmt<T>::axpy(buf[u], s[u], av[u], acc);
    }
    // Column c of the slice is lane c/EPV's acc[c%EPV], kept at
    // sh[g·GS + (c%EPV)·G + c/EPV] so that a warp's stores hit distinct banks.
#pragma unroll
    for (int i = 0; i < EPV; i++) sh[g * GS + i * G + gl] = acc[i];
    if (tailblk && gl < 8) tsh[g * 8 + gl] = tacc;
    __syncthreads();
    i64 c0 = (i64)blockIdx.x * G * EPV;
    i64 width = min((i64)G * EPV, nv * EPV - c0);
    bool multi = gridDim.y > 1;
    for (i64 c = threadIdx.x; c < width; c += blockDim.x) {
        float sum = 0.f;
        for (int gg = 0; gg < NG; gg++) sum += sh[gg * GS + (c % EPV) * G + c / EPV];
        if (multi) scratch[(i64)blockIdx.y * cols + c0 + c] = sum;
        else y[c0 + c] = (overwrite ? (base ? base[c0 + c] : 0.f) : y[c0 + c]) + sum;
    }
    if (tailblk && threadIdx.x < ntail) {
        float sum = 0.f;
        for (int gg = 0; gg < NG; gg++) sum += tsh[gg * 8 + threadIdx.x];
        i64 c = nv * EPV + threadIdx.x;
        if (multi) scratch[(i64)blockIdx.y * cols + c] = sum;
        else y[c] = (overwrite ? (base ? base[c] : 0.f) : y[c]) + sum;
    }
    if (!multi) return;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    i64 c1 = c0 + max(width, (i64)0);
    if (tailblk) c1 = cols;
    for (i64 c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
        float sum = 0.f;
        for (i64 j = 0; j < gridDim.y; j++) sum += __ldcg(scratch + j * cols + c);
        y[c] = (overwrite ? (base ? base[c] : 0.f) : y[c]) + sum;
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0;
}


// Lane groups per axpy row: 8 for the quantized formats (a slice of 256 or
// 128 columns), a warp for f32/f16 (128 or 256 columns).
#define AX_KERNEL(sfx, T, G)                                                                           \
    extern "C" __global__ void __launch_bounds__(256) ax_##sfx(float *y, const unsigned char *W,       \
        i64 stride, i64 qbytes, const int *idx, const float *a, i64 n, const int *np, i64 cols,        \
        float *scratch, unsigned int *counters, const float *base, i64 overwrite) {                    \
        ax<T, G>(y, W, stride, qbytes, idx, a, n, np, cols, scratch, counters, base, overwrite);       \
    }
AX_KERNEL(f32, T_F32, 32)
AX_KERNEL(f16, T_F16, 32)
AX_KERNEL(q8_0, T_Q8_0, 8)
AX_KERNEL(q4_0, T_Q4_0, 8)

// compact: idx = the k < n with mask[k] set, ascending; *count = how many;
// *total += count (the sparse layer's running tally). One block of 1024:
// each thread takes a run of consecutive k, and a block-wide scan of the
// runs' counts places them.
extern "C" __global__ void compact(int *idx, int *count, long long *total, const int *mask, i64 n) {
    __shared__ int ws[32];
    i64 per = (n + blockDim.x - 1) / blockDim.x;
    i64 lo = threadIdx.x * per, hi = min(n, lo + per);
    int c = 0;
    for (i64 i = lo; i < hi; i++) c += mask[i] != 0;
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    int incl = c;
#pragma unroll
    for (int o = 1; o < WARP; o <<= 1) {
        int t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += t;
    }
    if (lane == WARP - 1) ws[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        int nwarps = blockDim.x / WARP;
        int t = lane < nwarps ? ws[lane] : 0, ti = t;
#pragma unroll
        for (int o = 1; o < WARP; o <<= 1) {
            int u = __shfl_up_sync(0xffffffffu, ti, o);
            if (lane >= o) ti += u;
        }
        ws[lane] = ti - t; // exclusive prefix of the warps
    }
    __syncthreads();
    int off = ws[warp] + incl - c;
    for (i64 i = lo; i < hi; i++)
        if (mask[i] != 0) idx[off++] = (int)i;
    if (threadIdx.x == blockDim.x - 1) {
        *count = off;
        if (total) *total += off;
    }
}

// norm2: one block. v = x + b (b may be null; sum, when set, receives v and
// sumq its q8_0), out = rms_norm(v)·w (kind 0) or layer_norm(v)·w + bias
// (kind 1), as ops.RMSNorm and ops.LayerNorm compute them, and outq, when
// set, its q8_0.
extern "C" __global__ void norm2(float *out, signed char *outq, const float *x, const float *b, float *sum,
                                 signed char *sumq, const float *w, const float *bias, i64 n, double eps,
                                 i64 kind) {
    __shared__ double red[32];
    __shared__ double tot;
    // Double sums as the CPU's, by warps then across warps.
    double s1 = 0, s2 = 0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float v = b ? x[i] + b[i] : x[i];
        if (sum) sum[i] = v;
        s1 += v;
        s2 += (double)v * v;
    }
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = (blockDim.x + WARP - 1) / WARP;
    double mean = 0, ss;
    if (kind == 1) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s1 += __shfl_xor_sync(0xffffffffu, s1, o);
        if (lane == 0) red[warp] = s1;
        __syncthreads();
        if (threadIdx.x == 0) {
            double t = 0;
            for (int i = 0; i < nw; i++) t += red[i];
            tot = t;
        }
        __syncthreads();
        mean = tot / (double)n;
        __syncthreads();
        s2 = 0;
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            float v = b ? x[i] + b[i] : x[i];
            double d = (double)v - mean;
            s2 += d * d;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s2 += __shfl_xor_sync(0xffffffffu, s2, o);
    if (lane == 0) red[warp] = s2;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int i = 0; i < nw; i++) t += red[i];
        tot = t;
    }
    __syncthreads();
    ss = tot;
    if (kind == 0) {
        float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            float v = b ? x[i] + b[i] : x[i];
            out[i] = v * scale * w[i];
        }
    } else {
        double inv = 1.0 / sqrt(ss / (double)n + eps);
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            float v = b ? x[i] + b[i] : x[i];
            float y = (float)(((double)v - mean) * inv);
            y = __fmul_rn(y, w[i]); // unfused, as the CPU rounds
            if (bias) y = __fadd_rn(y, bias[i]);
            out[i] = y;
        }
    }
    if (!outq && !sumq) return;
    __syncthreads(); // out is read back below by other threads of the block
    i64 nb = n / 32;
    for (i64 blk = warp; blk < nb; blk += nw) {
        if (outq) quant_block(out[blk * 32 + lane], lane, blk, nb, outq);
        if (sumq) {
            i64 i = blk * 32 + lane;
            quant_block(b ? x[i] + b[i] : x[i], lane, blk, nb, sumq);
        }
    }
}

// ew: out = a op b element-wise (op 0 add, 1 mul) or op(a) (2 relu, 3 silu,
// 4 gelu), as the registered ops; outq, when set (n a multiple of 32), gets
// the q8_0 of out.
extern "C" __global__ void ew(float *out, signed char *outq, const float *a, const float *b, i64 n, i64 op) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = a[i];
    switch (op) {
    case 0: v = v + b[i]; break;
    case 1: v = v * b[i]; break;
    case 2: v = v < 0.f ? 0.f : v; break;
    case 3: v = v / (1.f + (float)exp(-(double)v)); break;
    case 4: {
        double f = v;
        v = (float)(0.5 * f * (1.0 + tanh(0.7978845608028654 * (f + 0.044715 * f * f * f))));
        break;
    }
    }
    out[i] = v;
    if (outq) quant_block(v, threadIdx.x % WARP, i / 32, n / 32, outq);
}

// embed: out = row params[which] + offset of W, dequantized as the CPU's
// RowF32 does (type: the GGML id).
extern "C" __global__ void embed(float *out, const unsigned char *W, i64 stride, i64 qbytes, i64 type, i64 cols,
                                 const long long *params, i64 which, i64 offset) {
    const unsigned char *row = W + (params[which] + offset) * stride;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < cols; e += (i64)gridDim.x * blockDim.x) {
        float v;
        switch (type) {
        case T_F32: v = ((const float *)row)[e]; break;
        case T_F16: v = h2f(((const uint16_t *)row)[e]); break;
        case T_Q8_0: v = (float)((const signed char *)row)[e] * h2f(((const uint16_t *)(row + qbytes))[e >> 5]); break;
        default: {
            int j = e & 31;
            unsigned char q = row[(e >> 5) * 16 + (j & 15)];
            int qv = j < 16 ? (q & 15) : (q >> 4);
            v = (float)(qv - 8) * h2f(((const uint16_t *)(row + qbytes))[e >> 5]);
        }
        }
        out[e] = v;
    }
}

// rope2: out = in rotated at the position in params, as ops.RoPE (the dims
// past n_rot copied).
extern "C" __global__ void rope2(float *out, const float *in, i64 nhead, i64 hd, i64 nrot, const long long *params,
                                 double theta, i64 neox) {
    i64 half = nrot / 2, rest = hd - nrot;
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < nhead * half) {
        i64 h = t / half, i = t % half;
        float inv = (float)(1.0 / pow(theta, (double)(2 * i) / (double)nrot));
        double ang = (double)((float)params[1] * inv);
        float c = (float)cos(ang), s = (float)sin(ang);
        i64 a = h * hd + 2 * i, b = a + 1;
        if (neox) a = h * hd + i, b = a + half;
        float x0 = in[a], x1 = in[b];
        out[a] = x0 * c - x1 * s;
        out[b] = x0 * s + x1 * c;
    }
    if (t < nhead * rest) {
        i64 e = (t / rest) * hd + nrot + t % rest;
        out[e] = in[e];
    }
}

// attn2: attention at the position in params. One block per query head;
// the first head of each KV group stores this position's k and v in the
// cache, and every head reads them from k and v directly rather than from
// the cache, so no block waits for another.
extern "C" __global__ void attn2(float *out, const float *q, const float *k, const float *v, float *kc, float *vc,
                                 float *scratch, i64 nctx, i64 nh, i64 nkv, i64 hd, i64 vd, const long long *params,
                                 i64 window, double scale) {
    i64 pos = params[1];
    i64 h = blockIdx.x, group = nh / nkv, kvh = h / group;
    const float *kn = k + kvh * hd, *vn = v + kvh * vd;
    if (h % group == 0) {
        for (i64 c = threadIdx.x; c < hd; c += blockDim.x) kc[pos * nkv * hd + kvh * hd + c] = kn[c];
        for (i64 c = threadIdx.x; c < vd; c += blockDim.x) vc[pos * nkv * vd + kvh * vd + c] = vn[c];
    }
    i64 first = 0;
    if (window > 0 && pos - window + 1 > 0) first = pos - window + 1;
    attend(out + h * vd, q + h * hd, kc, vc, kn, vn, scratch + h * nctx, first, pos, nkv, kvh, hd, vd, (float)scale);
}
