# A file source with follow = true tails a log that a writer appends to and rotates (renamed to
# app.log.N, which the glob still matches, a new app.log created), lines sometimes written in
# two pieces, while workers are killed with -9 and the job restarts from its checkpoints. Every
# record is committed exactly once. Then the job is stopped with a savepoint while a line is
# half-written; the writer finishes it, rotates again and goes on, and a run from the savepoint
# commits the rest: nothing lost or repeated across the two runs. Last, `| head` ends a followed
# job. Timings and kills are drawn from a seed that a failing run prints (FOLLOW_SEED=N reruns
# it).
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"
seed_random file_follow FOLLOW_SEED

mkdir -p "$WORK/logs"
cat >"$WORK/follow.toml" <<TOML
name = "follow"
parallelism = 2
[checkpoint]
interval = "150ms"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.tail]
type = "file"
path = "$WORK/logs/app.log*"
follow = true
poll_interval = "20ms"
[operators.keyed]
type = "map"
inputs = ["tail"]
set = { k = "i % 7" }
[operators.count]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { n = "count()" }
[sinks.out]
type = "file"
inputs = ["keyed"]
path = "$WORK/records"
[sinks.counts]
type = "file"
inputs = ["count"]
path = "$WORK/counts"
TOML

# write FROM TO: appends records FROM..TO-1 to logs/app.log, a few at a time, sometimes a line in
# two pieces, renaming app.log to app.log.N every 300-700 records (the writer then opens a new
# app.log, as a logger does after rotation).
write() {
  local i=$1 chunk rotate_at=$(($1 + RANDOM % 400 + 300))
  while ((i < $2)); do
    chunk=""
    for _ in $(seq $((RANDOM % 40 + 1))); do
      ((i < $2)) || break
      chunk+="{\"i\":$i}"$'\n'
      i=$((i + 1))
    done
    if ((RANDOM % 3 == 0)); then
      local cut=$((RANDOM % ${#chunk}))
      printf '%s' "${chunk:0:cut}" >>"$WORK/logs/app.log"
      sleep "0.00$((RANDOM % 9 + 1))"
      printf '%s' "${chunk:cut}" >>"$WORK/logs/app.log"
    else
      printf '%s' "$chunk" >>"$WORK/logs/app.log"
    fi
    if ((i >= rotate_at)); then
      mv "$WORK/logs/app.log" "$WORK/logs/app.log.$i"
      rotate_at=$((i + RANDOM % 400 + 300))
    fi
    sleep "0.00$((RANDOM % 9 + 1))"
  done
}

# committed DIR: the records DIR's published part files hold.
committed() { cat "$1"/part-* 2>/dev/null | wc -l; }
wait_committed() { # DIR COUNT
  local deadline=$((SECONDS + 60))
  while (($(committed "$1") < $2)); do
    ((SECONDS < deadline)) || fail "only $(committed "$1") of $2 records committed in $1 after 60 s"
    sleep 0.1
  done
}

# 1. Tail while the writer writes and rotates, killing workers.
printf '{"i":0}\n' >"$WORK/logs/app.log"
"$STREAMCTL" -v run "$WORK/follow.toml" 2>"$WORK/run1.log" &
pid=$!
wait_for_text "$WORK/run1.log" "records flowing"
write 1 3000 &
writer=$!
KILLS=0
while kill -0 $writer 2>/dev/null; do
  sleep "0.$((RANDOM % 5 + 3))"
  if kill_worker; then KILLS=$((KILLS + 1)); fi
done
wait $writer
rotations=$(find "$WORK/logs" -name 'app.log.*' | wc -l)
echo "file_follow: $KILLS worker(s) killed while the writer rotated the log $rotations time(s)"
((KILLS > 0 && rotations > 0)) || fail "no worker was killed, or the log was never rotated"
wait_committed "$WORK/records" 3000

# 2. Stop with a savepoint while a line is half-written; finish it, rotate, write on.
printf '{"i":' >>"$WORK/logs/app.log"
sleep 0.2
run_ready "$STREAMCTL" stop follow # the last kill may have left the job restarting
savepoint=$(cat "$WORK/out")
[[ -f $savepoint/_metadata ]] || fail "stop printed '$savepoint', not a savepoint"
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of the followed job stopped with a savepoint"
assert_eq 3000 "$(committed "$WORK/records")" "records committed by the first run"
printf '3000}\n' >>"$WORK/logs/app.log"
mv "$WORK/logs/app.log" "$WORK/logs/app.log.stopped"
write 3001 4000

"$STREAMCTL" -v run "$WORK/follow.toml" --from-savepoint "$savepoint" 2>"$WORK/run2.log" &
pid=$!
wait_committed "$WORK/records" 4000
sleep 0.5 # anything repeated would be committed by now
run_expect 0 "$STREAMCTL" stop follow
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of the second run"

cat "$WORK"/records/part-* | canonical >"$WORK/got.txt"
seq 0 3999 | awk '{ printf "{\"i\": %d, \"k\": %d}\n", $1, $1 % 7 }' | canonical >"$WORK/expected.txt"
if ! cmp -s "$WORK/expected.txt" "$WORK/got.txt"; then
  diff "$WORK/expected.txt" "$WORK/got.txt" | head -20 >&2
  fail "the followed log's records were not committed exactly once ($rotations rotations, $KILLS kills)"
fi
# The keyed state went through the kills and the savepoint too: the last count per key is the
# number of records of that key.
last_counts=$(cat "$WORK"/counts/part-* | python3 -c '
import sys, json
n = {}
for l in sys.stdin:
    r = json.loads(l); n[r["k"]] = max(n.get(r["k"], 0), r["n"])
print(" ".join("%d=%d" % kv for kv in sorted(n.items())))')
assert_eq "0=572 1=572 2=572 3=571 4=571 5=571 6=571" "$last_counts" "counts per key after kills and a savepoint"
renamed=$(cat "$WORK/run1.log" "$WORK/run2.log" | grep -c "renamed since" || true)
echo "file_follow: $renamed restore(s) found a file under a new name"

# 3. `| head` ends a followed job whose files have nothing more, quietly with 141, as it ends
# any other: it once waited for a next record that would have met the closed pipe.
cat >"$WORK/head.toml" <<TOML
name = "follow-head"
[sources.tail]
type = "file"
path = "$WORK/logs/app.log*"
follow = true
[sinks.out]
type = "stdout"
inputs = ["tail"]
TOML
set +o pipefail
timeout 30 "$STREAMCTL" run "$WORK/head.toml" 2>"$WORK/head.err" | head -3 >"$WORK/head"
code=${PIPESTATUS[0]}
set -o pipefail
assert_eq 141 "$code" "exit code of a followed job when stdout closes (124: it never ended)"
assert_eq 3 "$(wc -l <"$WORK/head" | tr -d ' ')" "lines read by head"
assert_eq "" "$(cat "$WORK/head.err")" "stderr when stdout closes"

assert_no_processes_left
echo "file_follow: ok ($rotations rotations, $KILLS kills)"
