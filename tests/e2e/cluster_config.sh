# [cluster], node host/shared and [checkpoint] storage (SPEC §9, issue 8) as `validate`, `graph`
# and `run` see them before anything starts: every problem at its FILE:LINE:COL with exit 2, and
# the placement `graph` shows. No host is contacted.
source "$(dirname "$0")/lib/common.bash"

# pipeline CLUSTER_TOML [EXTRA_KEYS_OF_OK]: stdin -> ok (filter, parallelism 4) -> stdout.
pipeline() {
  cat <<TOML
name = "c"
[sources.in]
type = "stdin"
[operators.ok]
type = "filter"
inputs = ["in"]
where = "true"
parallelism = 4
${2:-}
[sinks.out]
type = "stdout"
inputs = ["ok"]
${1:-}
TOML
}

# check_error FILE LINE:COL TEXT: validate and run both refuse it, run registers no job.
check_error() {
  local file=$1 position=$2 text=$3
  run_expect 2 "$STREAMCTL" validate "$file"
  assert_contains "$WORK/err" "$file:$position: $text"
  run_expect 2 "$STREAMCTL" run "$file" </dev/null
  assert_contains "$WORK/err" "$file:$position: $text"
  [[ ! -d "$STREAMCTL_STATE_DIR/jobs" ]] || fail "a job was registered for an invalid pipeline"
}

pipeline '[cluster]
launcher = "agent"' >"$WORK/agent.toml"
check_error "$WORK/agent.toml" 14:12 'launcher = "agent" is not supported now'

pipeline '[cluster]
launcher = "pbs"' >"$WORK/unknown_launcher.toml"
check_error "$WORK/unknown_launcher.toml" 14:12 "'cluster.launcher' must be one of local, ssh, slurm; got 'pbs'"

pipeline '[cluster]
launcher = "ssh"' >"$WORK/ssh_without_hosts.toml"
check_error "$WORK/ssh_without_hosts.toml" 14:12 'launcher = "ssh" needs '"'hosts'"

pipeline '[cluster]
launcher = "local"
hosts = ["w1"]' >"$WORK/local_with_hosts.toml"
check_error "$WORK/local_with_hosts.toml" 15:9 "'hosts' is not used with launcher = \"local\""

pipeline '[cluster]
hosts = ["w1", { host = "w2", slots = 0 }, "ops@w1"]' >"$WORK/hosts.toml"
check_error "$WORK/hosts.toml" 14:39 "'cluster.hosts[1].slots' must be at least 1, got 0"
check_error "$WORK/hosts.toml" 14:44 "host 'w1' is listed twice in [cluster] hosts"

pipeline '[cluster]
hosts = ["w1", "ops@w2"]' 'host = "w3"' >"$WORK/unknown_pin.toml"
check_error "$WORK/unknown_pin.toml" 9:8 "unknown host 'w3' in 'host' of operator 'ok'"

pipeline '[cluster]
hosts = ["w1"]
[checkpoint]
storage = "nfs"' 'shared = true' >"$WORK/shared_storage.toml"
check_error "$WORK/shared_storage.toml" 9:10 "'shared' is only for nodes that read or write files"
check_error "$WORK/shared_storage.toml" 16:11 "'checkpoint.storage' must be one of coordinator, shared"

# host on stdin: it reads the coordinator's terminal.
pipeline '[cluster]
hosts = ["w1"]' | sed 's/^type = "stdin"$/type = "stdin"\nhost = "w1"/' >"$WORK/stdin_pin.toml"
check_error "$WORK/stdin_pin.toml" 4:8 "source 'in' (stdin) reads the terminal of \`streamctl run\`"

# The placement: ok's 4 subtasks spread over 2 hosts of 2 slots; stdin and stdout stay home.
pipeline '[cluster]
hosts = [{ host = "w1", slots = 2 }, { host = "ops@w2", slots = 2 }]
encrypt = false' >"$WORK/placed.toml"
run_expect 0 "$STREAMCTL" validate "$WORK/placed.toml"
run_expect 0 "$STREAMCTL" graph "$WORK/placed.toml"
assert_contains "$WORK/out" 'placement: launcher "ssh", checkpoint storage "coordinator", links between hosts NOT encrypted (encrypt = false)'
assert_contains "$WORK/out" "    w1      2 task(s) of 2 slot(s)"
assert_contains "$WORK/out" "    ops@w2  2 task(s) of 2 slot(s)"
assert_contains "$WORK/out" "chain 0 (in): on the coordinator's host (stdin source 'in' reads the coordinator's terminal)"
assert_contains "$WORK/out" "chain 1 (ok): spread: w1 tasks 1, 3; ops@w2 tasks 2, 4"
assert_contains "$WORK/out" "on the coordinator's host: 2 task(s), taking no slot of the hosts"
run_expect 0 "$STREAMCTL" graph "$WORK/placed.toml" --format dot
assert_contains "$WORK/out" 'label="chain 1 x4\non w1 x2, ops@w2 x2";'
run_expect 0 "$STREAMCTL" graph "$WORK/placed.toml" --format json
python3 - "$WORK/out" <<'PY' || fail "graph json placement is wrong: $(cat "$WORK/out")"
import json, sys
g = json.load(open(sys.argv[1]))
hosts = [t["host"] for t in g["tasks"]]
assert hosts == ["localhost", "w1", "ops@w2", "w1", "ops@w2", "localhost"], hosts
p = g["placement"]
assert p["launcher"] == "ssh" and p["checkpoint_storage"] == "coordinator" and p["encrypt"] is False, p
assert p["hosts"] == [{"name": "w1", "slots": 2}, {"name": "ops@w2", "slots": 2}], p
assert p["error"] is None
assert [c["placement"] for c in g["chains"]] == ["coordinator", "spread", "coordinator"], g["chains"]
PY

# Too few slots: graph shows the plan and why it cannot be placed, exit 2; validate refuses it.
"$STREAMCTL" graph "$WORK/placed.toml" --set operators.ok.parallelism=8 >"$WORK/out" 2>"$WORK/err" && fail "graph placed 8 tasks on 4 slots"
assert_contains "$WORK/out" "physical plan:"
assert_contains "$WORK/out" "cannot place the job: not enough slots: the job needs 8 on its hosts"
assert_contains "$WORK/err" "w1 2, ops@w2 2. Give the hosts more slots"
run_expect 2 "$STREAMCTL" validate "$WORK/placed.toml" --set operators.ok.parallelism=8
assert_contains "$WORK/err" "cannot place the job: not enough slots: the job needs 8 on its hosts"

# A host without slots: placed as if large enough, and said so.
pipeline '[cluster]
hosts = ["w1"]' >"$WORK/no_slots.toml"
run_expect 0 "$STREAMCTL" graph "$WORK/no_slots.toml" --set operators.ok.parallelism=8
assert_contains "$WORK/out" "w1  8 task(s); slots not given: its core count, read at run time"

# Without [cluster], placement is what it always was.
pipeline '' >"$WORK/local.toml"
run_expect 0 "$STREAMCTL" graph "$WORK/local.toml"
assert_contains "$WORK/out" "placement: every task on this host"

# The example with [cluster] validates and places.
run_expect 0 "$STREAMCTL" graph "$SOURCE_DIR/examples/page_views_on_hosts.toml"
assert_contains "$WORK/out" "chain 0 (clicks -> ok): spread:"
echo ok
