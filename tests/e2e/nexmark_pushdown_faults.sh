# A Nexmark source read only by a filter of bids makes only bids (the filter pushed into the
# generator, streamctl-pipeline(5) under events), numbered as in the full stream, so that its
# positions are those of a source that makes every event. Exactly once under failure with it
# (SPEC §7): workers killed with -9 before the first checkpoint and while the job runs, then a
# savepoint taken without the pushdown (events = "all") restored with it, and one taken with it
# restored without: the committed output equals one failure-free run's each time.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"
seed_random nexmark_pushdown_faults NEXMARK_PUSHDOWN_SEED

# Bids per auction in tumbling windows of event time, and a running count per bidder (a
# keyed reduce whose every update is a record: any loss or repeat shows).
pipeline() { # NAME OUT
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
interval = "150ms"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.gen]
type = "generator"
profile = "nexmark"
count = 80000
rate = 20000
seed = 3
start_time = 1700000000000
interval = "1ms"
event_time = "date_time"
[operators.bids]
type = "filter"
inputs = ["gen"]
where = 'event_type == "bid" && price > 0'
[operators.per_auction]
type = "window"
inputs = ["bids"]
key = ["auction"]
window = { kind = "tumbling", size = "2s" }
aggregates = { n = "count()", top = "max(price)" }
[operators.per_bidder]
type = "reduce"
inputs = ["bids"]
key = ["bidder"]
aggregates = { updates = "count()" }
[sinks.out]
type = "file"
inputs = ["per_auction", "per_bidder"]
path = "$2"
TOML
}

pipeline reference "$WORK/expected" >"$WORK/reference.toml"
run_reference "$WORK/reference.toml" "$WORK/expected" 1000
# Without the pushdown (events = "all": every event made, the filter drops them): the same.
pipeline whole "$WORK/whole" >"$WORK/whole.toml"
run_expect 0 "$STREAMCTL" run "$WORK/whole.toml" --set sources.gen.rate=0 \
  --set checkpoint.interval=0 --set sources.gen.events=all
assert_same_output "$WORK/whole" "the source that makes every event gave other output"

# kill -9: one worker at once (before any checkpoint) with probability 1/2, then a random
# worker every 0.3-0.8 s.
pipeline chaos "$WORK/got" >"$WORK/chaos.toml"
run_with_kills "$WORK/chaos.toml" "$WORK/chaos.log" 6 early
echo "killed $KILLS worker(s) ($EARLY_KILLS before the first checkpoint); $RESTARTS restart(s)"
assert_eq 0 "$CODE" "exit code of a job that survived its failures ($(tail -3 "$WORK/chaos.log"))"
[[ $RESTARTS -ge 1 ]] || fail "no restart: the kills did not land"
assert_same_output "$WORK/got" "the output after failures differs from the output without them"
verify_checkpoints "$WORK/ck/chaos"
assert_no_processes_left

# A savepoint half-way, restored with the other setting; both directions.
for first in all pushed; do
  name="stop-$first"
  pipeline "$name" "$WORK/$name" >"$WORK/$name.toml"
  first_set=() second_set=()
  if [[ $first == all ]]; then first_set=(--set sources.gen.events=all); else second_set=(--set sources.gen.events=all); fi
  "$STREAMCTL" -v run "$WORK/$name.toml" --set sources.gen.rate=8000 "${first_set[@]}" \
    2>"$WORK/$name.log" &
  pid=$!
  wait_for_text "$WORK/$name.log" "records flowing"
  sleep "0.$((RANDOM % 6 + 3))"
  run_expect 0 "$STREAMCTL" stop "$name"
  savepoint=$(cat "$WORK/out")
  [[ -f $savepoint/_metadata ]] || fail "stop printed '$savepoint', not a savepoint"
  set +e; wait $pid; code=$?; set -e
  assert_eq 0 "$code" "exit code of a job stopped with a savepoint"
  before=$(cat "$WORK/$name"/part-* | wc -l)
  [[ $before -lt $(wc -l <"$WORK/expected.txt") ]] || fail "the stop came after the end ($before records)"
  run_expect 0 "$STREAMCTL" run "$WORK/$name.toml" --from-savepoint "$savepoint" \
    --set sources.gen.rate=0 "${second_set[@]}"
  assert_same_output "$WORK/$name" "a savepoint taken with events=$first and restored with the other setting gave other output"
done
assert_no_processes_left
