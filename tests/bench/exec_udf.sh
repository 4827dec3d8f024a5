#!/usr/bin/env bash
# Throughput of the exec operator (issue 11): a trivial Python UDF (a JSON line in, the same
# record with one field added out) run by streamctl, against the same program alone as a
# filter, `python3 udf.py < in > out`. A measuring tool, not a test: it never fails on speed,
# only when an output miscounts. The aim is streamctl at >= 70% of the standalone throughput.
#
#   tests/bench/exec_udf.sh [--records N] [--repeat N] [--batch-size N] [--streamctl PATH]
#
# The job is file source -> exec -> file sink, all fused in one worker (forward edges); the
# standalone run reads the same file with a loop of the same cost (a json.loads and a
# json.dumps per line), without the protocol's sync lines. Figures: records per second of
# wall time and per CPU second (user + sys of every process, children included, from
# /usr/bin/time or bash's `times`), median of --repeat runs. On a loaded machine prefer CPU.
set -euo pipefail

records=500000
repeat=3
batch_size=1024
root=$(cd "$(dirname "$0")/../.." && pwd)
streamctl="$root/build/cli/streamctl"
while [[ $# -gt 0 ]]; do
  case $1 in
  --records) records=$2; shift 2 ;;
  --repeat) repeat=$2; shift 2 ;;
  --batch-size) batch_size=$2; shift 2 ;;
  --streamctl) streamctl=$2; shift 2 ;;
  *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/exec-udf-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export STREAMCTL_STATE_DIR="$work/state"
# A filter's stdout is block-buffered unless this is set (some environments set it): with it,
# the standalone run would pay a write per line and look slower than it is.
unset PYTHONUNBUFFERED

python3 - "$records" >"$work/in.jsonl" <<'PY'
import sys
for k in range(int(sys.argv[1])):
    print('{"seq":%d,"user":"u%d","page":"/p/%d","bytes":%d}' % (k, k % 977, k % 31, k * 7 % 5000))
PY

# Standalone: the same per-line work, no protocol.
cat >"$work/alone.py" <<'PY'
import json, sys
write = sys.stdout.write
encode = json.JSONEncoder(separators=(",", ":")).encode
for line in sys.stdin:
    r = json.loads(line)
    r["udf"] = True
    write(encode(r) + "\n")
PY
# Under streamctl: the same function through the protocol helper of examples/udf.
cat >"$work/udf.py" <<PY
import sys; sys.path.insert(0, "$root/examples/udf")
import streamctl_udf
def f(r):
    r["udf"] = True
    return r
streamctl_udf.run(f)
PY
cat >"$work/job.toml" <<TOML
name = "exec-udf-bench"
batch_size = $batch_size
[sources.in]
type = "file"
path = "$work/in.jsonl"
[operators.udf]
type = "exec"
inputs = ["in"]
command = ["python3", "$work/udf.py"]
[sinks.out]
type = "file"
inputs = ["udf"]
path = "$work/out"
TOML

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

run_alone() { python3 "$work/alone.py" <"$work/in.jsonl" >"$work/alone.out"; }
run_job() {
  rm -rf "$work/out"
  "$streamctl" run "$work/job.toml" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
}

# CPU per run: the difference of the children's cumulative CPU, read by a `times` in a subshell
# around each command.
cpu_of() {
  ( "$@"; times ) | tail -1 | awk '{
      split($1, u, "m"); split($2, s, "m"); sub("s", "", u[2]); sub("s", "", s[2]);
      print u[1] * 60 + u[2] + s[1] * 60 + s[2] }'
}

declare -a alone_wall alone_cpu job_wall job_cpu
for _ in $(seq "$repeat"); do
  t0=$(date +%s.%N); c=$(cpu_of run_alone); t1=$(date +%s.%N)
  alone_wall+=("$(echo "$t1 - $t0" | bc -l)"); alone_cpu+=("$c")
  t0=$(date +%s.%N); c=$(cpu_of run_job); t1=$(date +%s.%N)
  job_wall+=("$(echo "$t1 - $t0" | bc -l)"); job_cpu+=("$c")
done
n_alone=$(wc -l <"$work/alone.out")
n_job=$(cat "$work"/out/part-* | wc -l)
[[ "$n_alone" == "$records" && "$n_job" == "$records" ]] || {
  echo "miscount: standalone $n_alone, streamctl $n_job, expected $records" >&2
  exit 1
}

aw=$(printf '%s\n' "${alone_wall[@]}" | median); ac=$(printf '%s\n' "${alone_cpu[@]}" | median)
jw=$(printf '%s\n' "${job_wall[@]}" | median); jc=$(printf '%s\n' "${job_cpu[@]}" | median)
printf 'records %d, batch_size %d, median of %d runs\n' "$records" "$batch_size" "$repeat"
printf '%-22s %10s %12s %10s %14s\n' "" "wall s" "rec/s" "cpu s" "rec/cpu-s"
printf '%-22s %10.2f %12.0f %10.2f %14.0f\n' "python3 udf.py alone" "$aw" "$(echo "$records / $aw" | bc -l)" \
  "$ac" "$(echo "$records / $ac" | bc -l)"
printf '%-22s %10.2f %12.0f %10.2f %14.0f\n' "streamctl exec" "$jw" "$(echo "$records / $jw" | bc -l)" \
  "$jc" "$(echo "$records / $jc" | bc -l)"
printf 'streamctl / alone: %.0f%% of the wall-clock throughput, %.0f%% of the per-CPU throughput\n' \
  "$(echo "100 * $aw / $jw" | bc -l)" "$(echo "100 * $ac / $jc" | bc -l)"
