# Housekeeping of the state dir (issue 11): `list` shows the running jobs and the 20 newest
# others by default (--all, --running, --name), a job name picks its running job, else the
# newest, and `prune` removes ended jobs' directories by the end time in their job.json, never
# a running job or one whose coordinator is alive.
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/tiny.toml" <<TOML
name = "tiny"
[sources.gen]
type = "generator"
profile = "counter"
count = 10
[sinks.out]
type = "stdout"
inputs = ["gen"]
TOML
sed 's/^name = "tiny"/name = "other"/' "$WORK/tiny.toml" >"$WORK/other.toml"
sed 's/^count = 10$/rate = 100/' "$WORK/tiny.toml" >"$WORK/endless.toml"
jobs_dir=$STREAMCTL_STATE_DIR/jobs

# run_job FILE: runs a bounded job to its end; its id goes to the array `ids`, in run order.
ids=()
# (A set difference, not comm(1): comm needs both lists sorted in its own collation, and
# CI once got an empty id from it.)
run_job() {
  local -A before=()
  local id new=()
  for id in $(ls "$jobs_dir" 2>/dev/null); do before[$id]=1; done
  run_expect 0 "$STREAMCTL" run "$1"
  assert_eq 10 "$(wc -l <"$WORK/out")" "records of $1"
  for id in $(ls "$jobs_dir"); do [[ -n "${before[$id]:-}" ]] || new+=("$id"); done
  ((${#new[@]} == 1)) || fail "running $1 registered ${#new[@]} new jobs: ${new[*]:-none}"
  ids+=("${new[0]}")
}
# set_times ID STARTED_AGO ENDED_AGO (seconds before now): what job.json records, so that
# ages and order do not depend on how fast the jobs ran.
set_times() {
  python3 - "$jobs_dir/$1/job.json" "$2" "$3" <<'PY'
import json, sys, time
path, started, ended = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
stamp = lambda ago: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - ago))
job = json.load(open(path))
job["started"], job["updated"] = stamp(started), stamp(ended)
json.dump(job, open(path + ".tmp", "w"), indent=2)
PY
  mv "$jobs_dir/$1/job.json.tmp" "$jobs_dir/$1/job.json"
}
# forge ID_FROM NEW_ID STATE: a copy of a job's entry in STATE whose coordinator is this
# shell (alive), standing for a job that another streamctl still drives.
forge() {
  cp -r "$jobs_dir/$1" "$jobs_dir/$2"
  python3 - "$jobs_dir/$2/job.json" "$2" "$3" "$$" <<'PY'
import json, sys
path, new_id, state, pid = sys.argv[1:]
job = json.load(open(path))
job.update(id=new_id, state=state, coordinator_pid=int(pid))
json.dump(job, open(path, "w"), indent=2)
PY
}
day=86400

run_job "$WORK/other.toml"
run_job "$WORK/other.toml"
for _ in $(seq 22); do run_job "$WORK/tiny.toml"; done
# other: 10 and 9 days ago; tiny: 12 of them 3 days ago, 10 of them an hour ago.
set_times "${ids[0]}" $((10 * day + 5)) $((10 * day))
set_times "${ids[1]}" $((9 * day + 5)) $((9 * day))
for k in $(seq 2 23); do
  if ((k < 14)); then set_times "${ids[$k]}" $((3 * day + 100 - k)) $((3 * day)); else set_times "${ids[$k]}" $((3700 - k)) 3600; fi
done

# A running job named tiny too, made to look old: running, so never pruned.
run_expect 0 "$STREAMCTL" -v run "$WORK/endless.toml" --detach
running=$(cat "$WORK/out")
wait_for_text "$jobs_dir/$running/log" "records flowing"
set_times "$running" $((30 * day)) $((30 * day))
forge "${ids[2]}" tiny-alive-finished finished
set_times tiny-alive-finished $((20 * day)) $((20 * day))

# list: 26 jobs; by default the running one and the 20 newest others (tiny-alive-finished
# reads as finished, and is among the 5 oldest).
run_expect 0 "$STREAMCTL" list
assert_eq 22 "$(wc -l <"$WORK/out")" "lines of list (a header and 21 jobs)"
assert_eq "(5 older jobs not shown; list --all)" "$(cat "$WORK/err")" "list's note"
grep -qF "${ids[0]}" "$WORK/out" && fail "the oldest job is listed by default"
assert_contains "$WORK/out" "$running"
assert_contains "$WORK/out" "${ids[23]}"
run_expect 0 "$STREAMCTL" list --all
assert_eq 27 "$(wc -l <"$WORK/out")" "lines of list --all"
assert_eq "" "$(cat "$WORK/err")" "list --all hides nothing"
run_expect 0 "$STREAMCTL" list --running --json
assert_eq 1 "$(wc -l <"$WORK/out")" "jobs of list --running"
assert_contains "$WORK/out" "\"id\":\"$running\""
run_expect 0 "$STREAMCTL" list --name other --json
assert_eq 2 "$(wc -l <"$WORK/out")" "jobs of list --name other"
run_expect 2 "$STREAMCTL" list --running --all

# A name picks its running job, else the newest one; two running ones are an error.
run_expect 0 "$STREAMCTL" status tiny --json
assert_contains "$WORK/out" "\"id\":\"$running\""
run_expect 0 "$STREAMCTL" status other --json
assert_contains "$WORK/out" "\"id\":\"${ids[1]}\""
forge "${ids[3]}" tiny-alive-running running
run_expect 2 "$STREAMCTL" status tiny
assert_contains "$WORK/err" "several running jobs are named 'tiny'"
assert_contains "$WORK/err" "tiny-alive-running"
rm -r "${jobs_dir:?}/tiny-alive-running"

# prune: by the end time, default 7 days; --dry-run removes nothing.
run_expect 0 "$STREAMCTL" prune --dry-run
assert_contains "$WORK/err" "would remove ${ids[0]} (finished"
assert_contains "$WORK/err" "would remove 2 jobs that ended more than 7d ago"
[[ -d $jobs_dir/${ids[0]} ]] || fail "prune --dry-run removed a job"
run_expect 0 "$STREAMCTL" prune --older-than 2d
assert_contains "$WORK/err" "removed 14 jobs that ended more than 2d ago"
[[ -d $jobs_dir/${ids[13]} || -d $jobs_dir/${ids[0]} ]] && fail "prune left a job that ended 3 days ago"
[[ -d $jobs_dir/${ids[14]} ]] || fail "prune removed a job that ended an hour ago"
run_expect 2 "$STREAMCTL" prune --older-than 3x
assert_contains "$WORK/err" "bad duration '3x'"
run_expect 0 "$STREAMCTL" prune --older-than 30m
assert_contains "$WORK/err" "removed 10 jobs"
run_expect 0 "$STREAMCTL" list --all --json
assert_eq 2 "$(wc -l <"$WORK/out")" "jobs left after pruning"
assert_contains "$WORK/out" "\"id\":\"$running\""
assert_contains "$WORK/out" '"id":"tiny-alive-finished"'

# savepoint delete: only a savepoint directory with its _metadata; exit 2 for anything else.
run_expect 0 "$STREAMCTL" savepoint "$running" --dir "$WORK/sp"
savepoint=$(cat "$WORK/out")
[[ -f $savepoint/_metadata ]] || fail "no savepoint at '$savepoint'"
run_expect 2 "$STREAMCTL" savepoint delete "$WORK/sp"
assert_contains "$WORK/err" "is not a savepoint directory"
mkdir "$WORK/sp/savepoint-fake"
run_expect 2 "$STREAMCTL" savepoint delete "$WORK/sp/savepoint-fake"
run_expect 0 "$STREAMCTL" savepoint delete "$savepoint/"
[[ -e $savepoint ]] && fail "savepoint delete left '$savepoint'"
run_expect 2 "$STREAMCTL" savepoint

run_expect 0 "$STREAMCTL" cancel "$running"
for _ in $(seq 100); do
  grep -q '"state": "cancelled"' "$jobs_dir/$running/job.json" && break
  sleep 0.1
done
assert_contains "$jobs_dir/$running/job.json" '"state": "cancelled"'
assert_no_processes_left
echo ok
