/* autoprof's example for trace-driven flame graphs (`flamegraph --trace`): a call tree with
 * known instruction counts, small enough to trace every instruction under QEMU.
 *
 *   calls [ROUNDS]     default 200 rounds
 *
 *   outer()  calls leaf() 3 times and inner() once per round
 *   inner()  calls leaf() once
 *   leaf()   a short loop (of step(), inlined: its own frame with --inline)
 *   once()   about 20 instructions, called once: a 99 Hz sampler would almost never see it
 *   fib()    recursion (returns unwind several frames of the same function)
 *
 * Built statically (-static -no-pie) so the whole program, C library included, is one ELF
 * whose addresses are known without the loader's mappings.
 */
#include <stdlib.h>

static volatile unsigned long sink;

static inline __attribute__((always_inline)) unsigned long step(unsigned long x, int i) {
    return x * 31 + i;
}

__attribute__((noinline)) unsigned long leaf(unsigned long x) {
    for (int i = 0; i < 8; i++) x = step(x, i);
    return x;
}

__attribute__((noinline)) unsigned long inner(unsigned long x) { return leaf(x) ^ (x >> 3); }

__attribute__((noinline)) unsigned long outer(unsigned long x) {
    for (int i = 0; i < 3; i++) x = leaf(x + i);
    return inner(x);
}

__attribute__((noinline)) unsigned long once(unsigned long x) {
    x ^= x >> 7;
    x *= 0x9E3779B97F4A7C15UL;
    x ^= x >> 11;
    x += 12345;
    x ^= x << 5;
    x *= 0xBF58476D1CE4E5B9UL;
    x ^= x >> 27;
    x -= 777;
    return x;
}

__attribute__((noinline)) unsigned long fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    unsigned long x = 1;
    for (int r = 0; r < rounds; r++) x = outer(x);
    x += once(x);
    x += fib(12);
    sink = x;
    return 0;
}
