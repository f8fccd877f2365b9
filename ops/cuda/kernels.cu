// Decode-time kernels for pinfer's CUDA backend: one token, f32 activations,
// weights in the device layout that upload.go writes.
//
// Device layout of a weight row: every row starts on a 16-byte boundary
// (rowStride bytes apart). f32/f16 rows are plain. q8_0 and q4_0 rows are
// split into the quants of all blocks first (32 bytes per q8_0 block, 16 per
// q4_0 block, the q4_0 nibbles kept in GGML's order: byte j holds elements j
// and j+16) and then the blocks' f16 scales, so that quants load as aligned
// 16-byte vectors.
//
// Every scalar parameter is 64 bits wide (long long or double): the Go side
// copies 8 bytes per kernel argument.

#include <cuda_fp16.h>
#include <stdint.h>

typedef long long i64;

#define WARP 32

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

// Weights are streamed once per token: load them past L1 so that x stays there.
__device__ __forceinline__ uint4 ld_stream(const void *p) { return __ldcs((const uint4 *)p); }

// Row formats. Each describes one 16-byte vector of a row: how many elements
// it holds (EPV) and how it dots with / accumulates from x.
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q8_0 = 8 };

template <int T> struct Fmt;

template <> struct Fmt<T_F32> {
    enum { EPV = 4 };
    __device__ static float dot(uint4 v, const float *row_scales, i64 e, const float *x) {
        float4 xv = *(const float4 *)(x + e);
        return (__uint_as_float(v.x) * xv.x + __uint_as_float(v.y) * xv.y) +
               (__uint_as_float(v.z) * xv.z + __uint_as_float(v.w) * xv.w);
    }
    __device__ static void axpy(uint4 v, float s, float a, float *acc) {
        acc[0] += a * __uint_as_float(v.x);
        acc[1] += a * __uint_as_float(v.y);
        acc[2] += a * __uint_as_float(v.z);
        acc[3] += a * __uint_as_float(v.w);
    }
    __device__ static void put(float *y, i64 e, const float *acc) {
#pragma unroll
        for (int i = 0; i < 4; i++) y[e + i] = acc[i];
    }
    __device__ static float scale(const unsigned char *row, i64 qbytes, i64 e) { return 1.f; }
};

template <> struct Fmt<T_F16> {
    enum { EPV = 8 };
    __device__ static float dot(uint4 v, const float *, i64 e, const float *x) {
        const __half2 *h = (const __half2 *)&v;
        float4 x0 = *(const float4 *)(x + e), x1 = *(const float4 *)(x + e + 4);
        float2 a = __half22float2(h[0]), b = __half22float2(h[1]);
        float2 c = __half22float2(h[2]), d = __half22float2(h[3]);
        return ((a.x * x0.x + a.y * x0.y) + (b.x * x0.z + b.y * x0.w)) +
               ((c.x * x1.x + c.y * x1.y) + (d.x * x1.z + d.y * x1.w));
    }
    __device__ static void axpy(uint4 v, float, float a, float *acc) {
        const __half2 *h = (const __half2 *)&v;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 f = __half22float2(h[i]);
            acc[2 * i] += a * f.x;
            acc[2 * i + 1] += a * f.y;
        }
    }
    __device__ static void put(float *y, i64 e, const float *acc) {
#pragma unroll
        for (int i = 0; i < 8; i++) y[e + i] = acc[i];
    }
    __device__ static float scale(const unsigned char *, i64, i64) { return 1.f; }
};

// Small integers become floats without the conversion unit (a quarter of
// the FMA rate): byte k of w is placed in the mantissa of 2^23 by one byte
// permute, and subtracting 2^23 (plus the format's offset) leaves it exact.
__device__ __forceinline__ float mag(unsigned w, int k) {
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440 | k));
}
#define MAGIC 8388608.f

// q8_0: a vector is half a block, 16 consecutive int8 elements; flipping the
// sign bit makes them unsigned with an offset of 128.
template <> struct Fmt<T_Q8_0> {
    enum { EPV = 16 };
    __device__ static float dot(uint4 v, const float *, i64 e, const float *x) {
        const unsigned w[4] = {v.x ^ 0x80808080u, v.y ^ 0x80808080u, v.z ^ 0x80808080u, v.w ^ 0x80808080u};
        const float M = MAGIC + 128.f;
        float p[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float4 xv = *(const float4 *)(x + e + 4 * i);
            p[i] = ((mag(w[i], 0) - M) * xv.x + (mag(w[i], 1) - M) * xv.y) +
                   ((mag(w[i], 2) - M) * xv.z + (mag(w[i], 3) - M) * xv.w);
        }
        return (p[0] + p[1]) + (p[2] + p[3]);
    }
    __device__ static void axpy(uint4 v, float s, float a, float *acc) {
        const signed char *q = (const signed char *)&v;
        float as = a * s;
#pragma unroll
        for (int i = 0; i < 16; i++) acc[i] += as * q[i];
    }
    __device__ static void put(float *y, i64 e, const float *acc) {
#pragma unroll
        for (int i = 0; i < 16; i++) y[e + i] = acc[i];
    }
    __device__ static float scale(const unsigned char *row, i64 qbytes, i64 e) {
        return h2f(((const uint16_t *)(row + qbytes))[e >> 5]);
    }
};

