#!/usr/bin/env bash
# Savepoints across hosts (issue 8, SPEC §7 and §9): a keyed stateful job on three namespace
# hosts ([checkpoint] storage = "shared", a dir every host sees) is stopped with a savepoint
# half-way; that savepoint restores on one host (the same pipeline without [cluster]) and on
# two hosts, each at another parallelism, and each restored run commits, together with what
# the stopped job committed, exactly what an uninterrupted run commits. Nothing is left on
# any host.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
hosts_up 3

pipeline() { # NAME OUT CLUSTER
  cat <<TOML
name = "$1"
parallelism = 2
$3
[checkpoint]
interval = "300ms"
dir = "$WORK/ck"
storage = "shared"
[sources.gen]
type = "generator"
profile = "counter"
count = 40000
rate = 10000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 53" }
[operators.count_per_key]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "300ms" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.updates]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { updates = "count()" }
[sinks.out]
type = "file"
inputs = ["count_per_key", "updates"]
path = "$2"
shared = true
TOML
}
committed() { cat "$1"/part-* | canonical; }
ssh_options="ssh_options = [\"-F\", \"$HOSTS_SSH_CONFIG\"]"
three_hosts="[cluster]
hosts = [{ host = \"h1\", slots = 8 }, { host = \"h2\", slots = 8 }, { host = \"h3\", slots = 8 }]
$ssh_options"
two_hosts="[cluster]
hosts = [{ host = \"h1\", slots = 8 }, { host = \"h2\", slots = 8 }]
$ssh_options"
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }

pipeline reference "$WORK/expected" "" >"$WORK/reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/reference.toml" --set sources.gen.rate=0 --set checkpoint.interval=0
committed "$WORK/expected" >"$WORK/expected.txt"

# On three hosts at parallelism 3, stopped with a savepoint half-way.
pipeline onhosts "$WORK/before" "$three_hosts" >"$WORK/three.toml"
started=$EPOCHREALTIME
"$STREAMCTL" -v run "$WORK/three.toml" -p 3 --set sources.gen.rate=4000 2>"$WORK/run.log" &
pid=$!
wait_for_text "$WORK/run.log" "records flowing" 60
deadline=$((SECONDS + 60))
until compgen -G "$WORK/ck/onhosts/chk-*/_metadata" >/dev/null; do
  ((SECONDS < deadline)) || fail "no checkpoint completed on the hosts: $(tail -5 "$WORK/run.log")"
  sleep 0.05
done
grep "placement: " "$WORK/run.log" | sed 's/.*placement: /placement: /' | tee "$WORK/placement"
for host in h1 h2 h3; do assert_contains "$WORK/placement" "$host: "; done
sleep 1
run_expect 0 "$STREAMCTL" stop onhosts
savepoint=$(cat "$WORK/out")
[[ -f $savepoint/_metadata ]] || fail "stop printed '$savepoint', not a savepoint"
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of a job on three hosts stopped with a savepoint ($(tail -3 "$WORK/run.log"))"
echo "three hosts, stopped with a savepoint: $(elapsed "$started")s"
before=$(cat "$WORK/before"/part-* | wc -l)
[[ $before -gt 0 && $before -lt $(wc -l <"$WORK/expected.txt") ]] || fail "the stop committed $before records: not half-way"
run_expect 0 "$STREAMCTL" snapshot verify "$savepoint"
for host in h1 h2 h3; do host_wait_only_sshd "$host" 10 || fail "processes left on $host after the stop"; done

# restore NAME PIPELINE PARALLELISM: runs PIPELINE from the savepoint into a copy of what the
# stopped job committed, and compares the whole with the uninterrupted run.
restore() {
  local name=$1 toml=$2 p=$3
  cp -a "$WORK/before" "$WORK/after-$name"
  local started=$EPOCHREALTIME
  run_expect 0 "$STREAMCTL" -v run "$toml" --from-savepoint "$savepoint" -p "$p" \
    --set sources.gen.rate=0 --set sinks.out.path="$WORK/after-$name"
  echo "restored on $name at parallelism $p: $(elapsed "$started")s"
  cp "$WORK/err" "$WORK/restore-$name.log"
  committed "$WORK/after-$name" >"$WORK/got-$name.txt"
  if ! cmp -s "$WORK/expected.txt" "$WORK/got-$name.txt"; then
    diff "$WORK/expected.txt" "$WORK/got-$name.txt" | head -10 >&2
    fail "stop on three hosts at parallelism 3 and restore on $name at $p differs from the uninterrupted run"
  fi
}

# On one host (no [cluster]) at parallelism 2.
pipeline onhosts "$WORK/unused" "" >"$WORK/one.toml"
restore one-host "$WORK/one.toml" 2
grep -q "placement: " "$WORK/restore-one-host.log" && fail "the restore on one host was placed on hosts"

# On two hosts at parallelism 4.
pipeline onhosts "$WORK/unused" "$two_hosts" >"$WORK/two.toml"
restore two-hosts "$WORK/two.toml" 4
grep "placement: " "$WORK/restore-two-hosts.log" | sed 's/.*placement: /placement: /' | tee "$WORK/placement-two"
for host in h1 h2; do assert_contains "$WORK/placement-two" "$host: "; done
grep -q "h3: " "$WORK/placement-two" && fail "the restore on h1 and h2 placed tasks on h3"

for host in h1 h2 h3; do host_wait_only_sshd "$host" 10 || fail "processes left on $host"; done
assert_no_processes_left
echo "savepoint_hosts: ok"
