// Times `hand_kernel` (depthwise_taps.py) against a direct reference: best of 7 x 2000 calls.
// -DC -DH -DW -DK set the shape (as the generator's --c --h --w --k), -DNT the threads.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include KERNEL_FILE
#ifndef C
#define C 240
#endif
#ifndef H
#define H 7
#endif
#ifndef W
#define W 7
#endif
#ifndef K
#define K 5
#endif
#define P ((K - 1) / 2)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static float ref[C * H * W];
int main(void) {
  // A margin each side: the hand kernels' masked loads read nothing outside the map, but
  // their addresses may lie before it.
  float* d = (float*)aligned_alloc(64, sizeof(float) * C * H * W + 256) + 16;
  float* k = aligned_alloc(64, sizeof(float) * C * K * K + 64);
  float* o = aligned_alloc(64, sizeof(float) * C * H * W + 64);
  for (int i = 0; i < C * H * W; i++) d[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < C * K * K; i++) k[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
  for (int c = 0; c < C; c++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) {
        float s = 0;
        for (int a = 0; a < K; a++)
          for (int b = 0; b < K; b++) {
            int yy = y + a - P, xx = x + b - P;
            if (yy >= 0 && yy < H && xx >= 0 && xx < W) s += d[c * H * W + yy * W + xx] * k[c * K * K + a * K + b];
          }
        ref[c * H * W + y * W + x] = s;
      }
  hand_kernel(d, k, o);
  double err = 0;
  for (int i = 0; i < C * H * W; i++) { double e = o[i] - ref[i]; if (e < 0) e = -e; if (e > err) err = e; }
  double best = 1e9;
  for (int r = 0; r < 7; r++) {
    int n = 2000;
    double t0 = now();
    for (int i = 0; i < n; i++) hand_kernel(d, k, o);
    double t = (now() - t0) / n;
    if (t < best) best = t;
  }
  printf("%-14s maxerr %.2e  best %.2f us\n", NAME, err, best * 1e6);
  return err > 1e-3;
}
