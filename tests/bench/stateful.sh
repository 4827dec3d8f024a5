#!/usr/bin/env bash
# Benchmarks of the stateful path (issue 3), printed as records/s. A measuring tool, not a test:
# it never fails on speed, only when streamctl's counts disagree with jq's and gawk's.
#
#   tests/bench/stateful.sh [--records N] [--json-records N,N...] [--streamctl PATH]
#
#   1. generator (clicks, 100,000 users) -> keyed tumbling count, 1 s windows of event time
#      -> file, at parallelism 1 and 2; "sparse": 100,000 records per second of event time
#      (about one record per key and window: every record opens a window), "dense": 1,000,000
#      (about ten records per key and window)
#   2. JSON lines file -> count per user -> file, against `jq -r .user | LC_ALL=C sort | uniq -c` and a
#      gawk associative-array count, for each size of --json-records (default 1M and 10M)
#   3. Nexmark q5 and q8 (examples/) at parallelism 2
#
# Figures depend on the machine and its load; run it twice and compare ratios.
set -euo pipefail

records=10000000
json_sizes=1000000,10000000
streamctl="${STREAMCTL:-$(dirname "$0")/../../build/cli/streamctl}"
examples="$(dirname "$0")/../../examples"
while [[ $# -gt 0 ]]; do
  case $1 in
    --records) records=$2; shift 2 ;;
    --json-records) json_sizes=$2; shift 2 ;;
    --streamctl) streamctl=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
