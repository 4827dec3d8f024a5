# `cat | streamctl run | ...`: a pipeline as a filter between shell commands, checked against
# the same filter computed independently.
source "$(dirname "$0")/lib/common.bash"

make_clicks 5000 >"$WORK/clicks.jsonl"
cat >"$WORK/p.toml" <<'TOML'
name = "shell"
[sources.in]
type = "stdin"
[operators.ok]
type = "filter"
inputs = ["in"]
where = "status == 200 && bytes > 5000"
[operators.slim]
type = "map"
inputs = ["ok"]
set = { kib = "bytes / 1024", who = "upper(user)" }
remove = ["ts", "status", "bytes"]
[sinks.out]
type = "stdout"
inputs = ["slim"]
TOML

cat "$WORK/clicks.jsonl" | "$STREAMCTL" run "$WORK/p.toml" | canonical >"$WORK/actual"
python3 - "$WORK/clicks.jsonl" <<'PY' | sort >"$WORK/expected"
import sys, json
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["status"] == 200 and r["bytes"] > 5000:
        print(json.dumps({"user": r["user"], "page": r["page"], "kib": r["bytes"] // 1024,
                          "who": r["user"].upper()}, sort_keys=True))
PY
[[ -s "$WORK/expected" ]] || fail "the test data selects nothing"
diff "$WORK/expected" "$WORK/actual" >/dev/null || fail "output differs: $(diff "$WORK/expected" "$WORK/actual" | head -5)"

# Field order on stdout is the record's: input order, new fields last.
first=$(cat "$WORK/clicks.jsonl" | "$STREAMCTL" run "$WORK/p.toml" | sed -n 1p)
[[ "$first" == '{"user":'*'"page":'*'"kib":'*'"who":'* ]] || fail "unexpected field order: $first"

# An empty input is a job with no output that succeeds.
run_expect 0 "$STREAMCTL" run "$WORK/p.toml" </dev/null
assert_eq "" "$(cat "$WORK/out")" "output of empty input"

# Logs never reach stdout, even with -vv.
cat "$WORK/clicks.jsonl" | "$STREAMCTL" -vv run "$WORK/p.toml" 2>"$WORK/log" | canonical >"$WORK/actual2"
diff -q "$WORK/expected" "$WORK/actual2" >/dev/null || fail "-vv changed stdout"
assert_contains "$WORK/log" "finished"
assert_no_processes_left

# A reader that stops early (`| head`) ends an endless job quietly with 141, as SIGPIPE would.
cat >"$WORK/endless.toml" <<'TOML'
name = "endless"
[sources.g]
type = "generator"
[sinks.out]
type = "stdout"
inputs = ["g"]
TOML
set +o pipefail
"$STREAMCTL" run "$WORK/endless.toml" 2>"$WORK/err" | head -3 >"$WORK/head"
code=${PIPESTATUS[0]}
set -o pipefail
assert_eq 141 "$code" "exit code when stdout closes"
assert_eq 3 "$(wc -l <"$WORK/head" | tr -d ' ')" "lines read by head"
assert_eq "" "$(cat "$WORK/err")" "stderr when stdout closes"
# ... and is recorded as stopped, not failed: nothing went wrong.
"$STREAMCTL" status endless >"$WORK/status"
assert_contains "$WORK/status" "(endless): stopped"
if grep -q "failed" "$WORK/status"; then cat "$WORK/status" >&2; fail "a | head run shows a failure"; fi
assert_no_processes_left
echo ok
