# The Prometheus endpoint ([metrics] listen, --metrics-listen): a running job answers GET
# /metrics with every node's figures in text that promtool accepts; a real Prometheus server
# scrapes it and sees the counts `status --json` has; a port in use or a bad address is exit 2
# with nothing started; `streamctl test` ignores [metrics] listen.
#
# Needs /usr/bin/prometheus and /usr/bin/promtool (Debian: prometheus) for the promtool check
# and the Prometheus server: without them the rest runs, and the test says skipped (77).
source "$(dirname "$0")/lib/common.bash"

have_prometheus=1
[[ -x /usr/bin/prometheus && -x /usr/bin/promtool ]] || have_prometheus=0

# A port nothing listens on now (the kernel's pick; free again once closed).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# http_get URL: the body, or an error on stderr and a non-zero exit.
http_get() {
  python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"
}

# sum_of SCRAPE FAMILY NODE: the sum of FAMILY's samples of NODE in a scrape.
sum_of() {
  python3 - "$@" <<'PY'
import re, sys
text, family, node = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
total = 0
for m in re.finditer(r'^streamctl_%s\{([^}]*)\} (\S+)$' % family, text, re.M):
    if 'node="%s"' % node in m.group(1).split(","):
        total += float(m.group(2))
print(int(total))
PY
}

jobs_registered() { ls "$STREAMCTL_STATE_DIR/jobs" 2>/dev/null | wc -l; }

# --- (a) a bounded job at a fixed rate: every node in the scrape, promtool accepts it ---------
port=$(free_port)
cat >"$WORK/bounded.toml" <<TOML
name = "metrics-bounded"
parallelism = 2
[metrics]
listen = "127.0.0.1:$port"
[sources.g]
type = "generator"
profile = "counter"
count = 3000
rate = 600
[operators.f]
type = "filter"
inputs = ["g"]
where = "seq % 3 != 0"
[sinks.out]
type = "file"
inputs = ["f"]
path = "$WORK/bounded-out"
parallelism = 1
TOML
"$STREAMCTL" -v run "$WORK/bounded.toml" 2>"$WORK/bounded-err" &
pid=$!
wait_for_text "$WORK/bounded-err" "records flowing"
assert_contains "$WORK/bounded-err" "metrics: Prometheus text on http://127.0.0.1:$port/metrics"
# First, while the job surely runs (a fresh-clone CI run under load asked after the scrapes
# below, when the 5 s job had ended and the endpoint with it: connection refused).
python3 - "$port" <<'PY' || fail "/other should answer 404"
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen("http://127.0.0.1:%s/other" % sys.argv[1], timeout=5)
except urllib.error.HTTPError as e:
    sys.exit(0 if e.code == 404 else 1)
sys.exit(1)
PY
# Heartbeats bring counts within a second or two; the job runs about 5 s.
deadline=$((SECONDS + 20))
until http_get "http://127.0.0.1:$port/metrics" >"$WORK/scrape" && (($(sum_of "$WORK/scrape" records_in_total out) > 0)); do
  ((SECONDS < deadline)) || { cat "$WORK/scrape" >&2; fail "no records_in_total of out > 0 in a scrape"; }
  sleep 0.3
done
for node in g f out; do
  grep -q "^streamctl_records_out_total{.*node=\"$node\",subtask=\"0\"" "$WORK/scrape" || fail "node $node missing"
done
grep -q '^streamctl_records_out_total{.*node="g",subtask="1"' "$WORK/scrape" || fail "subtask 1 of g missing"
grep -q '^streamctl_restarts_total{job="[^"]*",job_name="metrics-bounded"} 0$' "$WORK/scrape" ||
  fail "no restarts_total of the job: $(grep restarts "$WORK/scrape")"
if ((have_prometheus)); then
  /usr/bin/promtool check metrics <"$WORK/scrape" >"$WORK/promtool" 2>&1 ||
    { cat "$WORK/promtool" >&2; fail "promtool check metrics refused the scrape"; }
  [[ ! -s "$WORK/promtool" ]] || { cat "$WORK/promtool" >&2; fail "promtool found problems"; }
