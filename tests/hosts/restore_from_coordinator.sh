#!/usr/bin/env bash
# A restore from [checkpoint] storage = "coordinator" (SPEC §9): the savepoint is on the
# coordinator's disk only (each host sees a private, empty $WORK/ck), and the workers on the
# hosts fetch it over their control links. A local run over the first half of a growing
# input ends with a savepoint; the same pipeline on three hosts, and on two at another
# parallelism (a rescale across the restore), resumes it over the rest: each time, what the
# two runs committed together is exactly what one run over all the input commits. A damaged
# savepoint is refused with exit 3 naming the file; a restart after a lost worker fetches the
# savepoint again; and no staging copy is left anywhere.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
mkdir -p "$WORK/ck"
HOSTS_PRIVATE_DIRS="$WORK/ck"
hosts_up 3

pipeline() { # NAME INPUT OUT CLUSTER
  cat <<TOML
name = "$1"
parallelism = 3
$4
[checkpoint]
dir = "$WORK/ck"
[sources.in]
type = "file"
path = "$2"
event_time = "ts"
parallelism = 1
[operators.per_user]
type = "window"
inputs = ["in"]
key = ["user"]
window = { kind = "tumbling", size = "10s" }
aggregates = { n = "count()", total = "sum(v)" }
[operators.running]
type = "reduce"
inputs = ["in"]
key = ["user"]
aggregates = { seen = "count()", total = "sum(v)" }
[sinks.out]
type = "file"
inputs = ["per_user", "running"]
path = "$3"
TOML
}
cluster() { # HOST...
  local list="" h
  for h in "$@"; do list+="${list:+, }{ host = \"$h\", slots = 8 }"; done
  printf '[cluster]\nhosts = [%s]\nssh_options = ["-F", "%s"]\n' "$list" "$HOSTS_SSH_CONFIG"
}
committed() { cat "$1"/part-* 2>/dev/null | canonical; }

python3 - "$WORK" <<'PY'
import json, random, sys
random.seed(1919)
work = sys.argv[1]
t = 1_700_000_000_000
lines = []
for i in range(20000):
    t += random.randint(1, 60)
    lines.append(json.dumps({"ts": t, "user": "u%d" % random.randint(1, 300), "v": random.randint(1, 100)}))
open(work + "/all.jsonl", "w").write("\n".join(lines) + "\n")
open(work + "/first.jsonl", "w").write("\n".join(lines[:9000]) + "\n")
open(work + "/second.jsonl", "w").write("\n".join(lines[9000:]) + "\n")
PY

# The reference: one run over all the input, on this host.
pipeline reference "$WORK/all.jsonl" "$WORK/expected" "" >"$WORK/reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/reference.toml"
committed "$WORK/expected" >"$WORK/expected.txt"

# The first half, on this host, ending with a savepoint (open windows, reduce state, offset).
cp "$WORK/first.jsonl" "$WORK/in.jsonl"
pipeline growing "$WORK/in.jsonl" "$WORK/before" "" >"$WORK/local.toml"
run_expect 0 "$STREAMCTL" -v run "$WORK/local.toml" --savepoint-on-exit
savepoint=$(sed -n "s|.*stopped with savepoint \($WORK/ck/[^ ]*\).*|\1|p" "$WORK/err")
[[ -f $savepoint/_metadata ]] || fail "the first run ended with no savepoint in $WORK/ck: $(tail -3 "$WORK/err")"
for host in h1 h2 h3; do
  host_exec "$host" test -e "$savepoint/_metadata" && fail "$host sees the coordinator's savepoint: the test proves nothing"
done
cat "$WORK/second.jsonl" >>"$WORK/in.jsonl"

