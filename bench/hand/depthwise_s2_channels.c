// Hand kernels (issue 61): depthwise 3x3, stride 2, dilation 2, pad 2 on C x 7 x 7 (out 4 x 4),
// NCHW, weights packed per 16 channels. Each checked against the plain loops, best of 7 x 2000.
// -DMODE=1: 16 channels per vector, the used input pixels gathered and the outputs scattered
// -DMODE=2: 16 channels per vector, each channel's used pixels compacted, 16x16 transposes in and out
// -DMODE=3: per channel, the used 4x4 pixels compacted into one vector and each tap a shift of it
// -DMODE=0: the plain loops (GCC's own vectorization). Build: gcc -O3 -march=native -fopenmp
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifndef C
#define C 1000
#endif
#ifndef NT
#define NT 2
#endif
#define H 7
#define W 7
#define OH 4
#define OW 4
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

// The plain loops over channels [c0, c1): the reference, and the kernels' tail.
static void plain(const float* in, const float* w, float* out, int c0, int c1) {
  for (int c = c0; c < c1; c++)
    for (int y = 0; y < OH; y++)
      for (int x = 0; x < OW; x++) {
        float s = 0;
        for (int ky = 0; ky < 3; ky++)
          for (int kx = 0; kx < 3; kx++) {
            int iy = 2 * y + 2 * ky - 2, ix = 2 * x + 2 * kx - 2;
            if (iy >= 0 && iy < H && ix >= 0 && ix < W) s += in[c * 49 + iy * 7 + ix] * w[c * 9 + ky * 3 + kx];
          }
        out[c * 16 + y * 4 + x] = s;
      }
}

static void ref(const float* in, const float* w, float* out) { plain(in, w, out, 0, C); }

// Weights packed [C/16][9][16] (layout-free), tail block zero-padded.
static float wt[(C + 15) / 16 * 16 * 9];
static void pack(const float* w) {
  memset(wt, 0, sizeof wt);
  for (int c = 0; c < C; c++)
    for (int t = 0; t < 9; t++) wt[(c / 16) * 144 + t * 16 + c % 16] = w[c * 9 + t];
}


// The used input pixels of one channel (rows 0,2,4,6 x cols 0,2,4,6: offsets 14*py + 2*px)
// compacted into one vector, lane py*4+px.
static inline __m512 compact(const float* s) {
  const __m512i i1 = _mm512_setr_epi32(0, 2, 4, 6, 14, 16, 18, 20, 28, 30, 0, 0, 0, 0, 0, 0);
  const __m512i i2 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 10, 12, 14, 0);
  __m512 a = _mm512_loadu_ps(s), b = _mm512_loadu_ps(s + 16), c = _mm512_loadu_ps(s + 32);
  __m512 v = _mm512_permutex2var_ps(a, i1, b);
  v = _mm512_mask_permutexvar_ps(v, 0x7c00, i2, c);
  return _mm512_mask_broadcastss_ps(v, 0x8000, _mm_load_ss(s + 48));
}

#if MODE == 1 || MODE == 2
static inline void transpose16(__m512* r) {
  // 16x16 transpose of floats in 16 registers (4 stages).
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
  const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int i = 0; i < 4; i++) {
    t[i] = _mm512_permutex2var_ps(r[i], lo, r[i + 4]);
    t[i + 4] = _mm512_permutex2var_ps(r[i], hi, r[i + 4]);
    t[i + 8] = _mm512_permutex2var_ps(r[i + 8], lo, r[i + 12]);
    t[i + 12] = _mm512_permutex2var_ps(r[i + 8], hi, r[i + 12]);
  }
  const __m512i lo2 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const __m512i hi2 = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  for (int i = 0; i < 8; i++) {
    r[i] = _mm512_permutex2var_ps(t[i], lo2, t[i + 8]);
    r[i + 8] = _mm512_permutex2var_ps(t[i], hi2, t[i + 8]);
  }
}
#endif

