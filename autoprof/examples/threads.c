/* autoprof's two-thread example: each thread writes a slot of its own a known number of times.
 *
 *   threads --addresses    print the 2 slot addresses (one per line) and exit
 *   threads N              the main thread writes slot 0 N times; a thread it starts, named
 *                          "worker", writes slot 1 2*N times; main waits for it
 *
 * Built with -no-pie so the addresses are the same in every run: hardware breakpoints
 * (perf's mem:ADDR:w) then count each thread's writes exactly (profile --per-thread).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile long slots[2 * 8] __attribute__((aligned(4096)));
static long n;

static void *worker(void *arg) {
    pthread_setname_np(pthread_self(), "worker");
    for (long k = 0; k < 2 * n; k++) slots[8] = k;
    return arg;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--addresses") == 0) {
        printf("%p\n%p\n", (void *)&slots[0], (void *)&slots[8]);
        return 0;
    }
    n = argc > 1 ? atol(argv[1]) : 1000;
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, NULL) != 0) return 2;
    for (long k = 0; k < n; k++) slots[0] = k;
    pthread_join(thread, NULL);
    return 0;
}