# The rest, on three hosts at the same parallelism and on two at another one.
pipeline growing "$WORK/in.jsonl" "$WORK/unused" "$(cluster h1 h2 h3)" >"$WORK/three.toml"
pipeline growing "$WORK/in.jsonl" "$WORK/unused" "$(cluster h1 h2)" >"$WORK/two.toml"
for run in three:3 two:2; do
  file=${run%:*} p=${run#*:}
  cp -a "$WORK/before" "$WORK/after-$file"
  run_expect 0 "$STREAMCTL" -v run "$WORK/$file.toml" --from-savepoint "$savepoint" -p "$p" \
    --set sinks.out.path="$WORK/after-$file"
  cp "$WORK/err" "$WORK/$file.log"
  assert_contains "$WORK/$file.log" "restored from $savepoint"
  assert_contains "$WORK/$file.log" "h2: "
  committed "$WORK/after-$file" >"$WORK/got-$file.txt"
  if ! cmp -s "$WORK/expected.txt" "$WORK/got-$file.txt"; then
    diff "$WORK/expected.txt" "$WORK/got-$file.txt" | head -10 >&2
    fail "a savepoint restored from the coordinator's disk on $file hosts at parallelism $p differs from one run"
  fi
  echo "restored from the coordinator on $file hosts at parallelism $p: exact"
done

# A damaged savepoint: refused with exit 3, naming the file, before any worker reads it.
cp -a "$savepoint" "$WORK/ck/damaged"
snap=$(ls "$WORK/ck/damaged"/*.snap | tail -1)
python3 - "$snap" <<'PY'
import os, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[len(data) // 2] ^= 0x5A
open(path, "wb").write(bytes(data))
PY
run_expect 3 "$STREAMCTL" run "$WORK/three.toml" --from-savepoint "$WORK/ck/damaged"
assert_contains "$WORK/err" "$(basename "$snap")"

# A restart after a lost worker restores again, as a new attempt that fetches the savepoint
# anew: a generator job stopped with a savepoint on this host is restored on three hosts,
# where one worker is killed while records flow.
endless() { # NAME OUT CLUSTER
  cat <<TOML
name = "$1"
parallelism = 2
$3
[checkpoint]
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 3
[sources.gen]
type = "generator"
profile = "counter"
count = 40000
rate = 5000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 41" }
[operators.updates]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { updates = "count()" } # order-free: two generator subtasks interleave
[sinks.out]
type = "file"
inputs = ["updates"]
path = "$2"
TOML
}
endless counter "$WORK/counter-expected" "" >"$WORK/counter-reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/counter-reference.toml" --set sources.gen.rate=0
committed "$WORK/counter-expected" >"$WORK/counter-expected.txt"
endless counter "$WORK/counter-before" "" >"$WORK/counter-local.toml"
"$STREAMCTL" -v run "$WORK/counter-local.toml" --set checkpoint.interval=300ms 2>"$WORK/counter-local.log" &
pid=$!
wait_for_text "$WORK/counter-local.log" "records flowing" 60
sleep 1
run_expect 0 "$STREAMCTL" stop counter
counter_savepoint=$(cat "$WORK/out")
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of the local counter job stopped with a savepoint"
[[ -f $counter_savepoint/_metadata ]] || fail "stop printed '$counter_savepoint', not a savepoint"
cp -a "$WORK/counter-before" "$WORK/counter-after"
endless counter "$WORK/counter-after" "$(cluster h1 h2 h3)" >"$WORK/counter-hosts.toml"
"$STREAMCTL" -v run "$WORK/counter-hosts.toml" --from-savepoint "$counter_savepoint" 2>"$WORK/counter-hosts.log" &
pid=$!
wait_for_text "$WORK/counter-hosts.log" "records flowing" 60
sleep 0.5
victim=""
for p in $(host_pids h1); do
  if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- " worker "; then victim=$p; break; fi
done
[[ -n $victim ]] || fail "no worker of the job on h1 to kill"
kill -KILL "$victim"
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of a restored job that lost a worker ($(tail -3 "$WORK/counter-hosts.log"))"
assert_contains "$WORK/counter-hosts.log" "restarting the job (attempt 1 of 3)"
assert_contains "$WORK/counter-hosts.log" "from $counter_savepoint"
committed "$WORK/counter-after" >"$WORK/counter-got.txt"
if ! cmp -s "$WORK/counter-expected.txt" "$WORK/counter-got.txt"; then
  diff "$WORK/counter-expected.txt" "$WORK/counter-got.txt" | head -10 >&2
  fail "a restored job restarted after a lost worker differs from one run"
fi
echo "restarted after a lost worker, from the coordinator's savepoint: exact"

for host in h1 h2 h3; do host_wait_only_sshd "$host" 10 || fail "processes left on $host: $(host_pids "$host")"; done
assert_no_processes_left
left=$(ls -d "${TMPDIR:-/tmp}"/streamctl-restore-* /tmp/streamctl-restore-* 2>/dev/null || true)
[[ -z $left ]] || fail "staging copies left behind: $left"
echo "restore_from_coordinator: ok"
