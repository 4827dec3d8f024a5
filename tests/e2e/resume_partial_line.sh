# A cron job (`run --resume --savepoint-on-exit`) may start while a writer is half-way through
# appending a line to its input. Before this test, the run read the fragment as a record (a
# bad record, dropped) and the next run read the line's rest as another: the record was lost
# and both runs exited 0. A run that ends with a savepoint now leaves an unterminated last line
# unread; the next run reads it once it is complete. A run that drains still reads an
# unterminated last line as a record (the input is over).
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/job.toml" <<TOML
name = "partial"
[sources.in]
type = "file"
path = "$WORK/in.jsonl"
on_error = "dead_letter"
dead_letter = "$WORK/dead.jsonl"
[operators.tag]
type = "map"
inputs = ["in"]
set = { seen = "true" }
[sinks.out]
type = "file"
inputs = ["tag"]
path = "$WORK/sink"
[checkpoint]
interval = "10s"
TOML

# Run 1: the last line is being written.
printf '{"id":1}\n{"id":2}\n{"id":3,"na' >"$WORK/in.jsonl"
run_expect 0 "$STREAMCTL" run "$WORK/job.toml" --resume --savepoint-on-exit
assert_contains "$WORK/err" "ends in an unterminated line (line 3"
# Run 2: the writer finished that line and appended more; this run ends with a savepoint too.
printf 'me":"x"}\n{"id":4}\n' >>"$WORK/in.jsonl"
run_expect 0 "$STREAMCTL" run "$WORK/job.toml" --resume --savepoint-on-exit
# Run 3 drains: an unterminated last line is the end of the input, and a record.
printf '{"id":5}' >>"$WORK/in.jsonl"
run_expect 0 "$STREAMCTL" run "$WORK/job.toml" --resume

[[ ! -s "$WORK/dead.jsonl" ]] || fail "bad records from a line cut by the end of a run: $(cat "$WORK/dead.jsonl")"
got=$(cat "$WORK/sink"/part-* | canonical | tr '\n' ' ')
expected=$(printf '{"id":1,"seen":true}\n{"id":2,"seen":true}\n{"id":3,"name":"x","seen":true}\n{"id":4,"seen":true}\n{"id":5,"seen":true}\n' | canonical | tr '\n' ' ')
assert_eq "$expected" "$got" "records of all runs together"
assert_no_processes_left
