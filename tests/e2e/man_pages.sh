#!/usr/bin/env bash
# The man pages keep up with the CLI: every long option that `streamctl CMD --help` shows
# appears in man/streamctl-CMD.1.scd, every global long option of `streamctl --help` appears in
# man/streamctl.1.scd, every command listed by `streamctl --help` has a page, and every page
# passes scdoc (when scdoc is installed). CLI11 cannot generate pages, so this test is what
# keeps the hand-written pages and the flags from drifting apart (STYLE.md, "CLI and docs").
#
# Run by ctest with STREAMCTL (the binary) and SOURCE_DIR (the project root) set.
set -euo pipefail

: "${STREAMCTL:?set STREAMCTL to the streamctl binary}"
: "${SOURCE_DIR:?set SOURCE_DIR to the project root}"
man_dir="$SOURCE_DIR/man"
commands=(validate graph run test list prune status top stop cancel savepoint rescale restart snapshot help completion tap)

failures=0
fail() {
  echo "man_pages: FAIL: $*" >&2
  failures=$((failures + 1))
}

# The long options in a help text, one a line, each once.
long_options() {
  grep -oE -- '--[a-z][a-z-]*' <<<"$1" | sort -u || true
}

# Whether `page` mentions `option` as a whole option (--set, not --settings).
mentions() {
  local option=$1 page=$2
  grep -qE -- "(^|[^a-z-])${option}([^a-z-]|\$)" "$page"
}

# Every long option of `help` must appear in `page`.
check_options() {
  local what=$1 help=$2 page=$3
  if [[ ! -f $page ]]; then
    fail "$what: no man page ${page#"$SOURCE_DIR"/}"
    return
  fi
  local option count=0
  while IFS= read -r option; do
    [[ -n $option ]] || continue
    count=$((count + 1))
    if ! mentions "$option" "$page"; then
      fail "$what: option $option is not documented in ${page#"$SOURCE_DIR"/}"
    fi
  done < <(long_options "$help")
  if ((count == 0)); then
    fail "$what: found no long option in its --help output (is the binary right?)"
  fi
}

main_help=$("$STREAMCTL" --help)
check_options "streamctl" "$main_help" "$man_dir/streamctl.1.scd"

for cmd in "${commands[@]}"; do
  help=$("$STREAMCTL" "$cmd" --help)
  check_options "streamctl $cmd" "$help" "$man_dir/streamctl-$cmd.1.scd"
  # ... and the overview lists it under COMMANDS, as "*run* _FILE_".
  if ! grep -qE -- "^\\*${cmd}\\*" "$man_dir/streamctl.1.scd"; then
    fail "streamctl $cmd is not listed under COMMANDS in man/streamctl.1.scd"
  fi
done

# A command shown by `streamctl --help` (CLI11 lists them under "SUBCOMMANDS:") needs a page
# too, so that a new command cannot ship undocumented. The hidden `worker` is not listed.
listed=$(awk 'tolower($0) ~ /^subcommands:?[[:space:]]*$/ { on = 1; next }
              on && /^[[:space:]]*$/ { on = 0 }
              on { print $1 }' <<<"$main_help")
if [[ -z $listed ]]; then
  echo "man_pages: note: no subcommand list found in 'streamctl --help'; skipped that check" >&2
fi
for cmd in $listed; do
  [[ -f $man_dir/streamctl-$cmd.1.scd ]] || fail "command '$cmd' has no man page man/streamctl-$cmd.1.scd"
done

# Every page must convert without a message: scdoc prints errors on stderr and exits non-zero.
if command -v scdoc >/dev/null 2>&1; then
  shopt -s nullglob
  pages=("$man_dir"/*.scd)
  ((${#pages[@]} > 0)) || fail "no *.scd page in $man_dir"
  for page in "${pages[@]}"; do
    if ! messages=$(scdoc <"$page" 2>&1 >/dev/null); then
      fail "scdoc rejects ${page#"$SOURCE_DIR"/}: $messages"
    elif [[ -n $messages ]]; then
      fail "scdoc warns about ${page#"$SOURCE_DIR"/}: $messages"
    fi
  done
else
  echo "man_pages: note: scdoc is not installed; pages were not converted" >&2
fi

if ((failures > 0)); then
  echo "man_pages: $failures problem(s)" >&2
  exit 1
fi
echo "man_pages: ok (${#commands[@]} commands and the global options documented)"