fi
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of the bounded job"
assert_eq 2000 "$(cat "$WORK/bounded-out"/part-* | wc -l)" "records out of the bounded job"
# The endpoint goes with the job.
if http_get "http://127.0.0.1:$port/metrics" >/dev/null 2>&1; then fail "the endpoint outlived its job"; fi

# --- (c) a port in use, a bad address: exit 2, nothing started -----------------------------
busy=$(free_port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print("listening", flush=True); time.sleep(120)' "$busy" >"$WORK/holder" &
holder=$!
wait_for_text "$WORK/holder" "listening"
sed "s/^listen = .*/listen = \"127.0.0.1:$busy\"/" "$WORK/bounded.toml" >"$WORK/busy.toml"
before=$(jobs_registered)
run_expect 2 "$STREAMCTL" run "$WORK/busy.toml"
assert_contains "$WORK/err" "cannot listen on 127.0.0.1:$busy for [metrics] listen: address in use"
assert_eq "$before" "$(jobs_registered)" "jobs registered after a port in use"
assert_no_processes_left
run_expect 2 "$STREAMCTL" run --detach "$WORK/busy.toml"
assert_contains "$WORK/err" "address in use"
assert_eq "$before" "$(jobs_registered)" "jobs registered after a port in use (--detach)"
run_expect 2 "$STREAMCTL" run "$WORK/bounded.toml" --metrics-listen "no-such-host.invalid:$port"
assert_contains "$WORK/err" "cannot listen on no-such-host.invalid:$port for [metrics] listen: cannot resolve"
run_expect 2 "$STREAMCTL" run "$WORK/bounded.toml" --metrics-listen ":$port"
assert_contains "$WORK/err" "--metrics-listen = \":$port\": no host before the port"
run_expect 2 "$STREAMCTL" run "$WORK/bounded.toml" --set "metrics.listen=\"$port\""
assert_contains "$WORK/err" "'metrics.listen' = \"$port\": give a host and a port"
# validate checks it too, at its line.
sed "s/^listen = .*/listen = \":$port\"/" "$WORK/bounded.toml" >"$WORK/no-host.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/no-host.toml"
assert_contains "$WORK/err" "no-host.toml:4:10: 'metrics.listen' = \":$port\": no host before the port"
assert_eq "$before" "$(jobs_registered)" "jobs registered after a bad address"
# --metrics-listen wins over the file's port in use.
other=$(free_port)
run_expect 0 "$STREAMCTL" -v run "$WORK/busy.toml" --metrics-listen "127.0.0.1:$other" --set sources.g.count=10 \
  --set sources.g.rate=1000
assert_contains "$WORK/err" "metrics: Prometheus text on http://127.0.0.1:$other/metrics"
# `streamctl test` runs many jobs: it ignores [metrics] listen, even on a port in use.
touch "$WORK/none.jsonl"
cat >"$WORK/tested.toml" <<TOML
name = "metrics-tested"
[metrics]
listen = "127.0.0.1:$busy"
[sources.in]
type = "file"
path = "$WORK/none.jsonl"
[sinks.out]
type = "stdout"
inputs = ["in"]
[[test]]
name = "passes through"
input.in = ['{"a": 1}']
expect.out = ['{"a": 1}']
TOML
run_expect 0 "$STREAMCTL" test "$WORK/tested.toml"
kill "$holder"
wait "$holder" 2>/dev/null || true

if ((!have_prometheus)); then
  echo "prometheus: no /usr/bin/prometheus or /usr/bin/promtool (Debian: prometheus): skipped the promtool check and the server" >&2
  exit 77
fi

# --- (b) a real Prometheus scrapes the job every second --------------------------------------
port=$(free_port)
prom_port=$(free_port)
cat >"$WORK/endless.toml" <<TOML
name = "metrics-endless"
parallelism = 2
[metrics]
listen = "127.0.0.1:$port"
[sources.g]
type = "generator"
profile = "counter"
rate = 500
[sinks.out]
type = "file"
inputs = ["g"]
path = "$WORK/endless-out"
parallelism = 1
TOML
cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: streamctl
    static_configs:
      - targets: ["127.0.0.1:$port"]
YAML
"$STREAMCTL" -v run "$WORK/endless.toml" 2>"$WORK/endless-err" &
job_pid=$!
/usr/bin/prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$WORK/prometheus.log" 2>&1 &
prom_pid=$!
trap 'kill "$prom_pid" "$job_pid" 2>/dev/null || true; cleanup' EXIT

# prom_query EXPR: the value of EXPR's first result now; nothing when it has none.
prom_query() {
  python3 - "$prom_port" "$1" <<'PY'
import json, sys, time, urllib.error, urllib.parse, urllib.request
url = "http://127.0.0.1:%s/api/v1/query?query=%s" % (sys.argv[1], urllib.parse.quote(sys.argv[2]))
# A busy Prometheus (compacting, on a loaded CI machine) may refuse or drop a query: retry.
for attempt in range(20):
    try:
        result = json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"]
        break
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        if attempt == 19:
            raise
        time.sleep(0.5)
if result:
    print(result[0]["value"][1])
PY
}

deadline=$((SECONDS + 60))
until [[ "$(prom_query 'up{job="streamctl"}' 2>/dev/null)" == 1 ]]; do
  ((SECONDS < deadline)) || { tail -20 "$WORK/prometheus.log" >&2; fail "Prometheus never scraped the job (up != 1)"; }
  kill -0 "$prom_pid" 2>/dev/null || { tail -20 "$WORK/prometheus.log" >&2; fail "Prometheus exited"; }
  sleep 0.5
done
# Ten seconds of scrapes, so that rate() over 10 s has samples to work with.
deadline=$((SECONDS + 60))
until [[ -n "$(prom_query 'rate(streamctl_records_out_total{node="g"}[10s])' 2>/dev/null)" ]]; do
  ((SECONDS < deadline)) || fail "Prometheus has no rate of records_out_total of g"
  sleep 0.5
done
sleep 8
in_prometheus=$(prom_query 'sum(streamctl_records_out_total{node="g"})')
scraped_at=$(prom_query 'min(timestamp(streamctl_records_out_total{node="g"}))')
rate=$(prom_query 'sum(rate(streamctl_records_out_total{node="g"}[10s]))')
run_expect 0 "$STREAMCTL" status metrics-endless --json
status_at=$(date +%s.%N)
# Prometheus holds the count of its last scrape (at scraped_at), whose text the coordinator
# rendered at most about a second before (it publishes once a second); status renders when
# asked, before status_at, from the same heartbeats. So status is ahead by the records of at
# most (status_at - scraped_at + 1 s) at 500/s, and never behind (a counter): allowed 2 s
# over that for the loop's jitter on a loaded machine. The generator caps its rate at 500/s
# (its two subtasks together); the counters move in steps of a heartbeat (~1 s), so rate() over
# the ~9 s of samples in 10 s can be a step or two (500 or 1000 records) over: up to 1.5 x 500.
python3 - "$WORK/out" "$in_prometheus" "$scraped_at" "$status_at" "$rate" <<'PY' || fail "Prometheus and status --json disagree"
import json, sys
status = json.load(open(sys.argv[1]))
ops = {o["name"]: o for o in status["operators"]}
own = sum(sub["records_out"] for sub in ops["g"]["subtasks"])
seen, scraped_at, status_at, rate = (float(a) for a in sys.argv[2:6])
allowed = 500 * (status_at - scraped_at + 3)
print("prometheus: records_out_total of g: %d in Prometheus (scraped %.1f s before status), %d in status --json "
      "(allowed ahead: %d); rate %.1f/s" % (seen, status_at - scraped_at, own, allowed, rate), file=sys.stderr)
assert seen > 0, seen
assert seen <= own <= seen + allowed, (seen, own, allowed)
assert 0 < rate <= 500 * 1.5, rate
PY
run_expect 0 "$STREAMCTL" stop metrics-endless
set +e; wait "$job_pid"; code=$?; set -e
assert_eq 0 "$code" "exit code of the stopped job"
kill "$prom_pid"
wait "$prom_pid" 2>/dev/null || true
assert_no_processes_left
