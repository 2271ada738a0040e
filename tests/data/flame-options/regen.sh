#!/bin/sh
# Re-makes the expected outputs of this folder with FlameGraph's stackcollapse-perf.pl, the
# reference (never copied here): FLAMEGRAPH_DIR=/path/to/FlameGraph sh regen.sh
# The scripts are `perf script -F +pid` (perf 6.1) of autoprof/examples/hotspots.c built with
# -O2 -g -fno-omit-frame-pointer:
#   fp:       perf record -g -F 499 -e cpu-clock -e page-faults ./hotspots 8
#   dwarf:    perf record --call-graph dwarf,16384 -F 299 -e cpu-clock ./hotspots 4
#   srcline:  the fp recording printed with -F +pid,+srcline
#   switches: perf record --switch-events -g -F 499 -e cpu-clock -e page-faults ./hotspots 4,
#             printed with --show-switch-events
set -eu
cd "$(dirname "$0")"
P="perl ${FLAMEGRAPH_DIR:?}/stackcollapse-perf.pl"
while read -r name script opts; do
  # shellcheck disable=SC2086
  $P $opts "$script" > "expected/$name.folded" 2>/dev/null
done < cases.txt
