#!/usr/bin/env bash
# bench/vs-kueue.sh — jqctl simulate against Kueue v0.6.3's scheduler (the
# difftest oracle) on the same large scenarios, as `make bench-vs-kueue`.
#
# For each scenario (big-scenario.py, 20,000 workloads in 3 waves, seed 7;
# then the same with preemption) it runs the oracle and jqctl RUNS times,
# one right after the other (paired), checks that every output of jqctl is
# byte-identical to the oracle's, and prints the medians of their CPU time
# (user+sys: on a shared machine wall time measures the neighbours) and the
# ratio. jqctl's time is also split (--timing) into parsing the file and
# running it: the run is the decision core (with each submitted object's
# validation), so that progress on the core shows on its own; "run ratio"
# is Kueue's whole CPU time over jqctl's run.
#
# Usage: bench/vs-kueue.sh JQCTL ORACLE DIFFTEST_DIR [RUNS] [WORKLOADS]
# It prints figures; only a difference in output (or a failed run) fails.
set -euo pipefail
jqctl=${1:?usage: vs-kueue.sh JQCTL ORACLE DIFFTEST_DIR [RUNS] [WORKLOADS]}
oracle=${2:?oracle binary}
difftest=${3:?difftest folder (../shared/difftest)}
runs=${4:-5}
workloads=${5:-20000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# cpu CMD... runs CMD with stdout to $work/out and stderr to $work/err, and
# prints its CPU time (user+sys) in seconds.
cpu() {
  local TIMEFORMAT='%U %S' t
  t=$( { time "$@" >"$work/out" 2>"$work/err"; } 2>&1 ) || { echo "failed: $*" >&2; cat "$work/err" >&2; exit 1; }
  awk -v t="$t" 'BEGIN { split(t, a, " "); printf "%.3f\n", a[1] + a[2] }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# A jqctl without --timing (older than this script) is timed as a whole.
# (The help is read whole first: grep -q stopping early would kill jqctl
# with SIGPIPE, and under pipefail that reads as "no --timing".)
timing=(--timing)
help=$("$jqctl" simulate --help 2>/dev/null || true)
grep -q -- --timing <<<"$help" || timing=()

printf '%-24s %5s %11s %11s %8s %11s %11s %10s %7s\n' scenario runs kueue_cpu jqctl_cpu ratio jqctl_parse jqctl_run run_ratio target
for variant in plain preemption; do
  flags=(--workloads "$workloads" --waves 3 --seed 7)
  target=20
  if [ "$variant" = preemption ]; then flags+=(--preemption); target=10; fi
  scen="$work/$variant.yaml"
  python3 "$difftest/big-scenario.py" "${flags[@]}" >"$scen"
  : >"$work/k" ; : >"$work/j" ; : >"$work/p" ; : >"$work/r"
  for i in $(seq "$runs"); do
    cpu "$oracle" "$scen" >>"$work/k"
    mv "$work/out" "$work/oracle.out"
    cpu "$jqctl" simulate "${timing[@]}" "$scen" >>"$work/j"
    if ! cmp -s "$work/oracle.out" "$work/out"; then
      echo "$variant: jqctl's output differs from the oracle's (run $i)" >&2
      diff <(tr ',' '\n' <"$work/oracle.out") <(tr ',' '\n' <"$work/out") | head -20 >&2
      exit 1
    fi
    sed -n 's/.*timing: parse \([0-9.]*\)s run \([0-9.]*\)s.*/\1 \2/p' "$work/err" >"$work/t"
    [ -s "$work/t" ] || echo "0 0" >"$work/t"
    awk '{ print $1 }' "$work/t" >>"$work/p"
    awk '{ print $2 }' "$work/t" >>"$work/r"
  done
  k=$(median <"$work/k"); j=$(median <"$work/j"); p=$(median <"$work/p"); r=$(median <"$work/r")
  awk -v name="${workloads}x3 $variant" -v n="$runs" -v k="$k" -v j="$j" -v p="$p" -v r="$r" -v t="$target" 'BEGIN {
    printf "%-24s %5d %10.2fs %10.2fs %7.1fx", name, n, k, j, k / j
    if (r + 0 > 0) printf " %10.2fs %10.2fs %9.1fx", p, r, k / r; else printf " %11s %11s %10s", "-", "-", "-"
    printf " %6dx\n", t }'
done
echo "outputs identical to the oracle's in every run; CPU = user+sys, medians of paired runs"
