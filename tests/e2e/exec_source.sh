# The exec source (issue 11): a command's stdout lines are the records and its exit status 0
# ends the input; its stderr reaches the job's log under the node's name; a non-zero exit
# fails the job with a message naming the node and the status.
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/gen.py" <<'PY'
import sys
n = int(sys.argv[1])
for i in range(n):
    print('{"i":%d}' % i)
print("generated", n, file=sys.stderr)
PY
cat >"$WORK/ok.toml" <<TOML
name = "exec_ok"
[sources.gen]
type = "exec"
command = ["python3", "gen.py", "25000"] # relative to the pipeline file's directory
[sinks.out]
type = "stdout"
inputs = ["gen"]
TOML
run_expect 0 "$STREAMCTL" run "$WORK/ok.toml"
assert_eq 25000 "$(wc -l <"$WORK/out")" "records from a command printing 25000 lines"
python3 -c 'print("\n".join("{\"i\": %d}" % i for i in range(25000)))' | canonical >"$WORK/expected.txt"
canonical <"$WORK/out" | cmp -s - "$WORK/expected.txt" || fail "the records differ from the command's lines"
assert_contains "$WORK/err" "exec source 'gen': generated 25000"

# The same with checkpoints: through the spool, the same records.
sed 's/^name = "exec_ok"$/name = "exec_ck"\n[checkpoint]\ninterval = "100ms"\ndir = "'"${WORK//\//\\/}"'\/ck"/' \
  "$WORK/ok.toml" >"$WORK/ck.toml"
run_expect 0 "$STREAMCTL" run "$WORK/ck.toml"
canonical <"$WORK/out" | cmp -s - "$WORK/expected.txt" || fail "with checkpoints, the records differ"

cat >"$WORK/bad.toml" <<TOML
name = "exec_bad"
[restart]
strategy = "none"
[sources.gen]
type = "exec"
command = ["sh", "-c", "echo '{\"i\":1}'; echo 'about to fail' >&2; exit 3"]
[sinks.out]
type = "stdout"
inputs = ["gen"]
TOML
run_expect 1 "$STREAMCTL" run "$WORK/bad.toml"
assert_contains "$WORK/err" "source 'gen'"
assert_contains "$WORK/err" "exited with status 3"
assert_contains "$WORK/err" "bad.toml:6:"
assert_contains "$WORK/err" "exec source 'gen': about to fail"

# With a [restart] strategy, the failure restarts the job (the command runs again) until the
# strategy gives up.
sed 's/^strategy = "none"$/strategy = "fixed"\ndelay = "50ms"\nmax_attempts = 2/' "$WORK/bad.toml" >"$WORK/retried.toml"
run_expect 1 "$STREAMCTL" -vv run "$WORK/retried.toml"
assert_eq 2 "$(grep -c "restarting the job" "$WORK/err" || true)" "restarts after exit status 3"
assert_eq 3 "$(grep -c "exec source 'gen': about to fail" "$WORK/err" || true)" "runs of the command"

# A command key missing is a validation error at the node.
printf 'name = "x"\n[sources.gen]\ntype = "exec"\n[sinks.out]\ntype = "stdout"\ninputs = ["gen"]\n' >"$WORK/none.toml"
run_expect 2 "$STREAMCTL" run "$WORK/none.toml"
assert_contains "$WORK/err" "command"
assert_no_processes_left
echo ok
