# Slot sharing (pipeline/spec/worker_sharing.hpp): the tasks of one subtask index run in one
# worker process. The processes a run starts must be those `graph` shows, one per task with
# slot_sharing = false; and a kill -9 of a process, which takes every task in it, must leave
# the committed output exactly that of a run without failures. Seeded: a failure prints the
# seed to rerun with.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"

seed_random slot_sharing SLOT_SHARING_SEED

# A generator keyed into a window at parallelism 2, written to files at parallelism 2.
cat >"$WORK/job.toml" <<TOML
name = "shared"
parallelism = 2
[checkpoint]
interval = "300ms"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.gen]
type = "generator"
profile = "counter"
count = 60000
rate = 15000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 997" }
[operators.per_key]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()", s = "sum(seq)" }
[sinks.out]
type = "file"
inputs = ["per_key"]
path = "$WORK/parts"
TOML

# processes_in_graph [SET...]: how many worker processes `graph` says a run starts.
processes_in_graph() {
  "$STREAMCTL" graph --format json "$WORK/job.toml" "$@" | python3 -c '
import json, sys
print(len({t["worker"] for t in json.load(sys.stdin)["tasks"]}))'
}
tasks=$("$STREAMCTL" graph --format json "$WORK/job.toml" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["tasks"]))')
shared=$(processes_in_graph)
alone=$(processes_in_graph --set slot_sharing=false)
assert_eq "$tasks" "$alone" "processes without slot sharing (one per task)"
((shared < tasks)) || fail "slot sharing puts $tasks tasks in $shared processes"
"$STREAMCTL" graph "$WORK/job.toml" >"$WORK/graph.txt"
assert_contains "$WORK/graph.txt" "$tasks task(s) in $shared worker process(es)"

run_reference "$WORK/job.toml" "$WORK/parts" 1000
rm -rf "$WORK/parts" "$WORK/ck"

# running_workers LOG: the worker processes of the job that LOG's run started.
running_workers() {
  local id
  id=$(grep -o "job shared-[0-9a-z-]* started" "$1" | head -1 | cut -d' ' -f2)
  pgrep -f -- "worker --job-dir $STREAMCTL_STATE_DIR/jobs/$id " | wc -l
}

# Without failures first, each way: the processes running are those the graph counts.
for sharing in true false; do
  "$STREAMCTL" -v run "$WORK/job.toml" --set slot_sharing=$sharing --set sources.gen.count=200000 \
    2>"$WORK/count-$sharing.log" &
  pid=$!
  wait_for_text "$WORK/count-$sharing.log" "records flowing"
  expected=$([[ $sharing == true ]] && echo "$shared" || echo "$tasks")
  assert_contains "$WORK/count-$sharing.log" "started: $tasks task(s) in $expected worker process(es)"
  assert_eq "$expected" "$(running_workers "$WORK/count-$sharing.log")" "worker processes running, slot_sharing = $sharing"
  run_expect 0 "$STREAMCTL" cancel shared
  set +e; wait $pid; set -e
  assert_no_processes_left
  rm -rf "$WORK/parts" "$WORK/ck"
done

# Then kill -9 shared processes while the job runs: each kill ends two tasks at once.
run_with_kills "$WORK/job.toml" "$WORK/chaos.log" 4 early
echo "killed $KILLS shared worker process(es) ($EARLY_KILLS before the first checkpoint); $RESTARTS restart(s)"
assert_eq 0 "$CODE" "exit code of the run with kills ($(tail -3 "$WORK/chaos.log"))"
((KILLS == 0 || RESTARTS > 0)) || fail "$KILLS kill(s) and no restart"
assert_same_output "$WORK/parts" "the output after kills of shared worker processes differs from the output without them"
assert_no_processes_left
echo ok