static void kernel(const float* in, const float* w, float* out) {
  (void)w;
#if MODE == 0
  ref(in, w, out);
#elif MODE == 1 || MODE == 2
  const int blocks = C / 16;
#pragma omp parallel for num_threads(NT)
  for (int b = 0; b < blocks; b++) {
    const float* src = in + b * 16 * 49;
    __m512 T[16];  // the used pixels (rows 0,2,4,6 x cols 0,2,4,6), 16 channels each
#if MODE == 1
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(49));
    for (int p = 0; p < 16; p++) T[p] = _mm512_i32gather_ps(idx, src + (p / 4) * 14 + (p % 4) * 2, 4);
#else
    for (int c = 0; c < 16; c++) T[c] = compact(src + c * 49);
    transpose16(T);
#endif
    const float* wb = wt + b * 144;
    __m512 acc[16];
    for (int o = 0; o < 16; o++) acc[o] = _mm512_setzero_ps();
    for (int ky = 0; ky < 3; ky++)
      for (int kx = 0; kx < 3; kx++) {
        __m512 wv = _mm512_load_ps(wb + (ky * 3 + kx) * 16);
        for (int y = 0; y < 4; y++)
          for (int x = 0; x < 4; x++) {
            int py = y + ky - 1, px = x + kx - 1;  // in the used-pixel grid
            if (py >= 0 && py < 4 && px >= 0 && px < 4) acc[y * 4 + x] = _mm512_fmadd_ps(T[py * 4 + px], wv, acc[y * 4 + x]);
          }
      }
#if MODE == 1
    const __m512i oidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(16));
    for (int o = 0; o < 16; o++) _mm512_i32scatter_ps(out + b * 256 + o, oidx, acc[o], 4);
#else
    transpose16(acc);
    for (int c = 0; c < 16; c++) _mm512_storeu_ps(out + b * 256 + c * 16, acc[c]);
#endif
  }
  plain(in, w, out, blocks * 16, C);  // the tail channels
#elif MODE == 3
  // Per channel: the used pixels compacted into one vector V (lane = py*4+px), each tap a
  // shift of V by (ky-1)*4+(kx-1) lanes with the padding's lanes masked off the FMA.
#pragma omp parallel for num_threads(NT)
  for (int c = 0; c < C; c++) {
    const float* s = in + c * 49;
    __m512 v = compact(s);
    const float* wc = w + c * 9;
    __m512 acc = _mm512_setzero_ps();
    const __m512 z = _mm512_setzero_ps();
    for (int ky = 0; ky < 3; ky++)
      for (int kx = 0; kx < 3; kx++) {
        int sh = (ky - 1) * 4 + (kx - 1);
        __mmask16 m = 0;
        for (int l = 0; l < 16; l++) {
          int py = l / 4 + ky - 1, px = l % 4 + kx - 1;
          if (py >= 0 && py < 4 && px >= 0 && px < 4) m |= 1 << l;
        }
        __m512 op;
        if (sh > 0) op = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(z), _mm512_castps_si512(v), sh));
        else if (sh < 0) op = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(v), _mm512_castps_si512(z), 16 + sh));
        else op = v;
        acc = _mm512_mask3_fmadd_ps(op, _mm512_set1_ps(wc[ky * 3 + kx]), acc, m);
      }
    _mm512_storeu_ps(out + c * 16, acc);
  }
#endif
}

int main(void) {
  float* in = aligned_alloc(64, sizeof(float) * C * 49 + 256);
  float* w = aligned_alloc(64, sizeof(float) * C * 9 + 64);
  float* o = aligned_alloc(64, sizeof(float) * C * 16 + 64);
  float* r = aligned_alloc(64, sizeof(float) * C * 16 + 64);
  for (int i = 0; i < C * 49; i++) in[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < C * 9; i++) w[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
  pack(w);
  ref(in, w, r);
  kernel(in, w, o);
  double err = 0;
  for (int i = 0; i < C * 16; i++) { double e = o[i] - r[i]; if (e < 0) e = -e; if (e > err) err = e; }
  double best = 1e9;
  for (int k = 0; k < 7; k++) {
    int n = 2000; double t0 = now();
    for (int i = 0; i < n; i++) kernel(in, w, o);
    double t = (now() - t0) / n; if (t < best) best = t;
  }
  printf("mode %d NT %d maxerr %.2e best %.2f us\n", MODE, NT, err, best * 1e6);
}
