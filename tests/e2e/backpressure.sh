# A sink that cannot keep up slows the source down through the bounded channel queues: memory
# stays bounded however fast the source could go.
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/p.toml" <<'TOML'
name = "backpressure"
[sources.g]
type = "generator"
profile = "clicks"
[operators.pass]
type = "filter"
inputs = ["g"]
partition = "rebalance"
where = "true"
[sinks.out]
type = "stdout"
inputs = ["pass"]
TOML

# The reader stops reading for 4 s; an unbounded queue would grow by millions of records.
mkfifo "$WORK/pipe"
"$STREAMCTL" run "$WORK/p.toml" >"$WORK/pipe" 2>"$WORK/err" &
pid=$!
exec 3<"$WORK/pipe"
head -c 1000 <&3 >/dev/null
sleep 1

# rss_kib PID: resident memory of a process.
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
generator_pid=$(pgrep -f -- "$STREAMCTL_STATE_DIR.*--task 0 " | head -1)
[[ -n "$generator_pid" ]] || fail "no generator worker found"
first=$(rss_kib "$generator_pid")
sleep 3
second=$(rss_kib "$generator_pid")
echo "generator worker RSS: $first KiB, then $second KiB while the reader is stalled"
[[ $second -lt $((first + 20000)) ]] || fail "the generator's memory grew from $first to $second KiB: no backpressure"

# Reading again lets the job go on; closing the reader ends it.
head -c 100000 <&3 >/dev/null
exec 3<&-
set +e
wait $pid
code=$?
set -e
assert_eq 141 "$code" "exit code when the reader goes"
assert_no_processes_left
echo ok
