/* The native launcher of autoprof/perf/launch.py: the workload's first instructions, before
 * its own program's.
 *
 *     launcher autoprof-launcher/1 CPUS PATH ARGV0 [ARG...]
 *
 * autoprof starts this program with vfork (posix_spawn: no code of autoprof's in the child; a
 * fork of a 25 MB Python process costs ~2 ms of CPU and ~4 ms of wall time per run that vfork
 * does not).
 * It binds itself to CPUS ("-": leaves its affinity alone; else CPU numbers, comma separated:
 * `--pin`, inherited by all the workload starts), asks to be traced by its parent
 * (PTRACE_TRACEME: the parent's spawning thread becomes the tracer), then execs PATH with
 * ARGV0 ARG... and its own environment, unchanged. The kernel stops the workload with SIGTRAP
 * once that exec has completed, before its first user-mode instruction: the process is then
 * the workload, autoprof's direct child and tracee, exactly as when Python forks and execs it
 * (argv, environment, stack and descriptors the same; the descriptors autoprof keeps, such as
 * the region marker channel, stay open through both execs).
 *
 * Nothing of this program is counted: perf attaches after the workload's exec. When it fails
 * before that exec it exits with a status that says why (launch.py reads it), never writing to
 * the workload's stdout or stderr: 255 PTRACE_TRACEME refused, 254 the CPUs refused, 253 a
 * call that does not match this protocol (a launcher older or newer than launch.py), and the
 * exec's errno (1..133) when PATH cannot be run.
 *
 * Built with -DAUTOPROF_NOLIBC (x86_64, aarch64: `make install` tries it first) it makes its
 * four system calls itself and has no C library to start: 0.03 ms of CPU and 2 page faults a
 * run instead of 0.28 ms and 26 for static glibc's start-up. Elsewhere it uses the C library.
 */

#define PROTOCOL "autoprof-launcher/1"
#define EXIT_TRACEME 255
#define EXIT_CPUS 254
#define EXIT_USAGE 253
#define MAX_CPUS 8192 /* --pin CPUs up to 8191 */

#ifdef AUTOPROF_NOLIBC
#include <asm/unistd.h>
#include <linux/ptrace.h>

/* A system call: its result, or -errno. */
static long syscall4(long number, long a, long b, long c, long d)
{
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d;
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return result;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = number;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
#else
#error "AUTOPROF_NOLIBC: x86_64 and aarch64 only (build without it elsewhere)"
#endif
}

static long set_affinity(unsigned long size, const unsigned long *mask)
{
    return syscall4(__NR_sched_setaffinity, 0, (long)size, (long)mask, 0);
}

static long trace_me(void)
{
    return syscall4(__NR_ptrace, PTRACE_TRACEME, 0, 0, 0);
}

/* exec's errno (it returns only when it failed) */
static int exec(const char *path, char *const argv[], char *const envp[])
{
    return (int)-syscall4(__NR_execve, (long)path, (long)argv, (long)envp, 0);
}

static int launch(int argc, char **argv, char **envp);

/* The process's start: argc, argv and the environment on the stack the kernel built. */
void autoprof_start(long *stack);

__attribute__((used, noreturn)) void autoprof_start(long *stack)
{
    int argc = (int)stack[0];
    char **argv = (char **)(stack + 1);
    syscall4(__NR_exit_group, launch(argc, argv, argv + argc + 1), 0, 0, 0);
    for (;;) {
    }
}

#if defined(__x86_64__)
__asm__(".text\n.global _start\n_start:\n"
        "  xor %rbp, %rbp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call autoprof_start\n  hlt\n");
#elif defined(__aarch64__)
__asm__(".text\n.global _start\n_start:\n"
        "  mov x29, #0\n  mov x30, #0\n  mov x0, sp\n  bl autoprof_start\n  brk #0\n");
#endif

#else /* the C library's calls */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <unistd.h>

static long set_affinity(unsigned long size, const unsigned long *mask)
{
    return sched_setaffinity(0, size, (const cpu_set_t *)mask);
}

static long trace_me(void)
{
    return ptrace(PTRACE_TRACEME, 0, NULL, NULL);
}

static int exec(const char *path, char *const argv[], char *const envp[])
{
    execve(path, argv, envp);
    return errno;
}

static int launch(int argc, char **argv, char **envp);

extern char **environ;

int main(int argc, char **argv)
{
    return launch(argc, argv, environ);
}
#endif

#define WORD_BITS (8 * sizeof(unsigned long))

static unsigned long cpu_mask[MAX_CPUS / WORD_BITS];

static int same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* Bind this process to the CPUs in `list` ("0,2,5"); 0, or -1 when the list is malformed or
 * the kernel refuses it. */
static int bind_cpus(const char *list)
{
    unsigned long highest = 0, cpu = 0;
    int digits = 0;
    for (const char *at = list;; at++) {
        if (*at >= '0' && *at <= '9') {
            cpu = cpu * 10 + (unsigned long)(*at - '0');
            if (cpu >= MAX_CPUS)
                return -1;
            digits++;
        } else if ((*at == ',' || *at == '\0') && digits) {
            cpu_mask[cpu / WORD_BITS] |= 1UL << (cpu % WORD_BITS);
            highest = cpu > highest ? cpu : highest;
            cpu = 0, digits = 0;
            if (*at == '\0')
                break;
        } else {
            return -1;
        }
    }
    unsigned long words = highest / WORD_BITS + 1;
    return set_affinity(words * sizeof(unsigned long), cpu_mask) == 0 ? 0 : -1;
}

static int launch(int argc, char **argv, char **envp)
{
    if (argc < 5 || !same(argv[1], PROTOCOL))
        return EXIT_USAGE;
    if (!same(argv[2], "-") && bind_cpus(argv[2]) != 0)
        return EXIT_CPUS;
    if (trace_me() != 0)
        return EXIT_TRACEME;
    int error = exec(argv[3], argv + 4, envp);
    return error > 0 && error < EXIT_USAGE ? error : EXIT_USAGE;
}
