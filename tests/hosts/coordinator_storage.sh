#!/usr/bin/env bash
# [checkpoint] storage = "coordinator" (the default with hosts, SPEC §9): workers on two hosts
# whose checkpoint dir is a disk of their own (they cannot see the coordinator's) send their
# snapshot files to the coordinator, which alone writes CHECKPOINT_DIR.
#  - periodic checkpoints complete there: chk-N/_metadata and every task's .snap;
#  - --savepoint-on-exit leaves a complete savepoint there;
#  - workers stopped (SIGSTOP) mid-upload: that checkpoint is given up, none completes with a
#    file missing, and the job ends with exactly the expected records;
#  - a remote worker killed (kill -9) mid-upload of a checkpoint: the job restarts (from the
#    beginning when it was the first) and ends with exactly the expected records;
#  - `rescale` of a running job (a savepoint there, restored by workers that fetch it), then
#    `stop` (a savepoint there), then --from-savepoint of it: the two runs together write
#    exactly the expected records;
#  - a worker lost once a checkpoint has completed: the job restarts from that checkpoint,
#    fetched from the coordinator, and ends with exactly the expected records.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require

mkdir -p "$WORK/disk"
HOSTS_PRIVATE_DIRS="$WORK/disk"
hosts_up 2
CK="$WORK/disk/ck"

# Many keys, so that each snapshot is megabytes (several parts); the sink's path is shared, so
# every task runs on h1 or h2 and every snapshot travels.
pipeline() { # NAME OUT CLUSTER
  cat <<TOML
name = "$1"
parallelism = 2
$3
[checkpoint]
interval = "2s"
timeout = "30s"
dir = "$CK"
[sources.gen]
type = "generator"
profile = "counter"
count = 600000
rate = 150000
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 600000" }
[operators.per_key]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { n = "count()", s = "sum(seq)" }
[sinks.out]
type = "file"
inputs = ["per_key"]
path = "$2"
shared = true
TOML
}
cluster='[cluster]
hosts = [{ host = "h1", slots = 8 }, { host = "h2", slots = 8 }]
ssh_options = ["-F", "'"$HOSTS_SSH_CONFIG"'"]'
committed() { cat "$1"/part-* | canonical; }

# Every checkpoint or savepoint directory with a _metadata holds every file it names, and no
# .part file is left anywhere.
check_snapshots() { # ROOT
  local dir file n=0
  for dir in "$1"/chk-* "$1"/savepoint-*; do
    [[ -f $dir/_metadata ]] || continue
    n=$((n + 1))
    for file in $(grep -o 'chain-[0-9]*-subtask-[0-9]*\.snap' "$dir/_metadata" | sort -u); do
      [[ -s $dir/$file ]] || fail "$dir/_metadata names $file, which is not there"
    done
  done
  [[ -z $(find "$1" -name '*.part') ]] || fail "partial files left: $(find "$1" -name '*.part')"
  echo "$n"
}

# The hosts never saw the coordinator's checkpoint dir, and left no staging dir behind.
check_hosts_private() {
  local host
  for host in h1 h2; do
    [[ -z $(host_exec "$host" ls -A "$WORK/disk") ]] || fail "$host wrote into its own $WORK/disk: $(host_exec "$host" ls -A "$WORK/disk")"
    host_wait_only_sshd "$host" 10 || fail "processes left on $host"
  done
  compgen -G "${TMPDIR:-/tmp}/streamctl-snapshots-*" >/dev/null && fail "staging dirs left: $(ls -d "${TMPDIR:-/tmp}"/streamctl-snapshots-*)"
  return 0
}

pipeline reference "$WORK/expected" "" >"$WORK/reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/reference.toml" --set sources.gen.rate=0 --set checkpoint.interval=0
committed "$WORK/expected" >"$WORK/expected.txt"
[[ -s $WORK/expected.txt ]] || fail "the reference run committed nothing"
check_exact() { # OUT WHAT
  committed "$1" >"$1.txt"
  cmp -s "$WORK/expected.txt" "$1.txt" || { diff "$WORK/expected.txt" "$1.txt" | head -5 >&2; fail "$2: other records than the run on one host"; }
}

