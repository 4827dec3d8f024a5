# stdout that cannot be written (/dev/full: ENOSPC) ends the job with exit 1 and a message, with
# or without checkpoints. Before this test, with checkpoints the last output is published after
# the coordinator releases the workers, and a sink that failed then was not noticed: exit 0
# with nothing written (found by the chaos suite's diskfull scenario).
source "$(dirname "$0")/lib/common.bash"

pipeline() {
  cat <<TOML
name = "full"
[sources.in]
type = "generator"
profile = "counter"
count = 50000
[sinks.out]
type = "stdout"
inputs = ["in"]
$1
TOML
}
pipeline "" >"$WORK/plain.toml"
# With checkpoints the last output is published after a final checkpoint, and a sink that
# fails then is restarted from it per [restart] (here: not at all).
pipeline $'[checkpoint]\ninterval = "10s"\n[restart]\nstrategy = "none"' >"$WORK/checkpointed.toml"

for job in plain checkpointed; do
  set +e
  "$STREAMCTL" run "$WORK/$job.toml" >/dev/full 2>"$WORK/err"
  code=$?
  set -e
  assert_eq 1 "$code" "exit status of the $job job writing to /dev/full"
  assert_contains "$WORK/err" "No space left on device"
  if [[ $job == checkpointed ]]; then assert_contains "$WORK/err" "before it had published the job's final output"; fi
done
assert_no_processes_left
