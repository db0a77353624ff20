// Random 16-byte reads over N bytes of anonymous memory (THP advised or
// not), in batches of 128 with prefetches first, as a uniform sample(128)
// gathers rows: the machine's cost per batch at each size, no replay code.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <xmmintrin.h>
static uint64_t s = 88172645463325252ull;
static inline uint64_t rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    size_t bytes = strtoull(argv[1], 0, 10);
    int huge = atoi(argv[2]);
    uint8_t *p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    if (huge) madvise(p, bytes, MADV_HUGEPAGE); else madvise(p, bytes, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < bytes; i += 4096) p[i] = (uint8_t)i;
    size_t rows = bytes / 16;
    uint64_t sum = 0; size_t idx[128];
    double best = 1e9;
    for (int run = 0; run < 5; run++) {
        int iters = 20000;
        double t0 = now();
        for (int it = 0; it < iters; it++) {
            for (int j = 0; j < 128; j++) { idx[j] = rnd() % rows; _mm_prefetch((const char *)(p + idx[j] * 16), _MM_HINT_T0); }
            for (int j = 0; j < 128; j++) { uint64_t v; memcpy(&v, p + idx[j] * 16, 8); sum += v; }
        }
        double us = (now() - t0) / iters * 1e6;
        if (us < best) best = us;
    }
    FILE *f = fopen("/proc/self/smaps_rollup", "r"); char line[256]; long ahp = 0;
    while (fgets(line, sizeof line, f)) if (!strncmp(line, "AnonHugePages:", 14)) ahp = atol(line + 14);
    printf("%zu bytes huge=%d: %.2f us per 128 random rows (AnonHugePages %ld MiB) [%llu]\n", bytes, huge, best, ahp / 1024, (unsigned long long)(sum & 1));
    return 0;
}
