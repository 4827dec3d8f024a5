# Incremental checkpoints with entry deltas (keyed_delta segments: a changed key group of a
# window or reduce written as its changed entries only) under failure: workers killed with -9
# at random moments, the first kill before the first checkpoint completes as often as not, the
# later ones while checkpoints with deltas are taken and restored. The output must equal that
# of a run without failures (exactly once), and some retained checkpoint must really hold
# deltas that `snapshot verify` reads and `snapshot inspect` shows.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"

seed_random checkpoint_entry_deltas DELTAS_SEED

# 3000 keys in 8 key groups (about 190 a group a subtask), of which a checkpoint interval
# touches some hundreds: most groups change, few of their entries do, so they are written as
# deltas. `ticks` fires windows (erased entries) every 250 ms; `running` is a reduce (whose
# rows, one per update, must not depend on the order in which the two generator subtasks'
# records meet: a count does not, a max(seq) would).
pipeline() { # NAME OUT
  cat <<TOML
name = "$1"
parallelism = 2
max_parallelism = 8
[checkpoint]
interval = "200ms"
dir = "$WORK/ck"
incremental = true
full_every = 6
retain = 3
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.gen]
type = "generator"
profile = "counter"
count = 60000
rate = 12000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq / 5 % 3000", fast_key = "seq % 37" }
[operators.growing]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "1h" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.ticks]
type = "window"
inputs = ["keyed"]
key = ["fast_key"]
window = { kind = "sliding", size = "500ms", slide = "250ms" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.running]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { updates = "count()" }
[sinks.out]
type = "file"
inputs = ["growing", "ticks", "running"]
path = "$2"
TOML
}

pipeline reference "$WORK/expected" >"$WORK/reference.toml"
run_reference "$WORK/reference.toml" "$WORK/expected" 60000

# The keyed_delta segments of job NAME's checkpoint files so far (snapshot inspect --json).
count_deltas() {
  local n=0 f
  for f in "$WORK/ck/$1"/chk-*/chain-*.snap; do
    [[ -f $f ]] || continue
    n=$((n + $("$STREAMCTL" snapshot inspect --json "$f" 2>/dev/null | grep -o '"kind":"keyed_delta"' | wc -l || true)))
  done
  echo $n
}

pipeline chaos "$WORK/got" >"$WORK/chaos.toml"
"$STREAMCTL" -v run "$WORK/chaos.toml" 2>"$WORK/chaos.log" &
pid=$!
wait_for_text "$WORK/chaos.log" "records flowing"
# The first kill: at once (before the first checkpoint) or after 0.1-0.4 s, by the seed.
sleep "0.$((RANDOM % 2 ? 0 : RANDOM % 4 + 1))"
kills=0 deltas=0
kill_worker && kills=1
while kill -0 $pid 2>/dev/null && ((kills < 7)); do
  sleep "0.$((RANDOM % 6 + 4))"
  d=$(count_deltas chaos)
  ((d > deltas)) && deltas=$d
  kill_worker && kills=$((kills + 1))
done
set +e; wait $pid; code=$?; set -e
restarts=$(grep -c "restarting the job" "$WORK/chaos.log" || true)
echo "killed $kills worker(s); the job restarted $restarts time(s); saw $deltas delta segment(s)"
assert_eq 0 "$code" "exit code of a job that survived its failures ($(tail -3 "$WORK/chaos.log"))"
[[ $restarts -ge 2 ]] || fail "only $restarts restart(s): the kills did not land"
from_start=$(grep -c "restarting the job .* from the beginning" "$WORK/chaos.log" || true)
echo "$from_start restart(s) from the beginning (a kill before the first checkpoint), $((restarts - from_start)) from a checkpoint"
assert_same_output "$WORK/got" "the output after failures differs from the output without them"
assert_no_processes_left

# Deltas were written, and what is left of the checkpoints verifies, earlier files and all.
d=$(count_deltas chaos)
((d > deltas)) && deltas=$d
((deltas > 0)) || fail "no checkpoint file held a keyed_delta segment"
verify_checkpoints "$WORK/ck/chaos"
for f in "$WORK/ck/chaos"/chk-*/chain-*.snap; do
  if "$STREAMCTL" snapshot inspect "$f" 2>/dev/null | grep -q "^deltas:"; then
    run_expect 0 "$STREAMCTL" snapshot inspect "$f"
    assert_contains "$WORK/out" "keyed_delta"
    assert_contains "$WORK/out" "format version:  2"
    break
  fi
done
echo ok
