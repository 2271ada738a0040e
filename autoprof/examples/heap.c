/* autoprof's example for `memory`: known heap allocations from two sites.
 *
 *   heap            allocates 10 MiB (alloc_small), then 30 MiB (alloc_big), then frees
 *                   20 MiB of the 30: the heap peaks at 40 MiB, alloc_big's site on top
 *   heap crash      the same, then dies on a null pointer (SIGSEGV) while 20 MiB are live
 *
 * Blocks are 1 MiB each and every byte is written, so --pages-as-heap sees them too.
 */
#include <stdlib.h>
#include <string.h>

#define MIB (1024 * 1024)

static char *small[10], *big[30];

__attribute__((noinline)) void alloc_small(void) {
    for (int i = 0; i < 10; i++) {
        small[i] = malloc(MIB);
        memset(small[i], 1, MIB);
    }
}

__attribute__((noinline)) void alloc_big(void) {
    for (int i = 0; i < 30; i++) {
        big[i] = malloc(MIB);
        memset(big[i], 2, MIB);
    }
}

__attribute__((noinline)) void free_some(void) {
    for (int i = 0; i < 20; i++) free(big[i]);
}

int main(int argc, char **argv) {
    alloc_small();
    alloc_big();
    free_some();
    if (argc > 1 && strcmp(argv[1], "crash") == 0) {
        volatile char *nothing = NULL;
        *nothing = 1;
    }
    for (int i = 20; i < 30; i++) free(big[i]);
    for (int i = 0; i < 10; i++) free(small[i]);
    return 0;
}
