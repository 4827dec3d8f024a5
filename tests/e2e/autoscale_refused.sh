#!/usr/bin/env bash
# An autoscaler whose rescale cannot happen keeps the job running at its old parallelism and
# logs why (issue 10, bad input): here the rescale the rates call for (slow 1 -> 2) needs more
# worker processes than `run --max-workers` allows. The job goes on, `status` shows the
# refusal, and the output is complete and exactly once.
source "$(dirname "$0")/lib/common.bash"

# As in autoscale.sh: 800 records/s into a map that does about 800/s flat out; DS2 asks for 2.
records=12000
cat >"$WORK/p.toml" <<TOML
name = "refused"
[checkpoint]
interval = "1s"
dir = "$WORK/ck"
[autoscale]
interval = "2s"
cooldown = "2s"
max_parallelism = 2
target_utilization = 0.7
[sources.gen]
type = "generator"
profile = "counter"
count = $records
rate = 800
[operators.slow]
type = "map"
inputs = ["gen"]
partition = "rebalance"
parallelism = 1
set = { b = "burn(1200)" }
[sinks.out]
type = "file"
inputs = ["slow"]
path = "$WORK/sink"
TOML

# gen, then slow -> out fused: 2 workers; slow at 2 would make 4.
"$STREAMCTL" -v run --autoscale --max-workers 2 "$WORK/p.toml" 2>"$WORK/run.log" &
pid=$!
wait_for_text "$WORK/run.log" "autoscale: cannot rescale to slow=2" 60
assert_contains "$WORK/run.log" "the job goes on at its parallelism"
"$STREAMCTL" status refused >"$WORK/status"
assert_contains "$WORK/status" "refused: "
assert_contains "$WORK/status" "): running"
assert_contains "$WORK/status" "slow (map) x1"
set +e; wait $pid; code=$?; set -e
if [[ $code != 0 ]]; then tail -20 "$WORK/run.log" >&2; fail "the job exited $code"; fi
if grep -q "rescaled in" "$WORK/run.log"; then fail "the job was rescaled although the rescale was refused"; fi

python3 - "$WORK/sink" "$records" <<'PY' || fail "the output is not every record once"
import glob, json, sys
seqs = sorted(json.loads(l)["seq"] for p in glob.glob(sys.argv[1] + "/part-*") for l in open(p))
n = int(sys.argv[2])
if seqs != list(range(n)):
    sys.exit(f"{len(seqs)} records, {len(set(seqs))} distinct; expected 0..{n - 1} once each")
PY
assert_no_processes_left
echo ok