streamctl=$(realpath "$streamctl")
examples=$(realpath "$examples")
for tool in jq gawk python3 /usr/bin/time; do
  command -v $tool >/dev/null || { echo "bench needs $tool" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/streamctl-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export STREAMCTL_STATE_DIR="$work/state"

now() { date +%s.%N; }
# rate RECORDS SECONDS [CORES]
rate() { python3 -c "print(f'{$1/$2:,.0f}')"; }

for density in sparse dense; do
  divisor=$([[ $density == sparse ]] && echo 100 || echo 1000)
  echo "== generator -> keyed tumbling count (100,000 keys, 1 s windows, $density) -> file, $records records"
  cat >"$work/window.toml" <<TOML
name = "bench-window"
[sources.g]
type = "generator"
profile = "clicks"
users = 100000
count = $records
seed = 1
event_time = "ts / $divisor"
[operators.per_user]
type = "window"
inputs = ["g"]
key = ["user"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()" }
[sinks.out]
type = "file"
inputs = ["per_user"]
path = "$work/window-out"
TOML
  for p in 1 2; do
    rm -rf "$work/window-out"
    start=$(now)
    /usr/bin/time -o "$work/cpu" -f "%U %S" "$streamctl" run "$work/window.toml" -p $p
    end=$(now)
    seconds=$(python3 -c "print($end - $start)")
    cpu=$(awk '{print $1 + $2}' "$work/cpu")
    # Every record is counted once: the windows' counts add up to the input.
    total=$(cat "$work/window-out"/part-* | python3 -c 'import sys, json; print(sum(json.loads(l)["n"] for l in sys.stdin))')
    rows=$(cat "$work/window-out"/part-* | wc -l)
    [[ $total == "$records" ]] || { echo "windows counted $total records, expected $records" >&2; exit 1; }
    # Per core: records over the CPU seconds (user + system) of every process of the job, a
    # figure that a busy shared machine disturbs less than wall time.
    echo "parallelism $p: $(rate $records $seconds) records/s ($(printf %.2f $seconds) s, $rows rows out); $(rate $records $cpu) records per CPU second ($cpu s of CPU)"
  done
  echo
done

IFS=, read -ra sizes <<<"$json_sizes"
for n in "${sizes[@]}"; do
  echo "== JSON file -> count per user -> file, $n records"
  cat >"$work/gen.toml" <<TOML
name = "bench-gen"
[sources.g]
type = "generator"
profile = "clicks"
count = $n
seed = 1
start_time = 1700000000000
[sinks.out]
type = "file"
inputs = ["g"]
path = "$work/gen-out"
TOML
  rm -rf "$work/gen-out"
  "$streamctl" run "$work/gen.toml"
  mv "$work/gen-out"/part-0-0.json "$work/clicks.jsonl"
  cat >"$work/count.toml" <<TOML
name = "bench-count"
[sources.in]
type = "file"
path = "$work/clicks.jsonl"
event_time = "ts"
[operators.per_user]
type = "window"
inputs = ["in"]
key = ["user"]
window = { kind = "tumbling", size = "1000d" }
aggregates = { n = "count()" }
[sinks.out]
type = "file"
inputs = ["per_user"]
path = "$work/count-out"
TOML
  rm -rf "$work/count-out"
  start=$(now); /usr/bin/time -o "$work/cpu" -f "%U %S" "$streamctl" run "$work/count.toml"; end=$(now)
  t_streamctl=$(python3 -c "print($end - $start)")
  c_streamctl=$(awk '{print $1 + $2}' "$work/cpu")
  cat "$work/count-out"/part-* | python3 -c 'import sys, json
for l in sys.stdin: r = json.loads(l); print(r["user"], r["n"])' | sort >"$work/streamctl.counts"

  start=$(now)
  /usr/bin/time -o "$work/cpu" -f "%U %S" bash -c 'jq -r .user <"$1" | LC_ALL=C sort | uniq -c >"$2"' _ \
    "$work/clicks.jsonl" "$work/jq.raw"
  end=$(now)
  t_jq=$(python3 -c "print($end - $start)")
  c_jq=$(awk '{print $1 + $2}' "$work/cpu")
  awk '{print $2, $1}' "$work/jq.raw" | sort >"$work/jq.counts"

  start=$(now)
  /usr/bin/time -o "$work/cpu" -f "%U %S" \
    gawk -F'"user":"' '{ split($2, rest, "\""); n[rest[1]]++ } END { for (u in n) print u, n[u] }' \
    "$work/clicks.jsonl" >"$work/gawk.raw"
  end=$(now)
  t_gawk=$(python3 -c "print($end - $start)")
  c_gawk=$(awk '{print $1 + $2}' "$work/cpu")
  sort "$work/gawk.raw" >"$work/gawk.counts"

  cmp -s "$work/streamctl.counts" "$work/jq.counts" || { echo "streamctl and jq disagree" >&2; exit 1; }
  cmp -s "$work/streamctl.counts" "$work/gawk.counts" || { echo "streamctl and gawk disagree" >&2; exit 1; }
  ratio() { python3 -c "print(f'{$1/$2:.1f}')"; }
  echo "streamctl: $(rate $n $t_streamctl) records/s, $(rate $n $c_streamctl) per CPU second"
  echo "jq | LC_ALL=C sort | uniq -c: $(rate $n $t_jq) records/s ($(ratio $t_jq $t_streamctl)x the time), $(rate $n $c_jq) per CPU second ($(ratio $c_jq $c_streamctl)x the CPU)"
  echo "gawk: $(rate $n $t_gawk) records/s ($(ratio $t_gawk $t_streamctl)x the time), $(rate $n $c_gawk) per CPU second ($(ratio $c_gawk $c_streamctl)x the CPU)"
  rm -f "$work/clicks.jsonl"
  echo
done

for q in q5 q8; do
  file="$examples/nexmark_$q.toml"
  [[ -f $file ]] || continue
  echo "== Nexmark $q, parallelism 2, $records events"
  rm -rf "$work/nexmark-out"
  start=$(now)
  /usr/bin/time -o "$work/cpu" -f "%U %S" "$streamctl" run "$file" -p 2 --set "sources.events.count=$records" \
    --set "sinks.out.type=file" --set "sinks.out.path=$work/nexmark-out" >/dev/null
  end=$(now)
  seconds=$(python3 -c "print($end - $start)")
  cpu=$(awk '{print $1 + $2}' "$work/cpu")
  echo "$(rate $records $seconds) events/s ($(printf %.2f $seconds) s); $(rate $records $cpu) events per CPU second"
done