# 1. Periodic checkpoints on two hosts.
pipeline periodic "$WORK/periodic" "$cluster" >"$WORK/periodic.toml"
run_expect 0 "$STREAMCTL" -vv run "$WORK/periodic.toml"
assert_contains "$WORK/err" "h1: "
assert_contains "$WORK/err" "h2: "
grep -q "checkpoint [0-9]* complete" "$WORK/err" || fail "no checkpoint completed: $(grep -i checkpoint "$WORK/err" | tail -5)"
n=$(check_snapshots "$CK/periodic")
ls -l "$CK/periodic"/chk-*/ | grep snap
[[ $n -ge 1 ]] || fail "no completed checkpoint in $CK/periodic: $(ls -R "$CK/periodic")"
check_exact "$WORK/periodic" "periodic checkpoints with storage = \"coordinator\""
check_hosts_private
echo "periodic checkpoints: $n kept, complete"

# 2. A savepoint at the end of the input.
pipeline onexit "$WORK/onexit" "$cluster" >"$WORK/onexit.toml"
run_expect 0 "$STREAMCTL" -v run "$WORK/onexit.toml" --savepoint-on-exit --set checkpoint.interval=0
savepoints=$(ls -d "$CK/onexit"/savepoint-* 2>/dev/null | wc -l)
assert_eq 1 "$savepoints" "savepoints taken by --savepoint-on-exit"
[[ -f $(ls -d "$CK/onexit"/savepoint-*)/_metadata ]] || fail "the savepoint has no _metadata"
assert_eq 1 "$(check_snapshots "$CK/onexit")" "complete savepoints"
check_hosts_private
echo "savepoint on exit: complete"

# 3. `rescale` of a running job, then `stop`: both savepoints land here, the rescaled workers
# fetch theirs, and a run from the stop's savepoint finishes the job.
pipeline stopping "$WORK/stopping" "$cluster" >"$WORK/stopping.toml"
"$STREAMCTL" -v run "$WORK/stopping.toml" --set sources.gen.rate=20000 2>"$WORK/stopping.log" &
job=$!
wait_for_text "$WORK/stopping.log" "records flowing" 60
run_expect 0 "$STREAMCTL" rescale stopping --parallelism 1
wait_for_text "$WORK/stopping.log" "rescaling: restarting" 60
deadline=$((SECONDS + 60))
until [[ $(grep -c "records flowing" "$WORK/stopping.log") -ge 2 ]]; do
  ((SECONDS < deadline)) || fail "the rescaled job did not start: $(tail -5 "$WORK/stopping.log")"
  sleep 0.1
done
run_expect 0 "$STREAMCTL" stop stopping
savepoint=$(cat "$WORK/out")
[[ -f $savepoint/_metadata && $savepoint == "$CK/stopping/"* ]] || fail "stop printed '$savepoint', not a savepoint in $CK/stopping"
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code of a job on two hosts stopped with a savepoint"
assert_eq 2 "$(check_snapshots "$CK/stopping")" "complete savepoints of the rescale and the stop"
check_hosts_private
run_expect 0 "$STREAMCTL" -v run "$WORK/stopping.toml" --from-savepoint "$savepoint"
check_exact "$WORK/stopping" "a job rescaled, stopped and run again from its savepoint"
check_hosts_private
echo "rescale, stop and --from-savepoint: exact"

# Waits for a .part file of a keyed task (chain 1, whose state is megabytes) in ROOT/chk-*: an
# upload in progress. Prints its path. (Any checkpoint: on a slow build, such as the
# sanitizers', the first may be given up before its upload starts.)
await_upload() { # ROOT SECONDS
  local deadline=$((SECONDS + $2)) found
  while ((SECONDS < deadline)); do
    for found in "$1"/chk-*/chain-1-subtask-*.part; do
      [[ -e $found ]] && { echo "$found"; return 0; }
    done
  done
  return 1
}
remote_workers() {
  local h p
  for h in h1 h2; do
    for p in $(host_pids "$h"); do
      [[ $p == "${HOSTS_SSHD_PID[$h]}" ]] && continue
      tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q " worker " && echo "$p"
    done
  done
  return 0
}
# The worker among PIDS that has the staged file NAME open: the one uploading it.
uploader_of() { # NAME PIDS...
  local name=$1 p fd
  shift
  for p in "$@"; do
    for fd in /proc/"$p"/fd/*; do
      [[ $(readlink "$fd" 2>/dev/null) == */streamctl-snapshots-*/"$name" ]] && { echo "$p"; return 0; }
    done
  done
  return 1
}

