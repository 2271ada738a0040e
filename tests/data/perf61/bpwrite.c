#include <stdlib.h>
static volatile long a[512] __attribute__((aligned(4096)));
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < n; i++) { a[0] = i; if (i % 2 == 0) a[8] = i; if (i % 4 == 0) a[16] = i; }
    return 0;
}
