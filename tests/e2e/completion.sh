#!/usr/bin/env bash
# `streamctl completion bash|zsh|fish`: the bash script, sourced in a bash subprocess, offers
# commands, options, option values, job ids and names (from the state dir), node names of a
# job (for `tap JOB NODE`) and pipeline files; the zsh and fish scripts pass their shell's
# syntax check where that shell is installed. Nothing is printed by the hidden --list-* helpers
# on an error.
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/p.toml" <<TOML
name = "completed"
[sources.gen]
type = "generator"
profile = "counter"
count = 10
[operators.dbl]
type = "map"
inputs = ["gen"]
set = { double = "seq * 2" }
[sinks.out]
type = "file"
inputs = ["dbl"]
path = "$WORK/out-dir"
TOML
mkdir -p "$WORK/files/sub"
touch "$WORK/files/a.toml" "$WORK/files/b.txt"

# A job in the state dir: a bounded run, registered and finished.
run_expect 0 "$STREAMCTL" run "$WORK/p.toml"
run_expect 0 "$STREAMCTL" list --json
id=$(python3 -c 'import sys, json; print(json.loads(sys.stdin.readline())["id"])' <"$WORK/out")

run_expect 0 "$STREAMCTL" completion bash
cp "$WORK/out" "$WORK/streamctl.bash"

# complete LINE: the candidates for the last word of LINE (empty after a trailing space), one
# a line, sorted, from the completion function in a fresh bash.
complete_line() {
  (cd "$WORK/files" && bash --norc --noprofile -c '
    source "$1"
    complete -p streamctl >/dev/null || { echo "no complete -p for streamctl"; exit 1; }
    read -ra COMP_WORDS <<<"$2"
    [[ $2 == *" " ]] && COMP_WORDS+=("")
    COMP_WORDS[0]=$3
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE=$2
    COMP_POINT=${#2}
    _streamctl
    printf "%s\n" "${COMPREPLY[@]}" | sort' bash "$WORK/streamctl.bash" "$1" "$STREAMCTL")
}

# expect_candidates LINE EXPECTED...: the candidates are exactly EXPECTED.
expect_candidates() {
  local line=$1
  shift
  local expected
  expected=$(printf '%s\n' "$@" | sort)
  assert_eq "$expected" "$(complete_line "$line")" "candidates for '$line'"
}

expect_candidates "streamctl ru" run
expect_candidates "streamctl run --par" --parallelism
expect_candidates "streamctl --log-format " json text
expect_candidates "streamctl run --transport " ipc tcp
expect_candidates "streamctl snapshot " inspect verify
expect_candidates "streamctl status $id " # one positional: nothing more
expect_candidates "streamctl status " "$id" completed
expect_candidates "streamctl status comp" "$id" completed # ids start with the name
expect_candidates "streamctl tap $id " dbl gen out
expect_candidates "streamctl validate " a.toml sub
# A flag takes no value: the word after it is the pipeline file (regression: flags were
# taken for options with a value, and swallowed it).
expect_candidates "streamctl run --detach " a.toml sub
expect_candidates "streamctl run --detach a.toml --res" --resume
expect_candidates "streamctl help sn" snapshot
# Global options after the command, and --state-dir passed on to the job lookup.
expect_candidates "streamctl status --qu" --quiet
expect_candidates "streamctl --state-dir $WORK/none status " # an empty state dir: no jobs
# The hidden worker command is not offered.
[[ -z $(complete_line "streamctl work") ]] || fail "the hidden 'worker' command is offered"

# The helpers: one word a line; silent on errors.
run_expect 0 "$STREAMCTL" completion --list-nodes "$WORK/p.toml"
assert_eq $'gen\ndbl\nout' "$(cat "$WORK/out")" "node names of the pipeline file"
run_expect 0 "$STREAMCTL" completion --list-nodes "$WORK/missing.toml"
assert_eq "" "$(cat "$WORK/out" "$WORK/err")" "output for a missing pipeline file"
run_expect 0 "$STREAMCTL" completion --list-job-nodes no-such-job
assert_eq "" "$(cat "$WORK/out" "$WORK/err")" "output for an unknown job"
run_expect 2 "$STREAMCTL" completion
run_expect 2 "$STREAMCTL" completion tcsh

# zsh and fish: generated; syntax-checked where the shell is installed.
run_expect 0 "$STREAMCTL" completion zsh
assert_contains "$WORK/out" "#compdef streamctl"
if command -v zsh >/dev/null; then zsh -n "$WORK/out" || fail "zsh rejects the zsh script"
else echo "completion: zsh not installed; its script was not syntax-checked"; fi
run_expect 0 "$STREAMCTL" completion fish
assert_contains "$WORK/out" "complete -c streamctl"
if command -v fish >/dev/null; then fish -n "$WORK/out" || fail "fish rejects the fish script"
else echo "completion: fish not installed; its script was not syntax-checked"; fi
echo "completion: ok"
