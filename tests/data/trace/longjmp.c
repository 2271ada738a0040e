/* longjmp out of a recursion, 20 times (issue #31): the call tree must keep main at the top.
   j_deep recurses five deep and jumps back to main's setjmp; work() runs between the jumps. */
#include <setjmp.h>

jmp_buf env;
volatile int sink;

__attribute__((noinline)) void j_deep(int n)
{
    sink += n;
    if (n == 0)
        longjmp(env, 1);
    j_deep(n - 1);
    sink -= n; /* not reached: the recursion ends in the jump */
}

__attribute__((noinline)) void work(int n)
{
    for (int i = 0; i < n; i++)
        sink += i;
}

int main(void)
{
    for (int i = 0; i < 20; i++) {
        if (setjmp(env) == 0)
            j_deep(5);
        work(100);
    }
    return sink & 1;
}
