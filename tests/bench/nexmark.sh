#!/usr/bin/env bash
# Nexmark benchmark: each example query (examples/nexmark_q*.toml) over the generator, at
# parallelism 1 and 2, output to a file sink in a scratch directory. A measuring tool, not a
# test: it never fails on speed, only when a query fails to run.
#
#   tests/bench/nexmark.sh [--events N] [--queries q0,q7,...] [--parallelism 1,2] [--streamctl PATH]
#
# --events is the generator's count per run (default 1,000,000: about a minute for all the
# queries at both parallelisms on a 2-core machine; 59 s measured under load). Per query and
# parallelism it prints the events, the wall seconds, events per wall second, and events per
# CPU second: user + system time of streamctl and every worker it started (the whole process
# tree, as GNU time counts reaped children), a figure a busy machine disturbs less than wall time.
set -euo pipefail

events=1000000
queries=""
parallelisms=1,2
streamctl="${STREAMCTL:-$(dirname "$0")/../../build/cli/streamctl}"
examples="$(dirname "$0")/../../examples"
while [[ $# -gt 0 ]]; do
  case $1 in
    --events) events=$2; shift 2 ;;
    --queries) queries=$2; shift 2 ;;
    --parallelism) parallelisms=$2; shift 2 ;;
    --streamctl) streamctl=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
streamctl=$(realpath "$streamctl")
examples=$(realpath "$examples")
for tool in python3 /usr/bin/time; do
  command -v $tool >/dev/null || { echo "bench needs $tool" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/streamctl-nexmark.XXXXXX")
trap 'rm -rf "$work"' EXIT
export STREAMCTL_STATE_DIR="$work/state"

if [[ -z $queries ]]; then
  # q0, q1, ..., q22 in numeric order.
  queries=$(ls "$examples"/nexmark_q*.toml | sed 's/.*nexmark_\(q[0-9]*\)\.toml/\1/' |
    sort -k1.2n | paste -sd,)
fi
IFS=, read -ra query_list <<<"$queries"
IFS=, read -ra p_list <<<"$parallelisms"

now() { date +%s.%N; }
echo "Nexmark over the generator, $events events per run (figures depend on the machine's load)"
printf '%-5s %3s %10s %9s %14s %16s %10s\n' query p events wall_s events/s events/cpu_s rows_out
for q in "${query_list[@]}"; do
  file="$examples/nexmark_$q.toml"
  [[ -f $file ]] || { echo "no example $file" >&2; exit 2; }
  for p in "${p_list[@]}"; do
    rm -rf "$work/out"
    start=$(now)
    /usr/bin/time -o "$work/cpu" -f "%U %S" "$streamctl" run "$file" -p "$p" \
      --set "sources.events.count=$events" --set "sinks.out.type=file" \
      --set "sinks.out.path=$work/out" >/dev/null 2>"$work/log" ||
      { echo "$q at parallelism $p failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
    end=$(now)
    rows=$(cat "$work/out"/part-* 2>/dev/null | wc -l)
    cpu=$(awk '{print $1 + $2}' "$work/cpu")
    python3 - "$q" "$p" "$events" "$start" "$end" "$cpu" "$rows" <<'PY'
import sys
q, p, n, start, end, cpu, rows = sys.argv[1:]
n, wall, cpu = int(n), float(end) - float(start), float(cpu)
print(f"{q:<5} {p:>3} {n:>10,} {wall:>9.2f} {n / wall:>14,.0f} {n / cpu:>16,.0f} {int(rows):>10,}")
PY
  done
done
