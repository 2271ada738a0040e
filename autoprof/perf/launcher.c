/* The native launcher of autoprof/perf/launch.py: the workload's first instructions, before
 * its own program's.
 *
 *     launcher autoprof-launcher/1 CPUS PATH ARGV0 [ARG...]
 *
 * autoprof starts this program with vfork (Python's subprocess, no preexec_fn: a fork of a
 * 25 MB Python process costs ~2 ms of CPU and ~4 ms of wall time per run that vfork does not).
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
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <unistd.h>

#define PROTOCOL "autoprof-launcher/1"
#define EXIT_TRACEME 255
#define EXIT_CPUS 254
#define EXIT_USAGE 253

extern char **environ;

/* Bind this process to the CPUs in `list` ("0,2,5"); 0, or -1 when the list is malformed or
 * the kernel refuses it. */
static int bind_cpus(const char *list)
{
    long highest = -1;
    const char *at = list;
    while (*at) {
        char *end;
        long cpu = strtol(at, &end, 10);
        if (end == at || cpu < 0 || cpu > 1 << 20 || (*end && *end != ','))
            return -1;
        if (cpu > highest)
            highest = cpu;
        at = *end ? end + 1 : end;
    }
    if (highest < 0)
        return -1;
    cpu_set_t *set = CPU_ALLOC(highest + 1);
    if (set == NULL)
        return -1;
    size_t size = CPU_ALLOC_SIZE(highest + 1);
    CPU_ZERO_S(size, set);
    for (at = list; *at;) {
        char *end;
        CPU_SET_S(strtol(at, &end, 10), size, set);
        at = *end ? end + 1 : end;
    }
    int done = sched_setaffinity(0, size, set);
    CPU_FREE(set);
    return done;
}

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[1], PROTOCOL) != 0)
        return EXIT_USAGE;
    if (strcmp(argv[2], "-") != 0 && bind_cpus(argv[2]) != 0)
        return EXIT_CPUS;
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
        return EXIT_TRACEME;
    execve(argv[3], argv + 4, environ);
    return errno > 0 && errno < EXIT_USAGE ? errno : EXIT_USAGE;
}
