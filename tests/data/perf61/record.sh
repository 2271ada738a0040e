#!/bin/sh
# Re-records the perf stat fixtures of this folder (see README.md). Run as root on the target
# machine from tests/data/perf61; needs perf, cc and (for the de_DE files) localedef.
set -eu
cc -O1 -no-pie -o /tmp/bpwrite bpwrite.c
A=$(nm /tmp/bpwrite | awk '$3 == "a" {print $1}' | sed 's/^0*/0x/')   # the page-aligned array
W=/tmp/bpwrite
export LC_ALL=C
perf stat -x, -o totals.csv -e mem:$A:w -e mem:$(printf 0x%x $((A + 64))):w \
  -e mem:$(printf 0x%x $((A + 128))):w -e task-clock -e page-faults -e instructions \
  -e msr/tsc/ -e sched:sched_switch $W 1000
perf stat -x, -I 100 -o interval_idle.csv -e mem:$A:w -e task-clock -e instructions -e msr/tsc/ \
  -- sh -c "$W 100; sleep 0.35; $W 200"
perf stat -x, -I 100 -a -A -o interval_percpu.csv -e task-clock -e context-switches \
  -e sched:sched_switch -e msr/tsc/ -e instructions -- sleep 0.25
perf stat -x, -I 100 -a --per-core -o interval_per_core.csv -e task-clock -e msr/tsc/ \
  -e instructions -- sleep 0.15
for m in socket die node; do
  perf stat -x, -a --per-$m -o per_$m.csv -e task-clock -e msr/tsc/ -e instructions -- sleep 0.1
done
perf stat -x, -r 3 -o repeat_noise.csv -e task-clock -e mem:$A:w -e instructions $W 1000
perf stat -x, -I 100 -o comma_in_event.csv -e 'software/config=2,config1=0/' \
  -e 'msr/tsc,name=TSC.NAMED/' -e 'sched:sched_switch' -- sh -c "$W 10; sleep 0.15"
# five breakpoints: perf fails with ENOSPC and leaves only its header
perf stat -x, -o enospc.csv -e mem:$A:w -e mem:$((A + 8)):w -e mem:$((A + 16)):w \
  -e mem:$((A + 24)):w -e mem:$((A + 32)):w $W 10 2> enospc.stderr.txt || true
# SIGINT after ~0.55 s: perf prints a last, short interval and exits
perf stat -x, -I 100 -o sigint.csv -e task-clock -e mem:$A:w -- $W 300000000 &
sleep 0.55; kill -INT $!; wait $! || true
# cut mid-line, as a full disk or a crash would leave it (perf itself flushes whole lines)
perf stat -x, -I 10 -o /tmp/full.csv -e task-clock -e page-faults -e mem:$A:w -- $W 2000000
head -c 1000 /tmp/full.csv > truncated.csv
# a foreign locale: decimal commas, separators ';' and ' ;'
mkdir -p /tmp/loc && localedef -i de_DE -f UTF-8 /tmp/loc/de_DE.UTF-8 2>/dev/null || true
LOCPATH=/tmp/loc LC_ALL=de_DE.UTF-8 perf stat -x ';' -I 100 -o de_semicolon_interval.csv \
  -e task-clock -e mem:$A:w -e instructions -- $W 3000
LOCPATH=/tmp/loc LC_ALL=de_DE.UTF-8 perf stat -x ' ;' -a -A -o de_space_semicolon_percpu.csv \
  -e task-clock -e msr/tsc/ -- sleep 0.05
LOCPATH=/tmp/loc LC_ALL=de_DE.UTF-8 perf stat -x , -o de_comma.csv -e task-clock -e page-faults $W 10
# a rootless container (user namespace): perf falls back to user-space counting and prints the
# modifier it added: task-clock:u, syscalls:sys_enter_writeu (no colon), msr/tsc/u, TSC.NAMED:u
unshare -r perf stat -x, -I 100 -o rootless_interval.csv -e task-clock \
  -e syscalls:sys_enter_write -e page-faults -e msr/tsc/ -- sh -c 'echo hi; sleep 0.15'
unshare -r perf stat -x, -o rootless_totals.csv -e task-clock -e syscalls:sys_enter_write \
  -e 'software/config=2,config1=0/' -e 'msr/tsc,name=TSC.NAMED/' -- echo hi
# perf 6.1 loses a workload that ends before perf waits for it (skip_signal forgets the pid on
# SIGCHLD): exit 0 whatever the workload's status, a few microseconds of wall time, no rusage.
# A rare race (2 in 200 here, pinned to one CPU): repeat until perf exits 0
until taskset -c 0 perf stat -x, -o lost_wait.csv -e duration_time -e user_time -e system_time \
  -e task-clock -e page-faults -- sh -c 'exit 3'; do :; done
# --per-thread (profile --per-thread runs one perf per thread, -t TID): threads.c's two threads,
# attached while both run; the AGGR field is comm-tid (the comm perf read when it started)
cc -O1 -no-pie -pthread -o /tmp/threads ../../../autoprof/examples/threads.c
/tmp/threads 3000000000 & sleep 0.3
perf stat -x, -I 100 --interval-count 2 --per-thread -p $! -o per_thread_interval.csv \
  -e task-clock -e page-faults -e context-switches
W=$(ls /proc/$!/task | sort -n | tail -1)
perf stat -x, --no-inherit --per-thread -t $W -o per_thread_totals.csv -e task-clock \
  -e page-faults -- sleep 0.1
kill $!
