#!/usr/bin/env bash
# `streamctl top JOB`: one plain frame with --once or when stdout is not a terminal; a live
# view on a terminal (a pty from script(1)) that quits on "q" and ends, exit 0, with the final
# frame when the job stops; on an ended job, the final figures once; on an unknown job, the
# error and exit code of `status`.
source "$(dirname "$0")/lib/common.bash"
command -v script >/dev/null || { echo "top: script(1) is not installed; skipped" >&2; exit 77; }

cat >"$WORK/p.toml" <<TOML
name = "slowtop"
parallelism = 2
[sources.gen]
type = "generator"
profile = "counter"
rate = 2000
[operators.even]
type = "filter"
inputs = ["gen"]
where = "seq % 2 == 0"
[sinks.out]
type = "file"
inputs = ["even"]
path = "$WORK/committed"
parallelism = 1
TOML

# wait_exit PID SECONDS: the exit code of background job PID, which must end within SECONDS.
wait_exit() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || { kill "$1"; cat "$WORK/live" >&2 || true; fail "top did not exit within $2 s"; }
    sleep 0.1
  done
  wait "$1"
}

# top on a terminal: script(1) gives it a pty and passes on what the fifo $WORK/keys says.
# The state dir in its command line lets cleanup's pkill find it.
start_live_top() {
  rm -f "$WORK/keys"
  mkfifo "$WORK/keys"
  script -qfec "$STREAMCTL --state-dir $STREAMCTL_STATE_DIR top --interval 0.2 $id" /dev/null \
    <"$WORK/keys" >"$WORK/live" 2>&1 &
  script_pid=$!
  exec 3>"$WORK/keys"
  wait_for_text "$WORK/live" "(q quits)"
}

# An unknown job: what status says, with its exit code.
set +e
"$STREAMCTL" status nosuchjob >/dev/null 2>"$WORK/status-err"
status_code=$?
set -e
run_expect "$status_code" "$STREAMCTL" top nosuchjob
assert_eq "$(cat "$WORK/status-err")" "$(cat "$WORK/err")" "top's error for an unknown job"

run_expect 0 "$STREAMCTL" -v run "$WORK/p.toml" --detach
id=$(cat "$WORK/out")
wait_for_text "$STREAMCTL_STATE_DIR/jobs/$id/log" "records flowing"
sleep 1.5 # a heartbeat or two, so that there are counts

# --once, and stdout not a terminal: one frame naming every node's subtasks, no escape codes.
for args in "--once" ""; do
  run_expect 0 timeout 20 "$STREAMCTL" top $args "$id"
  assert_contains "$WORK/out" "job $id (slowtop): running"
  for row in "gen[0]" "gen[1]" "even[0]" "even[1]" "out[0]"; do assert_contains "$WORK/out" "$row"; done
  ! grep -q $'\x1b' "$WORK/out" || fail "top $args wrote terminal codes to a file"
  assert_eq 1 "$(grep -c '^job ' "$WORK/out")" "frames printed by top $args"
done

# On a terminal: "q" quits, exit 0.
start_live_top
printf q >&3
set +e; wait_exit $script_pid 10; code=$?; set -e
exec 3>&-
assert_eq 0 "$code" "exit code of top quit with q"
assert_contains "$WORK/live" $'\x1b[H'
assert_contains "$WORK/live" "gen[1]"

# The job stops while top runs: the final frame, exit 0.
start_live_top
run_expect 0 "$STREAMCTL" stop --drain "$id"
set +e; wait_exit $script_pid 30; code=$?; set -e
exec 3>&-
assert_eq 0 "$code" "exit code of top when its job stopped"
grep -qE "job $id \\(slowtop\\): (finished|stopped)" "$WORK/live" || { cat "$WORK/live" >&2; fail "top's last frame does not show the job ended"; }

# On the ended job: the final figures once.
run_expect 0 timeout 20 "$STREAMCTL" top "$id"
grep -qE "job $id \\(slowtop\\): (finished|stopped)" "$WORK/out" || fail "top on an ended job: $(cat "$WORK/out")"
assert_eq 1 "$(grep -c '^job ' "$WORK/out")" "frames printed by top on an ended job"
assert_no_processes_left
echo ok
