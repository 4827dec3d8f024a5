# Shared by the tests of rescales that keep workers (rescale_keep.sh, rescale_keep_failed.sh):
# their job, and the pid of a subtask's worker.

# kept_workers_pipeline NAME OUT COUNT RATE [CHECKPOINT_TIMEOUT]: a generator keyed into a
# window and a reduce, each its own task (the map's output goes to both), into one file sink.
kept_workers_pipeline() {
  cat <<TOML
name = "$1"
parallelism = 1
[checkpoint]
interval = "300ms"
${5:+timeout = \"$5\"}
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.gen]
type = "generator"
profile = "counter"
count = $3
rate = $4
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 997" }
[operators.count_per_key]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "2s" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.running]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { n = "count()" }
[sinks.out]
type = "file"
inputs = ["count_per_key", "running"]
path = "$2"
TOML
}

# pid_of JOB NODE SUBTASK: the worker's pid, from `status --json`.
pid_of() {
  "$STREAMCTL" status "$1" --json | python3 -c '
import json, sys
node, index = sys.argv[1], int(sys.argv[2])
for op in json.load(sys.stdin)["operators"]:
    if op["name"] == node:
        pid = op["subtasks"][index]["pid"]
        # 0 while the worker has not said it is ready (a restart, a rescale): no pid to aim
        # at. Printed, it made the caller `kill -9 0`, which killed the test itself.
        if pid > 0:
            print(pid)' "$2" "$3"
}
