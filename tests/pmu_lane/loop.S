// loop N: 5 user-mode instructions per iteration, N from argv[1] in decimal, then exit(0).
// Static, no libc: every user-mode instruction it retires is below, so INST_RETIRED:u is
//   5 (parse setup) + 5 per digit + 2 (loop setup) + 5 N + 3 (exit)   for N >= 1
// e.g. 5,000,045 at N = 1,000,000 (7 digits) and 10,000,045 at N = 2,000,000.
        .text
        .global _start
_start:
        ldr     x1, [sp, #16]           // argv[1]
        mov     x0, #0                  // N
        mov     x3, #10
        cbz     x1, done_parse          // no argument: N = 0
        ldrb    w2, [x1], #1
digit:  sub     w2, w2, #'0'
        madd    x0, x0, x3, x2          // N = 10 N + digit
        ldrb    w2, [x1], #1
        cmp     w2, #0
        b.ne    digit
done_parse:
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
