/* autoprof.h: named regions for `autoprof profile --region NAME` (header only, no library).
 *
 *   #include <autoprof.h>            // cc $(autoprof markers --cflags) ...
 *   autoprof_begin("solve");  ... the code to measure ...  autoprof_end("solve");
 *
 * Under autoprof, AUTOPROF_MARKERS names an inherited file descriptor (a Unix SOCK_SEQPACKET
 * socket). A marker writes one message (one record), "B <tid> <name>" or "E <tid> <name>"
 * (name: 1 to 64 bytes, no NUL), and blocks until autoprof answers one byte: autoprof reads every counter
 * while the calling thread waits, so what the region counts starts and stops at the call.
 * One thread of a process at a time passes a marker (a spin lock around the write and the
 * read). Not under autoprof (the variable absent or not a number), a marker is a load and a
 * branch: no system call. Names longer than 64 bytes are cut at 64. A thread's id is read at
 * its first marker and kept (thread-local): a child forked by a thread that passed a marker
 * sends its parent thread's id (its counts are right; only the nesting check mixes the two).
 *
 * The protocol is documented in autoprof's docs/REFERENCE.md (regions) for other languages.
 */
#ifndef AUTOPROF_H
#define AUTOPROF_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#define AUTOPROF_ENV "AUTOPROF_MARKERS"
#define AUTOPROF_NAME_MAX 64

/* Shared by every translation unit of a program (weak: one definition survives the link).
 * fd: -2 not looked up yet, -1 not under autoprof, else the channel. */
__attribute__((weak)) int autoprof_fd_ = -2;
__attribute__((weak)) int autoprof_lock_ = 0;

static __attribute__((noinline, cold, unused)) int autoprof_lookup_(void) {
    const char *text = getenv(AUTOPROF_ENV);
    int fd = -1;
    if (text && *text) {
        char *end;
        long n = strtol(text, &end, 10);
        if (*end == '\0' && n >= 0 && n < 1 << 20) fd = (int)n;
    }
    if (fd >= 0) { /* autoprof's channel, not a file the program opened at that number */
        int type = 0;
        socklen_t size = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) != 0 || type != SOCK_SEQPACKET)
            fd = -1;
    }
    __atomic_store_n(&autoprof_fd_, fd, __ATOMIC_RELAXED);
    return fd;
}

/* Per thread: its message's "X <tid> " prefix, made at its first marker (X: the op). */
static __thread char autoprof_msg_[2 + 12];
static __thread int autoprof_prefix_;

static __attribute__((noinline, cold, unused)) int autoprof_prefix_make_(void) {
    long tid = syscall(SYS_gettid);
    char digits[12];
    int n = 2, d = 0;
    autoprof_msg_[1] = ' ';
    do { digits[d++] = (char)('0' + tid % 10); tid /= 10; } while (tid > 0 && d < 12);
    while (d > 0) autoprof_msg_[n++] = digits[--d];
    autoprof_msg_[n++] = ' ';
    autoprof_prefix_ = n;
    return n;
}

/* Counted in a region: what runs after the answer to its begin and before the write of its
 * end; so the message goes out as two pieces of one record (writev): the thread's prefix, made
 * once, and the name as it is, its length found by the C library's strnlen. */
static __attribute__((noinline, unused)) void autoprof_mark_(int fd, char op, const char *name) {
    int n = autoprof_prefix_;
    if (__builtin_expect(n == 0, 0)) n = autoprof_prefix_make_();
    autoprof_msg_[0] = op;
    struct iovec parts[2] = {{autoprof_msg_, (size_t)n},
                             {(void *)name, strnlen(name, AUTOPROF_NAME_MAX)}};
    ssize_t size = (ssize_t)(parts[0].iov_len + parts[1].iov_len);
    while (__atomic_exchange_n(&autoprof_lock_, 1, __ATOMIC_ACQUIRE)) {
    }
    if (writev(fd, parts, 2) == size) {
        char ack;
        while (read(fd, &ack, 1) < 0 && errno == EINTR) {
        }
    }
    __atomic_store_n(&autoprof_lock_, 0, __ATOMIC_RELEASE);
}

/* Enter region `name` (nestable, repeatable; entries accumulate). */
static inline void autoprof_begin(const char *name) {
    int fd = __atomic_load_n(&autoprof_fd_, __ATOMIC_RELAXED);
    if (__builtin_expect(fd == -2, 0)) fd = autoprof_lookup_();
    if (__builtin_expect(fd >= 0, 0)) autoprof_mark_(fd, 'B', name);
}

/* Leave region `name`: the innermost region this thread entered. */
static inline void autoprof_end(const char *name) {
    int fd = __atomic_load_n(&autoprof_fd_, __ATOMIC_RELAXED);
    if (__builtin_expect(fd == -2, 0)) fd = autoprof_lookup_();
    if (__builtin_expect(fd >= 0, 0)) autoprof_mark_(fd, 'E', name);
}

#endif
