/* is_even and is_odd call each other (issue #31). At -O0 the n == 0 path of each ends in a
   jmp to its shared epilogue, which is the instruction after its own recursive call: a jump to
   a pending return address that is no return. */
__attribute__((noinline)) int is_odd(int n);

__attribute__((noinline)) int is_even(int n)
{
    if (n == 0)
        return 1;
    return is_odd(n - 1);
}

__attribute__((noinline)) int is_odd(int n)
{
    if (n == 0)
        return 0;
    return is_even(n - 1);
}

int main(void)
{
    volatile int r = 0;
    for (int i = 0; i < 40; i++)
        r += is_even(i % 9);
    return r & 1;
}
