# ${NAME} and ${NAME:-DEFAULT} in pipeline values, and "-" as the pipeline file (stdin).
source "$(dirname "$0")/lib/common.bash"

mkdir -p "$WORK/data" "$WORK/elsewhere"
printf 'alpha\nbeta\n' >"$WORK/data/in.txt"

# Quoted: streamctl expands these, not the shell. The file sink's directory comes from the
# environment, the source's from a default unless IN is set; the $${ is a literal "${".
cat >"$WORK/job.toml" <<'TOML'
name = "env"
[sources.text]
type = "file"
path = "${IN:-data}/in.txt"
format = "lines"
[operators.tag]
type = "map"
inputs = ["text"]
set = { note = "'$${kept}'" }
[sinks.out]
type = "file"
inputs = ["tag"]
path = "${OUT_DIR}"
TOML

# Unset, without a default: exit 2, the variable's name at its ${ (line 13, column 9).
run_expect 2 env -u OUT_DIR "$STREAMCTL" validate "$WORK/job.toml"
assert_contains "$WORK/err" "$WORK/job.toml:13:9: environment variable OUT_DIR is not set (write \${OUT_DIR:-default} for a default)"
run_expect 2 env -u OUT_DIR "$STREAMCTL" run "$WORK/job.toml"
assert_contains "$WORK/err" "environment variable OUT_DIR is not set"
[[ ! -d "$STREAMCTL_STATE_DIR/jobs" ]] || fail "a job was registered with an unset variable"

# The default (relative: the file's directory), and the sink's directory from the environment.
OUT_DIR="$WORK/out1" run_expect 0 "$STREAMCTL" run "$WORK/job.toml"
assert_eq '{"line":"alpha","note":"${kept}"}
{"line":"beta","note":"${kept}"}' "$(cat "$WORK"/out1/part-*.json)" "expanded default and sink path"

# Set, it wins over the default; empty, the default is taken (as in sh).
cp "$WORK/data/in.txt" "$WORK/elsewhere/in.txt"
printf 'gamma\n' >>"$WORK/elsewhere/in.txt"
IN="$WORK/elsewhere" OUT_DIR="$WORK/out2" run_expect 0 "$STREAMCTL" run "$WORK/job.toml"
assert_eq 3 "$(cat "$WORK"/out2/part-*.json | wc -l)" "records read from \$IN"
IN="" OUT_DIR="$WORK/out3" run_expect 0 "$STREAMCTL" run "$WORK/job.toml"
assert_eq 2 "$(cat "$WORK"/out3/part-*.json | wc -l)" "records read from the default when IN is empty"

# The job directory keeps the values the run used, for restart and its workers.
job_dir=$(ls -d "$STREAMCTL_STATE_DIR"/jobs/*/ | head -1)
assert_contains "$job_dir/variables" "OUT_DIR=$WORK/out"

# "-": the pipeline from stdin; errors name <stdin>, relative paths resolve against the
# current directory.
cd "$WORK"
cat job.toml | OUT_DIR="$WORK/out4" run_expect 0 "$STREAMCTL" validate -
assert_contains "$WORK/err" "<stdin>: ok"
OUT_DIR="$WORK/out4" run_expect 0 "$STREAMCTL" run - <job.toml
assert_eq 2 "$(cat "$WORK"/out4/part-*.json | wc -l)" "records of a pipeline read from stdin"
OUT_DIR="$WORK/out4" run_expect 0 "$STREAMCTL" graph - <job.toml
assert_contains "$WORK/out" "text"
(cd "$WORK/elsewhere" && OUT_DIR="$WORK/out5" run_expect 2 "$STREAMCTL" validate - <"$WORK/job.toml")
assert_contains "$WORK/err" "<stdin>:4:8:"
run_expect 2 env -u OUT_DIR "$STREAMCTL" validate - <job.toml
assert_contains "$WORK/err" "<stdin>:13:9: environment variable OUT_DIR is not set"

# A restart takes the values the run took, not its own environment (here OUT_DIR is unset),
# and the pipeline that came from stdin from the job directory.
cat >"$WORK/endless.toml" <<'TOML'
name = "endless"
[sources.gen]
type = "generator"
profile = "counter"
rate = 2000
[sinks.out]
type = "file"
inputs = ["gen"]
path = "${OUT_DIR}"
TOML
stop_job() {
  run_expect 0 "$STREAMCTL" stop "$1"
  for _ in $(seq 100); do
    grep -q '"state": "stopped"' "$STREAMCTL_STATE_DIR/jobs/$1/job.json" && return
    sleep 0.1
  done
  fail "job $1 did not stop"
}
OUT_DIR="$WORK/endless" run_expect 0 "$STREAMCTL" -v run - --detach <"$WORK/endless.toml"
id=$(cat "$WORK/out")
wait_for_text "$STREAMCTL_STATE_DIR/jobs/$id/log" "records flowing"
stop_job "$id"
assert_eq "part-0-0.json" "$(cd "$WORK/endless" && echo *)" "part files of the first run"
run_expect 0 env -u OUT_DIR "$STREAMCTL" -v restart "$id" --detach
# The second "records flowing" of the log: the restarted job's.
for _ in $(seq 300); do
  [[ $(grep -c "records flowing" "$STREAMCTL_STATE_DIR/jobs/$id/log") -ge 2 ]] && break
  sleep 0.1
done
assert_contains "$STREAMCTL_STATE_DIR/jobs/$id/log" "restored from"
stop_job "$id"
assert_eq "part-0-0.json part-0-1.json" "$(cd "$WORK/endless" && echo *)" "part files after the restart"

# A stdin source with the pipeline on stdin is refused before anything starts.
cat >"$WORK/stdin_source.toml" <<'TOML'
name = "stdin-twice"
[sources.in]
type = "stdin"
[sinks.out]
type = "stdout"
inputs = ["in"]
TOML
for command in validate run graph; do
  run_expect 2 "$STREAMCTL" "$command" - <"$WORK/stdin_source.toml"
  assert_contains "$WORK/err" "<stdin>:3:8: source 'in' reads stdin, but the pipeline itself is read from stdin"
done
# As a file, the same pipeline is fine; and `test` replaces its sources with files.
run_expect 0 "$STREAMCTL" validate "$WORK/stdin_source.toml"
run_expect 0 "$STREAMCTL" test - <"$SOURCE_DIR/examples/clicks_filter.toml"
assert_contains "$WORK/out" " passed, 0 failed"
echo ok
