/* autoprof's example for `record` / `report` / `callgraph` / flame graphs: three functions of
 * known relative cost, called from main in rounds.
 *
 *   hotspots [ROUNDS]     default 40 rounds (about a second on a 2-core VM)
 *
 *   heavy()   3 units of arithmetic   (an inlined helper, mix(), does the work)
 *   medium()  2 units of arithmetic
 *   touch()   1 unit of arithmetic, plus fresh pages: maps new memory, writes one byte per
 *             page, unmaps it, so nearly all of the program's page faults happen here (their
 *             time goes to the kernel, under touch)
 *
 * Each round also writes to /dev/null, for kernel frames under a system call. Build with
 * frame pointers (-fno-omit-frame-pointer) so `perf record -g` sees whole stacks.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define UNIT 4000000L
#define PAGES 2048 /* 8 MiB of fresh pages per round */

static volatile unsigned long sink;

static inline __attribute__((always_inline)) unsigned long mix(unsigned long x) {
    return x * 6364136223846793005UL + 1442695040888963407UL;
}

__attribute__((noinline)) void heavy(void) {
    unsigned long x = sink;
    for (long i = 0; i < 3 * UNIT; i++) x = mix(x);
    sink = x;
}

__attribute__((noinline)) void medium(void) {
    unsigned long x = sink;
    for (long i = 0; i < 2 * UNIT; i++) x = mix(x);
    sink = x;
}

__attribute__((noinline)) void touch(void) {
    long page = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(1);
    for (long i = 0; i < PAGES; i++) p[i * page] = (char)i;
    unsigned long x = sink + (unsigned char)p[page];
    for (long i = 0; i < UNIT; i++) x = mix(x);
    sink = x;
    munmap(p, PAGES * page);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 40;
    int null = open("/dev/null", O_WRONLY);
    char buf[4096] = {0};
    for (int r = 0; r < rounds; r++) {
        heavy();
        medium();
        touch();
        if (null >= 0 && write(null, buf, sizeof buf) < 0) return 1;
    }
    return 0;
}
