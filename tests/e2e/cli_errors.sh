# What the command line says when it is used wrong: the closest command or option (the rule of
# the pipeline checker), plain words for values out of range, `help`, placeholders in --help,
# global options in every command's help, and errors as JSON with --log-format json. Usage
# errors exit 2 and start nothing (SPEC §2).
source "$(dirname "$0")/lib/common.bash"

pipeline="$SOURCE_DIR/examples/word_split.toml"

# expect_error CODE MESSAGE COMMAND...: stderr is exactly MESSAGE and stdout is empty.
expect_error() {
  local code=$1 message=$2
  shift 2
  run_expect "$code" "$STREAMCTL" "$@"
  assert_eq "$message" "$(cat "$WORK/err")" "stderr of 'streamctl $*'"
  assert_eq "" "$(cat "$WORK/out")" "stdout of 'streamctl $*'"
}

# Unknown commands and options: did you mean ...?
expect_error 2 "streamctl: error: unknown command 'rnu'; did you mean 'run'?" rnu "$pipeline"
expect_error 2 "streamctl: error: unknown command 'frobnicate'" frobnicate
expect_error 2 "streamctl snapshot: error: unknown command 'inspct'; did you mean 'inspect'?" snapshot inspct x.snap
expect_error 2 "streamctl run: error: unknown option '--paralelism'; did you mean '--parallelism'?" \
  run --paralelism 2 "$pipeline"
expect_error 2 "streamctl run: error: unknown option '--paralelism'; did you mean '--parallelism'?" \
  run "$pipeline" --paralelism=2
# Global options are candidates too, before or after the command.
expect_error 2 "streamctl validate: error: unknown option '--state-dri'; did you mean '--state-dir'?" \
  validate "$pipeline" --state-dri /tmp
expect_error 2 "streamctl list: error: unknown option '--verbos'; did you mean '--verbose'?" --verbos list
expect_error 2 "streamctl run: error: unknown option '--bogus'" run "$pipeline" --bogus
# Short options too, but a one-letter option is no typo of another.
expect_error 2 "streamctl run: error: unknown option '--p'; did you mean '-p'?" run "$pipeline" --p 2
expect_error 2 "streamctl run: error: unknown option '-z'" run "$pipeline" -z
expect_error 2 "streamctl run: error: unexpected argument 'extra.toml'" run "$pipeline" extra.toml

# Missing things.
expect_error 2 "streamctl: error: no command given; see 'streamctl help'"
expect_error 2 "streamctl snapshot: error: no command given; see 'streamctl help snapshot'" snapshot
expect_error 2 "streamctl run: error: missing FILE" run
expect_error 2 "streamctl run: error: option '--set' needs a value (KEY=VALUE)" run "$pipeline" --set

# Values: what is expected, in words, for every numeric option.
for cmd in run graph test; do
  expect_error 2 "streamctl $cmd: error: --parallelism must be at least 1" $cmd "$pipeline" -p 0
  expect_error 2 "streamctl $cmd: error: --parallelism must be a whole number, got 'two'" \
    $cmd "$pipeline" --parallelism two
done
expect_error 2 "streamctl rescale: error: --parallelism must be at least 1" rescale somejob -p 0
expect_error 2 "streamctl rescale: error: --operator must be NAME=N with N a whole number at least 1, got 'ok=0'" \
  rescale somejob --operator ok=0
expect_error 2 "streamctl rescale: error: --operator must be NAME=N with N a whole number at least 1, got 'ok'" \
  rescale somejob --operator ok
expect_error 2 "streamctl rescale: error: give --parallelism N or --operator NAME=N" rescale somejob
for cmd in run validate graph test; do
  expect_error 2 "streamctl $cmd: error: --max-workers must be at least 1" $cmd "$pipeline" --max-workers 0
  expect_error 2 "streamctl $cmd: error: --max-host-workers must be a whole number, got '1.5'" \
    $cmd "$pipeline" --max-host-workers 1.5
  expect_error 2 "streamctl $cmd: error: --max-pipeline-size must be a size, got '3Q': use a number and a unit: B, KB, MB, GB, KiB, MiB, GiB" \
    $cmd "$pipeline" --max-pipeline-size 3Q
done
expect_error 2 "streamctl run: error: --parallelism is too large: '99999999999999999999'" \
  run "$pipeline" -p 99999999999999999999
expect_error 2 "streamctl top: error: --interval must be between 0.1 and 3600" top somejob --interval 0
expect_error 2 "streamctl top: error: --interval must be a number, got 'soon'" top somejob --interval soon
expect_error 2 "streamctl graph: error: --format must be one of text, dot, json; got 'jsno'; did you mean 'json'?" \
  graph "$pipeline" --format jsno
expect_error 2 "streamctl run: error: --transport must be one of ipc, tcp; got 'udp'" \
  run "$pipeline" --transport udp
