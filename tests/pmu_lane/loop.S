// loop N [fork]: 5 user-mode instructions per iteration, N from argv[1] in decimal, then
// exit(0). With a second argument it forks first: the child runs the loop, the parent waits
// for it (wait4) and runs the loop too. Static, no libc, no signal handler: every user-mode
// instruction it retires is below, so INST_RETIRED:u is exactly
//   15 + 5 digits(N) + 5 N                 (N >= 1)
//   36 + 5 digits(N) + 10 N                with fork (parent 29 + 5 digits + 5 N, child 7 + 5 N)
// e.g. 5,000,050 at N = 1,000,000 (7 digits), 10,000,050 at 2,000,000, 10,000,071 forked.
        .text
        .global _start
_start:
        ldr     x1, [sp, #16]           // argv[1]
        ldr     x9, [sp]                // argc
        mov     x0, #0                  // N
        mov     x3, #10
        cbz     x1, parsed              // no argument: N = 0
        ldrb    w2, [x1], #1
digit:  sub     w2, w2, #'0'
        madd    x0, x0, x3, x2          // N = 10 N + digit
        ldrb    w2, [x1], #1
        cmp     w2, #0
        b.ne    digit
parsed: mov     x19, x0                 // N, kept across system calls
        cmp     x9, #3
        b.lt    count
        mov     x8, #220                // clone(SIGCHLD, 0, 0, 0, 0): fork
        mov     x0, #17
        mov     x1, #0
        mov     x2, #0
        mov     x3, #0
        mov     x4, #0
        svc     #0
        cbz     x0, count               // the child counts
        mov     x0, #-1                 // wait4(-1, NULL, 0, NULL)
        mov     x1, #0
        mov     x2, #0
        mov     x3, #0
        mov     x8, #260
        svc     #0
count:  mov     x0, x19
        mov     x4, #0
        cbz     x0, exit
loop:   add     x4, x4, #1
        add     x5, x5, #2
        add     x6, x6, #3
        subs    x0, x0, #1
        b.ne    loop
exit:   mov     x0, #0
        mov     x8, #93                 // exit
        svc     #0
