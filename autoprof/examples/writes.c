/* autoprof's example workload: writes 12 known addresses a known number of times.
 *
 *   writes --addresses          print the 12 slot addresses (one per line) and exit
 *   writes --ticks HZ           run until killed: HZ times a second (on the clock, not after
 *                               the last tick) slot i is written i+1 times; a steady rate
 *                               for attached profiles (profile -p)
 *   writes N [STATE FAIL_RUN]   slot i (0-based) is written N*(i+1) times (slot 0: times
 *                               SLOT0_FACTOR); with STATE, the file counts invocations and
 *                               the FAIL_RUN-th one exits 1
 *
 * Built with -no-pie so the addresses are the same in every run: hardware breakpoints
 * (perf's mem:ADDR:w) then count the writes exactly. The slots sit in their own page, 64
 * bytes apart, away from anything the loader or libc touches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 12
#ifndef SLOT0_FACTOR /* a second "build" for compare: -DSLOT0_FACTOR=2 writes slot 0 twice as often */
#define SLOT0_FACTOR 1
#endif
static volatile long slots[SLOTS * 8] __attribute__((aligned(4096)));

static int bump_state(const char *path) {
    int count = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%d", &count) != 1) count = 0;
        fclose(f);
    }
    count++;
    f = fopen(path, "w");
    if (!f) return count;
    fprintf(f, "%d\n", count);
    fclose(f);
    return count;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--addresses") == 0) {
        for (int i = 0; i < SLOTS; i++) printf("%p\n", (void *)&slots[i * 8]);
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "--ticks") == 0) {
        long hz = atol(argv[2]);
        struct timespec next;
        clock_gettime(CLOCK_MONOTONIC, &next);
        for (;;) {
            for (int i = 0; i < SLOTS; i++)
                for (long k = 0; k <= i; k++) slots[i * 8] = k;
            next.tv_nsec += 1000000000L / hz;
            if (next.tv_nsec >= 1000000000L) {
                next.tv_sec++;
                next.tv_nsec -= 1000000000L;
            }
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        }
    }
    long n = argc > 1 ? atol(argv[1]) : 1000;
    if (argc > 3 && bump_state(argv[2]) == atoi(argv[3])) {
        fprintf(stderr, "writes: failing on purpose (invocation %s)\n", argv[3]);
        return 1;
    }
    for (int i = 0; i < SLOTS; i++) {
        long times = n * (i + 1) * (i == 0 ? SLOT0_FACTOR : 1);
        for (long k = 0; k < times; k++) slots[i * 8] = k;
    }
    printf("wrote %d slots, slot i %ld*(i+1) times\n", SLOTS, n);
    return 0;
}
