// Hand kernel: depthwise KxK, stride 2, dilation D, pad P on C x 7 x 7 (NCHW), output <= 4x4.
// Per channel the input's 4 phases (row parity x column parity) are compacted into one
// vector each (lane i*4+j = input row 2i+a, column 2j+b: two 2-source shuffles and a blend
// from the channel's 4 loads), and each tap is its phase shifted by q_y*4+q_x lanes with the
// lanes out of the map masked off the FMA. -DMODE=0: GCC's own vectorization of the plain loops.
// Build: gcc -O3 -march=native -fopenmp -DMODE=1 [-DC=120 -DK=7 -DD=1 -DP=3 -DNT=2]
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifndef C
#define C 120
#endif
#ifndef K
#define K 7
#endif
#ifndef D
#define D 1
#endif
#ifndef P
#define P 3
#endif
#ifndef NT
#define NT 2
#endif
#define H 7
#define W 7
#define OH ((H + 2 * P - D * (K - 1) - 1) / 2 + 1)
#define OW ((W + 2 * P - D * (K - 1) - 1) / 2 + 1)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static void ref(const float* in, const float* w, float* out) {
  for (int c = 0; c < C; c++)
    for (int y = 0; y < OH; y++)
      for (int x = 0; x < OW; x++) {
        float s = 0;
        for (int ky = 0; ky < K; ky++)
          for (int kx = 0; kx < K; kx++) {
            int iy = 2 * y + D * ky - P, ix = 2 * x + D * kx - P;
            if (iy >= 0 && iy < H && ix >= 0 && ix < W) s += in[c * 49 + iy * 7 + ix] * w[c * K * K + ky * K + kx];
          }
        out[c * OH * OW + y * OW + x] = s;
      }
}

static inline int fl2(int v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

static void kernel(const float* in, const float* w, float* out) {
#if MODE == 0
  ref(in, w, out);
#else
#pragma omp parallel for num_threads(NT)
  for (int c = 0; c < C; c++) {
    const float* s = in + c * 49;
    __m512 v0 = _mm512_loadu_ps(s), v1 = _mm512_loadu_ps(s + 16), v2 = _mm512_loadu_ps(s + 32);
    __m512 v3 = _mm512_maskz_loadu_ps(1, s + 48);
    __m512 ph[2][2];
#pragma GCC unroll 2
    for (int a = 0; a < 2; a++)
#pragma GCC unroll 2
      for (int b = 0; b < 2; b++) {
        int lo[16], hi[16];
        __mmask16 m = 0;
        for (int l = 0; l < 16; l++) {
          int off = 7 * (a + 2 * (l / 4)) + b + 2 * (l % 4);
          if (off > 48) off = 48;
          lo[l] = off < 32 ? off : 0;
          hi[l] = off >= 32 ? off - 32 : 0;
          if (off >= 32) m |= 1 << l;
        }
        __m512i il = _mm512_loadu_si512(lo), ih = _mm512_loadu_si512(hi);
        __m512 r = _mm512_permutex2var_ps(v0, il, v1);
        ph[a][b] = _mm512_mask_mov_ps(r, m, _mm512_permutex2var_ps(v2, ih, v3));
      }
    const float* wc = w + c * K * K;
    __m512 acc = _mm512_setzero_ps();
    const __m512i z = _mm512_setzero_si512();
#pragma GCC unroll 7
    for (int ky = 0; ky < K; ky++)
#pragma GCC unroll 7
      for (int kx = 0; kx < K; kx++) {
        int ty = D * ky - P, tx = D * kx - P;
        int a = ty & 1, b = tx & 1, qy = fl2(ty - a), qx = fl2(tx - b);
        int na = a ? 3 : 4, nb = b ? 3 : 4;
        __mmask16 m = 0;
        for (int l = 0; l < 16; l++) {
          int y = l / 4, x = l % 4;
          if (y < OH && x < OW && y + qy >= 0 && y + qy < na && x + qx >= 0 && x + qx < nb) m |= 1 << l;
        }
        if (!m) continue;
        int sh = qy * 4 + qx;
        __m512i v = _mm512_castps_si512(ph[a][b]);
        __m512 op;
        if (sh > 0) op = _mm512_castsi512_ps(_mm512_alignr_epi32(z, v, sh & 15));
        else if (sh < 0) op = _mm512_castsi512_ps(_mm512_alignr_epi32(v, z, (16 + sh) & 15));
        else op = ph[a][b];
        acc = _mm512_mask3_fmadd_ps(op, _mm512_set1_ps(wc[ky * K + kx]), acc, m);
      }
    // Output lanes y*4+x to rows of OW.
    for (int y = 0; y < OH; y++)
      _mm512_mask_storeu_ps(out + c * OH * OW + y * OW - 4 * y, (__mmask16)(((1u << OW) - 1) << (4 * y)), acc);
  }
#endif
}

int main(void) {
  float* in = aligned_alloc(64, sizeof(float) * C * 49 + 256);
  float* w = aligned_alloc(64, sizeof(float) * C * K * K + 64);
  float* o = aligned_alloc(64, sizeof(float) * C * 16 + 256);
  float* r = aligned_alloc(64, sizeof(float) * C * 16 + 256);
  for (int i = 0; i < C * 49; i++) in[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < C * K * K; i++) w[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
  ref(in, w, r);
  kernel(in, w, o);
  double err = 0;
  for (int i = 0; i < C * OH * OW; i++) { double e = o[i] - r[i]; if (e < 0) e = -e; if (e > err) err = e; }
  double best = 1e9;
  for (int k = 0; k < 7; k++) {
    int n = 2000; double t0 = now();
    for (int i = 0; i < n; i++) kernel(in, w, o);
    double t = (now() - t0) / n; if (t < best) best = t;
  }
  printf("poly mode %d C %d K %d D %d P %d out %dx%d NT %d maxerr %.2e best %.2f us\n", MODE, C, K, D, P, OH, OW, NT, err, best * 1e6);
}
