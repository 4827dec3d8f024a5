#!/usr/bin/env bash
# Savepoints stay relocatable across hosts (SPEC §9): a keyed job on three hosts is stopped
# with a savepoint half-way, then restored on one host (no [cluster]) and on two hosts, each
# at another parallelism; each restore commits, together with what the stopped job committed,
# exactly what an uninterrupted run on one host commits. Twice: with [checkpoint] storage =
# "shared" (a dir every host sees), and with "coordinator" (the default with hosts), where the
# hosts cannot see the checkpoint dir: the savepoint travels to the coordinator, and the
# workers of the restore on two hosts fetch it from there.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
mkdir -p "$WORK/private"
HOSTS_PRIVATE_DIRS="$WORK/private"
hosts_up 3

STORAGE=shared
ck_root() { if [[ $STORAGE == coordinator ]]; then echo "$WORK/private/ck"; else echo "$WORK/ck"; fi; }
pipeline() { # NAME OUT CLUSTER
  cat <<TOML
name = "$1"
parallelism = 2
$3
[checkpoint]
interval = "300ms"
dir = "$(ck_root)"
storage = "$STORAGE"
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
TOML
}
cluster() { # HOST...
  local list="" h
  for h in "$@"; do list+="${list:+, }{ host = \"$h\", slots = 8 }"; done
  printf '[cluster]\nhosts = [%s]\nssh_options = ["-F", "%s"]\n' "$list" "$HOSTS_SSH_CONFIG"
}
committed() { cat "$1"/part-* | canonical; }

pipeline reference "$WORK/expected" "" >"$WORK/reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/reference.toml" --set sources.gen.rate=0 --set checkpoint.interval=0
committed "$WORK/expected" >"$WORK/expected.txt"

scenario() { # STORAGE
  STORAGE=$1
  rm -rf "$WORK/before" "$WORK"/after-* "$(ck_root)"
  pipeline stopped "$WORK/before" "$(cluster h1 h2 h3)" >"$WORK/three.toml"
  "$STREAMCTL" -v run "$WORK/three.toml" --set sources.gen.rate=4000 2>"$WORK/run.log" &
  pid=$!
  wait_for_text "$WORK/run.log" "records flowing" 60
  assert_contains "$WORK/run.log" "h3: "
  sleep 1
  run_expect 0 "$STREAMCTL" stop stopped
  savepoint=$(cat "$WORK/out")
  [[ -f $savepoint/_metadata ]] || fail "stop printed '$savepoint', not a savepoint"
  set +e; wait $pid; code=$?; set -e
  assert_eq 0 "$code" "exit code of a job on three hosts stopped with a savepoint"
  before=$(cat "$WORK/before"/part-* | wc -l)
  [[ $before -gt 0 && $before -lt $(wc -l <"$WORK/expected.txt") ]] || fail "the stop committed $before records: not half-way"

  # On one host at parallelism 3, and on two hosts at parallelism 1 and 4.
  pipeline stopped "$WORK/unused" "" >"$WORK/one.toml"
  pipeline stopped "$WORK/unused" "$(cluster h1 h2)" >"$WORK/two.toml"
  for run in one:3 two:1 two:4; do
    file=${run%:*} p=${run#*:}
    cp -a "$WORK/before" "$WORK/after-$file-$p"
    run_expect 0 "$STREAMCTL" -v run "$WORK/$file.toml" --from-savepoint "$savepoint" -p "$p" \
      --set sources.gen.rate=0 --set sinks.out.path="$WORK/after-$file-$p"
    [[ $file == two ]] && { assert_contains "$WORK/err" "h2: "; grep -q "h3: " "$WORK/err" && fail "h3 was not in the job"; }
    committed "$WORK/after-$file-$p" >"$WORK/got-$file-$p.txt"
    if ! cmp -s "$WORK/expected.txt" "$WORK/got-$file-$p.txt"; then
      diff "$WORK/expected.txt" "$WORK/got-$file-$p.txt" | head -10 >&2
      fail "stop on three hosts and restore on $file host(s) at parallelism $p differs from the uninterrupted run"
    fi
    echo "storage $STORAGE: restored on $file host(s) at parallelism $p: exact"
  done
  for host in h1 h2 h3; do
    host_wait_only_sshd "$host" 10 || fail "processes left on $host: $(host_pids "$host")"
    [[ -z $(host_exec "$host" ls -A "$WORK/private") ]] || fail "$host wrote into its own $WORK/private"
  done
  assert_no_processes_left
}

scenario shared
scenario coordinator
echo "savepoint_hosts: ok"
