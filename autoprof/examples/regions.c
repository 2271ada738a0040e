/* autoprof's region example: one slot written a known number of times outside and inside
 * named regions, so hardware breakpoints (perf's mem:ADDR:w) count each region exactly.
 *
 *   regions --address                 print the slot's address and exit
 *   regions OUTSIDE HOT INNER TIMES   TIMES times: region "hot" writes the slot HOT times
 *                                     and, nested in it, region "inner" INNER more times;
 *                                     OUTSIDE writes before and after, outside any region
 *
 * So the whole program writes OUTSIDE + TIMES * (HOT + INNER), "hot" TIMES * (HOT + INNER),
 * "inner" TIMES * INNER. Built with -no-pie (a fixed address) and autoprof.h's folder on the
 * include path (`autoprof markers --cflags`).
 */
#include <autoprof.h>
#include <stdio.h>
#include <stdlib.h>

static volatile long slot[8] __attribute__((aligned(4096)));

static void writes(long n) {
    for (long i = 0; i < n; i++) slot[0] = i;
}

int main(int argc, char **argv) {
    if (argc == 2 && argv[1][0] == '-') {
        printf("%p\n", (void *)&slot[0]);
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: regions --address | regions OUTSIDE HOT INNER TIMES\n");
        return 2;
    }
    long outside = atol(argv[1]), hot = atol(argv[2]), inner = atol(argv[3]);
    long times = atol(argv[4]);
    writes(outside / 2);
    for (long t = 0; t < times; t++) {
        autoprof_begin("hot");
        writes(hot);
        autoprof_begin("inner");
        writes(inner);
        autoprof_end("inner");
        autoprof_end("hot");
    }
    writes(outside - outside / 2);
    return 0;
}