// q4_0: a vector is one whole block; byte j holds elements j (low nibble)
// and j+16 (high nibble), each offset by 8.
template <> struct Fmt<T_Q4_0> {
    enum { EPV = 32 };
    __device__ static float dot(uint4 v, const float *, i64 e, const float *x) {
        const unsigned w[4] = {v.x, v.y, v.z, v.w};
        const float M = MAGIC + 8.f;
        float p[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            unsigned lo = w[i] & 0x0F0F0F0Fu, hi = (w[i] >> 4) & 0x0F0F0F0Fu;
            float4 xl = *(const float4 *)(x + e + 4 * i), xh = *(const float4 *)(x + e + 16 + 4 * i);
            p[i] = (((mag(lo, 0) - M) * xl.x + (mag(lo, 1) - M) * xl.y) +
                    ((mag(lo, 2) - M) * xl.z + (mag(lo, 3) - M) * xl.w)) +
                   (((mag(hi, 0) - M) * xh.x + (mag(hi, 1) - M) * xh.y) +
                    ((mag(hi, 2) - M) * xh.z + (mag(hi, 3) - M) * xh.w));
        }
        return (p[0] + p[1]) + (p[2] + p[3]);
    }
    __device__ static void axpy(uint4 v, float s, float a, float *acc) {
        // The nibbles become floats by byte permutes (mag), not conversions.
        const unsigned w[4] = {v.x, v.y, v.z, v.w};
        const float M = MAGIC + 8.f;
        float as = a * s;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            unsigned lo = w[i] & 0x0F0F0F0Fu, hi = (w[i] >> 4) & 0x0F0F0F0Fu;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                acc[4 * i + k] += as * (mag(lo, k) - M);
                acc[16 + 4 * i + k] += as * (mag(hi, k) - M);
            }
        }
    }
    __device__ static void put(float *y, i64 e, const float *acc) {
#pragma unroll
        for (int i = 0; i < 32; i++) y[e + i] = acc[i];
    }
    __device__ static float scale(const unsigned char *row, i64 qbytes, i64 e) {
        return h2f(((const uint16_t *)(row + qbytes))[e >> 5]);
    }
};

// Elements of the vectorised part of a row: f32/f16 rows may end in a tail
// shorter than one vector, done element by element.
template <int T> __device__ __forceinline__ i64 vec_elems(i64 cols) {
    return cols / Fmt<T>::EPV * Fmt<T>::EPV;
}

template <int T> __device__ __forceinline__ float tail_elem(const unsigned char *row, i64 e) {
    if (T == T_F32) return ((const float *)row)[e];
    return h2f(((const uint16_t *)row)[e]);
}

// Block-wide sum for blocks of up to 1024 threads.
__device__ float block_sum(float v) {
    __shared__ float part[32];
    __shared__ float total;
    v = warp_sum(v);
    if (threadIdx.x % WARP == 0) part[threadIdx.x / WARP] = v;
    __syncthreads();
    if (threadIdx.x < WARP) {
        float s = threadIdx.x < (blockDim.x + WARP - 1) / WARP ? part[threadIdx.x] : 0.f;
        s = warp_sum(s);
        if (threadIdx.x == 0) total = s;
    }
    __syncthreads();
    float r = total;
    __syncthreads();
    return r;
}

__device__ float block_max(float v) {
    __shared__ float part[32];
    __shared__ float total;
    v = warp_max(v);
    if (threadIdx.x % WARP == 0) part[threadIdx.x / WARP] = v;
    __syncthreads();
    if (threadIdx.x < WARP) {
        float s = threadIdx.x < (blockDim.x + WARP - 1) / WARP ? part[threadIdx.x] : -INFINITY;
        s = warp_max(s);
        if (threadIdx.x == 0) total = s;
    }
    __syncthreads();
    float r = total;
    __syncthreads();
    return r;
}

// out = x / rms(x) · w, one block.
extern "C" __global__ void rms_norm(float *out, const float *x, const float *w, i64 n, double eps) {
    float ss = 0.f;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) ss += x[i] * x[i];
    ss = block_sum(ss);
    float scale = (float)(1.0 / sqrt((double)ss / (double)n + eps));
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) out[i] = x[i] * scale * w[i];
}

// Rotates the first nrot dims of each head at position pos, as ops.RoPE does:
// the inverse frequency rounded to f32 first, the angle and its sine and
// cosine in double.
extern "C" __global__ void rope(float *x, i64 nhead, i64 hd, i64 nrot, i64 pos, double theta, i64 neox) {
    i64 half = nrot / 2;
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nhead * half) return;
    i64 h = t / half, i = t % half;
    float inv = (float)(1.0 / pow(theta, (double)(2 * i) / (double)nrot));
    double ang = (double)((float)pos * inv);
    float c = (float)cos(ang), s = (float)sin(ang);
    i64 a = h * hd + 2 * i, b = a + 1;
    if (neox) a = h * hd + i, b = a + half;
    float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
}

