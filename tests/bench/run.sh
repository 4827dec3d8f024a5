#!/usr/bin/env bash
# The benchmark harness: times streamctl against jq and gawk on the same JSON lines, checks
# that their outputs agree, and prints records/s and ratios. A measuring tool, not a test: it
# never fails on speed, only when outputs disagree.
#
#   tests/bench/run.sh [--records N] [--streamctl PATH]
#
# When build/tests/bench/transport_bench is built, it also measures one data channel over tcp,
# plain against CURVE (cmake --build build --target transport_bench).
#
# Figures depend on the machine; compare ratios, and run it twice.
set -euo pipefail

records=1000000
streamctl="${STREAMCTL:-$(dirname "$0")/../../build/cli/streamctl}"
while [[ $# -gt 0 ]]; do
  case $1 in
    --records) records=$2; shift 2 ;;
    --streamctl) streamctl=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
streamctl=$(realpath "$streamctl")
for tool in jq gawk python3; do
  command -v $tool >/dev/null || { echo "bench needs $tool" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/streamctl-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export STREAMCTL_STATE_DIR="$work/state"

now() { date +%s.%N; }
# rate RECORDS SECONDS
rate() { python3 -c "print(f'{$1/$2:,.0f}')"; }

echo "generating $records records ..." >&2
cat >"$work/gen.toml" <<TOML
name = "bench-gen"
[sources.g]
type = "generator"
profile = "clicks"
count = $records
seed = 1
start_time = 1700000000000
[sinks.out]
type = "stdout"
inputs = ["g"]
TOML
"$streamctl" run "$work/gen.toml" >"$work/clicks.jsonl"
bytes=$(stat -c %s "$work/clicks.jsonl")
echo "input: $records records, $((bytes / 1000000)) MB: $(head -1 "$work/clicks.jsonl")"
echo

# 1. file -> filter -> map (project three fields) -> file
cat >"$work/filter.toml" <<TOML
name = "bench-filter"
[sources.in]
type = "file"
path = "$work/clicks.jsonl"
[operators.ok]
type = "filter"
inputs = ["in"]
where = "status == 200"
[operators.project]
type = "map"
inputs = ["ok"]
remove = ["ts", "status"]
[sinks.out]
type = "file"
inputs = ["project"]
path = "$work/out-streamctl"
TOML

t0=$(now); "$streamctl" run "$work/filter.toml"; t1=$(now)
streamctl_s=$(python3 -c "print($t1 - $t0)")
t0=$(now); jq -c 'select(.status == 200) | {user, page, bytes}' "$work/clicks.jsonl" >"$work/out-jq"; t1=$(now)
jq_s=$(python3 -c "print($t1 - $t0)")
t0=$(now)
# The fastest gawk a user would write for these fixed-layout lines: split on quotes and pick
# fields by position (a regex match() per field runs ~10x slower).
gawk -F'"' '$13 == ":200," { b = $15; gsub(/[:}]/, "", b)
  printf "{\"user\":\"%s\",\"page\":\"%s\",\"bytes\":%s}\n", $6, $10, b }' "$work/clicks.jsonl" >"$work/out-gawk"
t1=$(now)
gawk_s=$(python3 -c "print($t1 - $t0)")

sort "$work"/out-streamctl/part-* >"$work/a"; sort "$work/out-jq" >"$work/b"; sort "$work/out-gawk" >"$work/c"
cmp -s "$work/a" "$work/b" || { echo "streamctl and jq disagree" >&2; diff "$work/a" "$work/b" | head >&2; exit 1; }
cmp -s "$work/a" "$work/c" || { echo "streamctl and gawk disagree" >&2; diff "$work/a" "$work/c" | head >&2; exit 1; }
echo "file -> filter -> map (3 fields) -> file, parallelism 1 ($(wc -l <"$work/a") records out, outputs agree):"
printf '  %-10s %8.2f s  %14s records/s\n' streamctl "$streamctl_s" "$(rate $records $streamctl_s)"
printf '  %-10s %8.2f s  %14s records/s\n' jq "$jq_s" "$(rate $records $jq_s)"
printf '  %-10s %8.2f s  %14s records/s\n' gawk "$gawk_s" "$(rate $records $gawk_s)"
python3 -c "print(f'  streamctl / jq = {$jq_s/$streamctl_s:.1f}x   streamctl / gawk = {$gawk_s/$streamctl_s:.1f}x')"
echo

# 2. The data plane: records cross from one worker process to another through one channel
# and are then dropped, so the figure is the channel's, not an operator's.
channel_records=$((records * 10))
cat >"$work/channel.toml" <<TOML
name = "bench-channel"
[sources.g]
type = "generator"
profile = "counter"
count = $channel_records
[operators.drop]
type = "filter"
inputs = ["g"]
partition = "rebalance"
where = "seq < 0"
[sinks.out]
type = "stdout"
inputs = ["drop"]
TOML
for transport in ipc tcp; do
  t0=$(now); "$streamctl" run "$work/channel.toml" --transport $transport >/dev/null; t1=$(now)
  s=$(python3 -c "print($t1 - $t0)")
  printf 'data plane, one channel between two processes (%s), %s records {seq, ts}: %.2f s, %s records/s\n' \
    $transport $channel_records "$s" "$(rate $channel_records $s)"
done

# 3. One data channel over tcp loopback, plain against CURVE (the encryption of links between
# hosts), on frames of streamctl's batch sizes.
transport_bench="$(dirname "$streamctl")/../tests/bench/transport_bench"
if [[ -x $transport_bench ]]; then
  echo
  "$transport_bench" 2
fi
