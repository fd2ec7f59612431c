/* What one clock read costs on this machine: the preload reads CLOCK_MONOTONIC once per event (its time) and more
   on the events it clocks for the trailer's recorder_*_ns, each part of which holds one read. Prints the mean of a
   million back-to-back reads, three times, and the kernel's clock source (docs/performance.md gives the GPU
   machine's: 32-36 ns).
   Build and run: cc -O2 bench/clock_cost.c -o /tmp/clock_cost && /tmp/clock_cost */
#include <stdio.h>
#include <time.h>

int main(void) {
  struct timespec start, end, t;
  for (int round = 0; round < 3; ++round) {
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < 1000000; ++i) clock_gettime(CLOCK_MONOTONIC, &t);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
    printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns per read\n", ns / 1e6);
  }
  FILE* f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  char source[64] = "unknown";
  if (f != NULL) {
    if (fscanf(f, "%63s", source) != 1) source[0] = '\0';
    fclose(f);
  }
  printf("clock source: %s\n", source);
  return 0;
}
