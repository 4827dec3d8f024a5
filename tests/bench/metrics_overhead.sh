#!/usr/bin/env bash
# What metrics cost (issue 10: at most 2% of throughput with latency markers every second): the
# dense keyed count of stateful.sh at parallelism 2 (--parallelism), with and without [metrics]
# latency_interval = "1s", alternating runs, printed as CPU seconds (user + sys of the whole
# job, workers included) and wall seconds. Heartbeat metrics are always on; to measure them,
# --baseline names a binary built without them (the column then compares the two binaries,
# markers off; any binary will do: the incremental-checkpoint marking of the window was measured
# against the commit before it). --parallelism 1 runs the window fused with its source, without
# the keyed exchange and its noise. A measuring tool, never a test.
#
#   tests/bench/metrics_overhead.sh [--records N] [--runs K] [--parallelism P] [--streamctl PATH]
#                                   [--baseline PATH]
set -euo pipefail

records=4000000
runs=3
parallelism=2
baseline=""
streamctl="${STREAMCTL:-$(dirname "$0")/../../build/cli/streamctl}"
while [[ $# -gt 0 ]]; do
  case $1 in
    --records) records=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --parallelism) parallelism=$2; shift 2 ;;
    --streamctl) streamctl=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STREAMCTL_STATE_DIR="$work/state"

job() { # LATENCY_TABLE
  cat <<TOML
name = "metrics-overhead"
parallelism = $parallelism
$1
[sources.clicks]
type = "generator"
profile = "clicks"
users = 100000
count = $records
seed = 1
event_time = "ts / 1000"
[operators.per_user]
type = "window"
inputs = ["clicks"]
key = ["user"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()" }
[sinks.out]
type = "file"
inputs = ["per_user"]
path = "$work/out"
TOML
}
job "" >"$work/off.toml"
job $'[metrics]\nlatency_interval = "1s"' >"$work/on.toml"

measure() { # FILE [BINARY] -> "cpu wall"
  rm -rf "$work/out"
  /usr/bin/time -f "%U %S %e" -o "$work/time" "${2:-$streamctl}" run "$1" 2>/dev/null
  awk '{ printf "%.2f %.2f\n", $1 + $2, $3 }' "$work/time"
}
if [[ -n $baseline ]]; then
  printf "%-6s %-28s %-28s\n" run "metrics: cpu s, wall s" "baseline: cpu s, wall s"
  for k in $(seq "$runs"); do
    printf "%-6s %-28s %-28s\n" "$k" "$(measure "$work/off.toml")" "$(measure "$work/off.toml" "$baseline")"
  done
  exit 0
fi
printf "%-6s %-28s %-28s\n" run "markers off: cpu s, wall s" "markers every 1 s: cpu s, wall s"
for k in $(seq "$runs"); do
  printf "%-6s %-28s %-28s\n" "$k" "$(measure "$work/off.toml")" "$(measure "$work/on.toml")"
done