expect_error 2 "streamctl: error: --log-format must be one of text, json; got 'xml'" --log-format xml list

# help [COMMAND]: the same text as --help, on stdout.
run_expect 0 "$STREAMCTL" help
cp "$WORK/out" "$WORK/help-top"
run_expect 0 "$STREAMCTL" --help
assert_eq "$(cat "$WORK/out")" "$(cat "$WORK/help-top")" "'streamctl help' and 'streamctl --help'"
for cmd in run validate status; do
  run_expect 0 "$STREAMCTL" help $cmd
  cp "$WORK/out" "$WORK/help-$cmd"
  run_expect 0 "$STREAMCTL" $cmd --help
  assert_eq "$(cat "$WORK/out")" "$(cat "$WORK/help-$cmd")" "'streamctl help $cmd' and '$cmd --help'"
done
run_expect 0 "$STREAMCTL" help snapshot inspect
assert_contains "$WORK/out" "streamctl snapshot inspect"
expect_error 2 "streamctl help: error: unknown command 'rnu'; did you mean 'run'?" help rnu

# --help: placeholders that say what is expected, and the global options of every command.
run_expect 0 "$STREAMCTL" run --help
for text in "--set KEY=VALUE" "--parallelism N" "--from-savepoint DIR" "--max-pipeline-size SIZE" \
  "GLOBAL OPTIONS" "--state-dir DIR" "--log-format text|json" "--verbose" "--quiet"; do
  assert_contains "$WORK/out" "$text"
done
if grep -qE "TEXT|INT|UINT|FLOAT" "$WORK/out"; then fail "CLI11's placeholders in run --help: $(cat "$WORK/out")"; fi
for cmd in validate graph test list status top stop cancel savepoint rescale restart snapshot; do
  run_expect 0 "$STREAMCTL" $cmd --help
  assert_contains "$WORK/out" "--state-dir DIR"
  if grep -qE "\b(TEXT|INT|UINT|FLOAT)\b" "$WORK/out"; then fail "CLI11's placeholders in $cmd --help: $(cat "$WORK/out")"; fi
done

# --log-format json: a command error is one JSON object on stderr, wherever the flag is.
for args in "--log-format json rnu" "rnu --log-format json" "run $pipeline -p 0 --log-format json" \
  "validate /nonexistent.toml --log-format json" "help rnu --log-format json"; do
  run_expect 2 "$STREAMCTL" $args
  python3 - "$WORK/err" <<'PY' || fail "stderr of 'streamctl $args' is not JSON lines: $(cat "$WORK/err")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "no error"
for line in lines:
    o = json.loads(line)
    assert o["level"] == "error" and o["logger"].startswith("streamctl") and o["msg"], o
    assert isinstance(o["ts"], int), o
PY
done
run_expect 2 "$STREAMCTL" --log-format json rnu
python3 - "$WORK/err" <<'PY' || fail "the JSON error is wrong: $(cat "$WORK/err")"
import json, sys
o = json.loads(open(sys.argv[1]).read())
assert o["logger"] == "streamctl" and o["msg"] == "unknown command 'rnu'; did you mean 'run'?", o
PY

# Text logs: an ISO 8601 UTC time, then "who: level: message"; a worker's lines name the
# nodes it runs ("ok[1]"), not its task index.
cat >"$WORK/logs.toml" <<'TOML'
name = "logs"
[sources.gen]
type = "generator"
profile = "counter"
count = 100
[operators.ok]
type = "filter"
inputs = ["gen"]
where = "seq >= 0"
parallelism = 2
[sinks.out]
type = "stdout"
inputs = ["ok"]
TOML
run_expect 0 "$STREAMCTL" -vv run "$WORK/logs.toml"
stamp='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'
grep -qE "^$stamp streamctl: info: all 4 task\(s\) ready: records flowing$" "$WORK/err" ||
  fail "no timestamped info line: $(head -5 "$WORK/err")"
grep -qE "^$stamp ok\[1\]: debug: " "$WORK/err" || fail "no line of worker ok[1]: $(cat "$WORK/err")"
if grep -qE "worker [0-9]+: " "$WORK/err"; then fail "a worker is named by its index: $(cat "$WORK/err")"; fi
# ... and in json, the "logger" of a worker's lines.
run_expect 0 "$STREAMCTL" -vv --log-format json run "$WORK/logs.toml"
python3 - "$WORK/err" <<'PY' || fail "json logs of a run: $(cat "$WORK/err")"
import json, sys
loggers = {json.loads(line)["logger"] for line in open(sys.argv[1]).read().splitlines()}
assert {"streamctl", "ok[0]", "ok[1]"} <= loggers, loggers
assert not any(name.startswith("worker ") for name in loggers), loggers
PY
echo ok
