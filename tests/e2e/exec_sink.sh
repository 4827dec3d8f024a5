# The exec sink with real commands: lines reach the command's stdin exactly; its own output goes
# to stderr prefixed by the node, never to the job's stdout; a command that exits 1 or cannot
# start fails the job naming the node and the status; and with checkpoints, kill -9 of the
# worker loses no record (the command drains its pipe; the restart resends what came after the
# checkpoint, with the same sequence numbers).
source "$(dirname "$0")/lib/common.bash"

pipeline() { # NAME COUNT RATE COMMAND EXTRA
  cat <<TOML
name = "$1"
[sources.gen]
type = "generator"
profile = "counter"
count = $2
rate = $3
[sinks.out]
type = "exec"
inputs = ["gen"]
command = $4
${5:-}
TOML
}

cat >"$WORK/reference.toml" <<TOML
name = "reference"
[sources.gen]
type = "generator"
profile = "counter"
count = 3000
[sinks.out]
type = "stdout"
inputs = ["gen"]
TOML
"$STREAMCTL" run "$WORK/reference.toml" >"$WORK/expected"

# Exact lines; the command's stdout and stderr reach the job's stderr as "[out] ...".
pipeline exact 3000 0 "[\"sh\", \"-c\", \"echo starting; echo warned >&2; cat > '$WORK/exact.out'\"]" >"$WORK/exact.toml"
run_expect 0 "$STREAMCTL" run "$WORK/exact.toml"
cmp "$WORK/expected" "$WORK/exact.out" || fail "the command did not get exactly the generator's lines"
assert_contains "$WORK/err" "[out] starting"
assert_contains "$WORK/err" "[out] warned"
[[ ! -s "$WORK/out" ]] || fail "the command's output reached the job's stdout"

# A command that exits 1 at the end of input fails the job (exit 1), naming the node and the
# status. (Without checkpoints the job's final output is not retried: coordinator.cpp finish.)
pipeline failing 100 0 '["sh", "-c", "cat > /dev/null; exit 1"]' >"$WORK/failing.toml"
run_expect 1 "$STREAMCTL" run "$WORK/failing.toml"
assert_contains "$WORK/err" "sink 'out': the command (sh -c 'cat > /dev/null; exit 1') exited with status 1"

# With checkpoints the same failure restarts the job from its final checkpoint, which sends
# the new instance of the command nothing; it fails again until [restart] gives up.
pipeline failing 100 0 '["sh", "-c", "cat > /dev/null; exit 1"]' \
  $'[checkpoint]\ninterval = "100ms"\ndir = "'"$WORK/ck"$'"\n[restart]\nstrategy = "fixed"\ndelay = "10ms"\nmax_attempts = 1' \
  >"$WORK/failing_checkpointed.toml"
run_expect 1 "$STREAMCTL" run "$WORK/failing_checkpointed.toml"
assert_contains "$WORK/err" "restarting the job (attempt 1 of 1)"
assert_contains "$WORK/err" "sink 'out': the command (sh -c 'cat > /dev/null; exit 1') exited with status 1"

# A command that stops reading mid-stream (EPIPE) fails the job too, which restarts per
# [restart] and then fails.
pipeline quitter 200000 0 '["sh", "-c", "head -n 1 > /dev/null; exit 3"]' \
  $'[restart]\nstrategy = "fixed"\ndelay = "10ms"\nmax_attempts = 1' >"$WORK/quitter.toml"
run_expect 1 "$STREAMCTL" run "$WORK/quitter.toml"
assert_contains "$WORK/err" "sink 'out': the command (sh -c 'head -n 1 > /dev/null; exit 3') stopped reading its input"
assert_contains "$WORK/err" "exited with status 3"
assert_contains "$WORK/err" "restarting the job"

# A command that does not exist.
pipeline missing 10 0 '["no-such-command-for-streamctl"]' $'[restart]\nstrategy = "none"' >"$WORK/missing.toml"
run_expect 1 "$STREAMCTL" run "$WORK/missing.toml"
assert_contains "$WORK/err" "sink 'out': cannot run 'no-such-command-for-streamctl': No such file or directory"

# Validation: an empty command, with its position.
pipeline empty 10 0 '[]' >"$WORK/empty.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/empty.toml"
assert_contains "$WORK/err" "$WORK/empty.toml:10:11: sink 'out': \`command\` needs at least the program"

# kill -9 of the worker running the sink, twice, with checkpoints: every record reaches some
# instance of the command (each writes a file of its own); a record repeats only with the
# same sequence number, and only what came after a checkpoint repeats.
pipeline killed 30000 10000 "[\"sh\", \"-c\", \"exec cat > $WORK/killed-out/\$\$\"]" \
  $'sequence_field = "sn"\n[checkpoint]\ninterval = "200ms"\ndir = "'"$WORK/ck"$'"\n[restart]\nstrategy = "fixed"\ndelay = "50ms"\nmax_attempts = 10' \
  >"$WORK/killed.toml"
mkdir "$WORK/killed-out"
"$STREAMCTL" -v run "$WORK/killed.toml" >"$WORK/killed.stdout" 2>"$WORK/killed.log" &
job=$!
wait_for_text "$WORK/killed.log" "records flowing"
for _ in 1 2; do
  sleep 0.8
  victim=$(pgrep -f -- "worker --job-dir $STREAMCTL_STATE_DIR" | head -n 1 || true)
  [[ -n $victim ]] && kill -9 "$victim"
done
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit status of a job whose sink's worker was killed ($(tail -3 "$WORK/killed.log"))"
restarts=$(grep -c "restarting the job" "$WORK/killed.log" || true)
[[ $restarts -ge 1 ]] || fail "the kills did not land"
sleep 0.5 # the killed workers' commands drain their pipes
cat "$WORK"/killed-out/* >"$WORK/killed.all"
python3 - "$WORK/killed.all" 30000 <<'PY' || fail "records were lost or numbered inconsistently after kill -9"
import json, sys
by_sn, lines = {}, 0
for line in open(sys.argv[1]):
    if not line.endswith("\n"):
        continue  # a command killed mid-write: a cut last line
    lines += 1
    r = json.loads(line)
    sn = r.pop("sn")
    assert by_sn.setdefault(sn, r) == r, f"sn {sn} numbers two records: {by_sn[sn]} and {r}"
seqs = sorted(r["seq"] for r in by_sn.values())
assert seqs == list(range(int(sys.argv[2]))), f"{len(seqs)} distinct records, expected {sys.argv[2]}"
print(f"{lines} lines, {lines - len(by_sn)} repeated")
PY
[[ ! -s "$WORK/killed.stdout" ]] || fail "the exec sink wrote to the job's stdout"
echo "killed the sink's worker; the job restarted $restarts time(s)"
assert_no_processes_left
echo ok