# 4. Every remote worker stopped mid-upload for longer than [checkpoint] timeout (8 s here;
# 30 s elsewhere, for the megabytes a slow build, such as the sanitizers', uploads).
pipeline stopped "$WORK/stopped" "$cluster" >"$WORK/stopped.toml"
"$STREAMCTL" -vv run "$WORK/stopped.toml" --set checkpoint.timeout=8s >"$WORK/stopped.out" 2>"$WORK/stopped.log" &
job=$!
# The pids first, so that the stop follows the sight of the upload at once.
wait_for_text "$WORK/stopped.log" "records flowing" 60
pids=$(remote_workers)
[[ -n $pids ]] || fail "no remote worker found"
part=$(await_upload "$CK/stopped" 60) || fail "no upload seen: $(tail -5 "$WORK/stopped.log")"
kill -STOP $pids
echo "stopped $(echo $pids | wc -w) remote worker(s) while $part was arriving"
id=$(basename "$(dirname "$part")")
id=${id#chk-}
wait_for_text "$WORK/stopped.log" "checkpoint $id failed" 30
kill -CONT $pids
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code of the job whose workers were stopped mid-upload"
[[ -e $CK/stopped/chk-$id ]] && fail "the given-up chk-$id is still there"
check_snapshots "$CK/stopped" >/dev/null
check_exact "$WORK/stopped" "workers stopped mid-upload"
check_hosts_private
echo "SIGSTOP mid-upload: checkpoint $id given up, output exact"

# 5. A remote worker killed mid-upload of a checkpoint: a restart (from the beginning when it
# was the first). An upload can end between the sight of its .part file and the stop of the
# workers (CI saw it): then the next checkpoint's upload is tried, the job made slow enough to
# take several.
pipeline killed "$WORK/killed" "$cluster" >"$WORK/killed.toml"
"$STREAMCTL" -vv run "$WORK/killed.toml" --set sources.gen.rate=50000 >"$WORK/killed.out" 2>"$WORK/killed.log" &
job=$!
wait_for_text "$WORK/killed.log" "records flowing" 60
pids=$(remote_workers)
victim=""
for attempt in 1 2 3 4 5; do
  part=$(await_upload "$CK/killed" 60) || fail "no upload seen: $(tail -5 "$WORK/killed.log")"
  # Every remote worker holds still while the one uploading is found (its staged file is open).
  kill -STOP $pids
  name=$(basename "$part" .part)
  victim=$(uploader_of "$name" $pids) && break
  kill -CONT $pids
  echo "attempt $attempt: the upload of $name ended before it could be caught"
  while [[ -e $part ]]; do sleep 0.05; done
done
[[ -n $victim ]] || fail "no upload could be caught in $attempt attempts"
kill -9 "$victim"
kill -CONT $pids
echo "killed remote worker $victim while $part was arriving"
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code of the job whose worker was killed mid-upload ($(grep -i 'restart\|fail' "$WORK/killed.log" | tail -3))"
assert_contains "$WORK/killed.log" "restarting the job"
check_snapshots "$CK/killed" >/dev/null
check_exact "$WORK/killed" "a worker killed mid-upload"
check_hosts_private

# 6. A worker lost once a checkpoint has completed: the job restarts from that checkpoint,
# which the new workers fetch from the coordinator.
pipeline late "$WORK/late" "$cluster" >"$WORK/late.toml"
"$STREAMCTL" -vv run "$WORK/late.toml" --set sources.gen.rate=20000 >/dev/null 2>"$WORK/late.log" &
job=$!
wait_for_text "$WORK/late.log" "checkpoint 1 complete" 60
kill -9 $(remote_workers | head -1)
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code of a job that lost a worker after a checkpoint ($(tail -3 "$WORK/late.log"))"
assert_contains "$WORK/late.log" "from $CK/late/chk-"
check_exact "$WORK/late" "a job restarted from a checkpoint on the coordinator"
for host in h1 h2; do host_wait_only_sshd "$host" 10 || fail "processes left on $host"; done
assert_no_processes_left
echo "coordinator_storage: ok"
