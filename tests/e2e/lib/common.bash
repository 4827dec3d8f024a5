# Shared by the end-to-end tests: each runs the built binary ($STREAMCTL) on real files, with a
# state dir of its own, and fails with a message naming what went wrong.
set -euo pipefail

: "${STREAMCTL:?set STREAMCTL to the streamctl binary}"
: "${SOURCE_DIR:?set SOURCE_DIR to the project root}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/streamctl-e2e.XXXXXX")
export STREAMCTL_STATE_DIR="$WORK/state"

cleanup() {
  # Nothing a test started may outlive it, even when the test fails half-way.
  pkill -KILL -f -- "$WORK" 2>/dev/null || true
  [[ -n ${KEEP_WORK:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT

# Seeds $RANDOM for a test that draws its timings at random: from the variable named VAR when set
# (a rerun), else from the clock. The seed is printed, and again on failure with how to rerun it.
seed_random() { # TEST VAR
  local test=$1 var=$2
  # Nanoseconds mod 10^9 + 1: never a leading zero, which bash would read as octal.
  SEED=${!var:-$(($(date +%s%N) % 1000000000 + 1))}
  RANDOM=$SEED
  echo "$test: seed $SEED"
  trap "code=\$?; ((code == 0)) || echo \"$test: seed $SEED (rerun with $var=$SEED)\" >&2; cleanup" EXIT
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# assert_eq EXPECTED ACTUAL WHAT
assert_eq() {
  [[ "$1" == "$2" ]] || fail "$3: expected [$1], got [$2]"
}

# assert_contains FILE TEXT
assert_contains() {
  grep -qF -- "$2" "$1" || { echo "--- $1:" >&2; cat "$1" >&2; fail "'$1' does not contain '$2'"; }
}

# run_expect CODE CMD...: runs CMD, stdout to $WORK/out, stderr to $WORK/err, checks the code.
run_expect() {
  local expected=$1
  shift
  set +e
  "$@" >"$WORK/out" 2>"$WORK/err"
  local code=$?
  set -e
  [[ "$code" == "$expected" ]] || command_failed "$code" "$expected" "$@"
}

# command_failed CODE EXPECTED CMD...: shows $WORK/out and $WORK/err of CMD and fails.
command_failed() {
  local code=$1 expected=$2
  shift 2
  echo "--- stdout:" >&2; head -c 2000 "$WORK/out" >&2
  echo "--- stderr:" >&2; head -c 4000 "$WORK/err" >&2
  fail "'$*' exited $code, expected $expected"
}

# run_ready CMD...: run_expect 0 CMD for a command to a job (stop, savepoint) that a job still
# restarting after a killed worker refuses with "try again" (exit 1): retried for up to 60 s.
# Only that refusal is retried; any other failure fails at once.
run_ready() {
  local deadline=$((SECONDS + 60))
  while :; do
    set +e
    "$@" >"$WORK/out" 2>"$WORK/err"
    local code=$?
    set -e
    ((code == 1)) && grep -q "try again" "$WORK/err" && ((SECONDS < deadline)) || break
    sleep 0.2
  done
  ((code == 0)) || command_failed "$code" 0 "$@"
}

# Sorted JSON lines with keys sorted, for multiset comparison of record streams.
canonical() {
  python3 -c 'import sys, json
for l in sys.stdin:
    l = l.strip()
    if l: print(json.dumps(json.loads(l), sort_keys=True))' | sort
}

# kill_worker [JOB_ID]: kill -9 one worker of this test's jobs (of JOB_ID's when given), drawn
# with $RANDOM so that a seeded test repeats its choice. Status 1 when no worker was running.
kill_worker() {
  local workers
  mapfile -t workers < <(pgrep -f -- "worker --job-dir $STREAMCTL_STATE_DIR${1:+/jobs/$1}" | sort -n || true)
  ((${#workers[@]} > 0)) || return 1
  kill -9 "${workers[RANDOM % ${#workers[@]}]}" 2>/dev/null
}

# No process of this test (workers carry the state dir in their command line) is left.
assert_no_processes_left() {
  local left
  for _ in $(seq 50); do
    left=$(pgrep -f -- "$STREAMCTL_STATE_DIR" || true)
    [[ -z "$left" ]] && return 0
    sleep 0.1
  done
  ps -o pid,args -p $left >&2 || true
  fail "processes left behind: $left"
}

# wait_for_text FILE TEXT [SECONDS]: waits until FILE contains TEXT (a job's log line, say), so a
# test acts on a running job rather than on a guess of how long start-up takes on a busy machine.
wait_for_text() {
  wait_for_any_text "$1" "${3:-30}" "$2" >/dev/null
}

# Waits until FILE shows one of TEXTS, and prints the first that it shows.
wait_for_any_text() { # FILE TIMEOUT TEXT...
  local file=$1 deadline=$((SECONDS + $2)) text
  shift 2
  while ((SECONDS < deadline)); do
    for text in "$@"; do
      grep -qF -- "$text" "$file" 2>/dev/null && { echo "$text"; return 0; }
    done
    sleep 0.05
  done
  cat "$file" >&2 || true
  (($# == 1)) && fail "'$file' never showed '$1'"
  fail "'$file' never showed any of: $*"
}

# Generates N click records as JSON lines.
make_clicks() {
  python3 - "$1" <<'PY'
import sys, random
random.seed(11)
n = int(sys.argv[1])
out = []
for i in range(n):
    out.append('{"ts":%d,"user":"u%d","page":"/p/%d","status":%d,"bytes":%d}' % (
        1700000000000 + i, random.randint(1, 500), random.randint(1, 50),
        random.choice((200, 200, 200, 200, 404, 500)), random.randint(100, 10000)))
print("\n".join(out))
PY
}

# Peers for the tcp and zmq sinks (lib/sink_peers.py): a free local TCP port, and a peer that
# writes what it receives to OUT. start_peer KIND ARGS... runs it in the background (its OUT
# under $WORK, so cleanup ends it) and waits until it listens; PEER_PID is its pid.
free_port() {
  python3 "$SOURCE_DIR/tests/e2e/lib/sink_peers.py" free-port
}
start_peer() {
  local out=$3 # tcp PORT OUT, pull|sub ENDPOINT OUT
  local python=python3
  [[ $1 == tcp ]] || python=$(zmq_python) || fail "no python3 with the zmq module"
  "$python" "$SOURCE_DIR/tests/e2e/lib/sink_peers.py" "$@" &
  PEER_PID=$!
  wait_for_file "$out.ready"
}
# The python3 that has python3-zmq: the first on PATH, or Debian's when PATH has another.
zmq_python() {
  local python
  for python in python3 /usr/bin/python3; do
    "$python" -c "import zmq" 2>/dev/null && { echo "$python"; return 0; }
  done
  return 1
}
wait_for_file() {
  local deadline=$((SECONDS + ${2:-30}))
  until [[ -e $1 ]]; do
    ((SECONDS < deadline)) || fail "'$1' never appeared"
    sleep 0.05
  done
}
# wait_for_lines FILE N [SECONDS]: until FILE has at least N lines.
wait_for_lines() {
  local deadline=$((SECONDS + ${3:-30}))
  until [[ -e $1 && $(wc -l <"$1") -ge $2 ]]; do
    ((SECONDS < deadline)) || fail "'$1' has $(wc -l <"$1" 2>/dev/null || echo 0) lines, expected $2"
    sleep 0.05
  done
}

# wait_exit PID [SECONDS]: waits for the background job PID and returns its exit status, like
# `wait PID`, but fails if the job has not ended within SECONDS (120 unless told). A job that
# hangs then says where: every process of the test, each thread's kernel wait, and (with gdb) each
# thread's stack go to stderr before the job is killed, where ctest's timeout said nothing.
wait_exit() { # PID [SECONDS]
  local pid=$1 deadline=$((SECONDS + ${2:-120})) state
  while ((SECONDS < deadline)); do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
    [[ $state == gone || $state == Z ]] && { wait "$pid"; return; }
    sleep 0.1
  done
  echo "wait_exit: pid $pid still runs after ${2:-120} s; the test's processes:" >&2
  dump_processes "$pid"
  kill -KILL "$pid" 2>/dev/null || true
  fail "the job (pid $pid) did not end within ${2:-120} s"
}

# Where each process of this test (under $WORK) and PID waits: threads' kernel waits, and their
# stacks when gdb is installed.
dump_processes() { # PID
  local p t
  for p in $( (echo "$1"; pgrep -f -- "$WORK") | sort -un); do
    [[ -d /proc/$p ]] || continue
    ps -o pid=,stat=,etime=,args= -p "$p" >&2 || true
    for t in /proc/$p/task/*; do
      echo "  thread ${t##*/} $(cat "$t/comm" 2>/dev/null) state $(awk '{print $3}' "$t/stat" 2>/dev/null)" \
        "wchan $(cat "$t/wchan" 2>/dev/null)" >&2
    done
    if command -v gdb >/dev/null; then
      timeout 60 gdb -p "$p" -batch -ex "thread apply all bt" 2>&1 | grep -E '^(Thread|#)' >&2 || true
    fi
  done
}

# start_stalled_publisher LOG: runs a job "publishing" (a generator of 20,000 records to stdout,
# checkpoints on) whose stdout is a fifo that a reader holds open and never reads, and returns
# once its sinks publish the job's last output, stalled there. Sets $pid (the job) and $reader
# (kill it when done). Its stderr goes to LOG.
start_stalled_publisher() {
  cat >"$WORK/publish.toml" <<'TOML'
name = "publishing"
[checkpoint]
interval = "10s"
[sources.gen]
type = "generator"
count = 20000
[sinks.out]
type = "stdout"
inputs = ["gen"]
TOML
  rm -f "$WORK/stalled"
  mkfifo "$WORK/stalled"
  sleep 120 <"$WORK/stalled" & # holds the pipe open and never reads it
  reader=$!
  "$STREAMCTL" -v run "$WORK/publish.toml" >"$WORK/stalled" 2>"$1" &
  pid=$!
  wait_for_text "$1" "the sinks publish the job's last output"
}