// Stores one token's k and v rows at position pos of the cache.
extern "C" __global__ void kv_store(float *kc, float *vc, const float *k, const float *v,
                                    i64 kdim, i64 vdim, i64 pos) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < kdim) kc[pos * kdim + i] = k[i];
    if (i < vdim) vc[pos * vdim + i] = v[i];
}

// attend is one head's attention for a query qh at position pos over rows
// [first, pos], the scores in s: the dot products with the keys, their
// softmax, then the values weighted by it. Row pos is read from kn and vn
// when they are given (attn2: this step's k and v, which another block may
// not have stored in the cache yet), else from the cache like the others.
__device__ void attend(float *out, const float *qh, const float *kc, const float *vc, const float *kn,
                       const float *vn, float *s, i64 first, i64 pos, i64 nkv, i64 kvh, i64 hd, i64 vd,
                       float scale) {
    i64 len = pos + 1 - first;
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    for (i64 j = warp; j < len; j += nw) {
        i64 p = first + j;
        const float *kr = (kn && p == pos) ? kn : kc + p * nkv * hd + kvh * hd;
        float d = 0.f;
        for (i64 c = lane; c < hd; c += WARP) d += qh[c] * kr[c];
        d = warp_sum(d);
        if (lane == 0) s[j] = d * scale;
    }
    __syncthreads();
    float m = -INFINITY;
    for (i64 j = threadIdx.x; j < len; j += blockDim.x) m = fmaxf(m, s[j]);
    m = block_max(m);
    float sum = 0.f;
    for (i64 j = threadIdx.x; j < len; j += blockDim.x) {
        float e = expf(s[j] - m);
        s[j] = e;
        sum += e;
    }
    sum = block_sum(sum);
    float inv = 1.f / sum;
    for (i64 c = threadIdx.x; c < vd; c += blockDim.x) {
        float o = 0.f;
        for (i64 j = 0; j < len; j++) {
            i64 p = first + j;
            const float *vr = (vn && p == pos) ? vn : vc + p * nkv * vd + kvh * vd;
            o += s[j] * vr[c];
        }
        out[c] = o * inv;
    }
}

// One query token at position pos attends over cache rows [first, pos]; one
// block per head. Scores live in scratch[h·nctx ...].
extern "C" __global__ void attention(float *out, const float *q, const float *kc, const float *vc,
                                     float *scratch, i64 nctx, i64 nh, i64 nkv, i64 hd, i64 vd,
                                     i64 pos, i64 window, double scale) {
    i64 h = blockIdx.x, kvh = h / (nh / nkv);
    i64 first = 0;
    if (window > 0 && pos - window + 1 > 0) first = pos - window + 1;
    attend(out + h * vd, q + h * hd, kc, vc, nullptr, nullptr, scratch + h * nctx, first, pos, nkv, kvh, hd, vd,
           (float)scale);
}

// A plain copy in 16-byte vectors: the bandwidth ceiling the gather kernels
// are measured against, next to the driver's own device-to-device copy.
extern "C" __global__ void copy16(uint4 *dst, const uint4 *src, i64 n) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        dst[i] = __ldcs(src + i);
}

// ffn_activation is ops.FFNActivation: act 0 relu, 1 fatrelu, 2 drelu,
// 3 silu, 4 gelu (tanh form); u is 1 for a non-gated FFN.
__device__ __forceinline__ float ffn_activation(float gv, float uv, i64 act, float thr) {
    switch (act) {
    case 0: gv = gv <= 0.f ? 0.f : gv; break;
    case 1: gv = gv <= thr ? 0.f : gv; break;
    case 2: gv = (gv <= 0.f || uv <= 0.f) ? 0.f : gv; break;
    case 3: gv = gv / (1.f + (float)exp(-(double)gv)); break;
    case 4: {
        double f = gv;
        gv = (float)(0.5 * f * (1.0 + tanh(0.7978845608028654 * (f + 0.044715 * f * f * f))));
        break;
    }
    }
    return gv * uv;
}

// The activation of the hot neurons between the gate/up gathers and the down
// axpy, in place over g: g[k] = act(g[k] + bias[idx[k]], u[k]) · u[k], as
// ops.FFNActivation computes it (u is 1 when null). act: 0 relu, 1 fatrelu,
// 2 drelu, 3 silu, 4 gelu (tanh form).
extern "C" __global__ void ffn_act(float *g, const float *u, const float *bias, const int *idx, i64 n,
                                   i64 act, double thr) {
    i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    float gv = g[k], uv = u ? u[k] : 1.f;
    if (bias) gv += bias[idx ? idx[k] : k];
    g[k] = ffn_activation(gv, uv, act, (float)thr);
}

#include "step.cuh"
