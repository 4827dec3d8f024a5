#!/usr/bin/env bash
# How fast /metrics answers ([metrics] listen) for a job of many subtasks (issue 10: under 50 ms
# with 64). A measuring tool, not a test: it fails only when the endpoint does not answer.
#
#   tests/bench/prometheus_scrape.sh [--parallelism N] [--scrapes N] [--streamctl PATH]
#
# Runs generator -> map at parallelism N (fused: N worker processes, 2N subtask rows) -> file
# at parallelism 1, at a low rate, and times N scrapes (a new connection each, as Prometheus
# after a connection has gone idle), plain and with Accept-Encoding: gzip (as Prometheus asks).
# The coordinator renders the text once a second, apart from the scrapes: what is timed is the
# HTTP answer. When build/tests/bench/prometheus_render_bench exists, it also prints the
# coordinator's cost of rendering that many rows.
#
# Figures depend on the machine and its load.
set -euo pipefail

parallelism=32
scrapes=200
streamctl="${STREAMCTL:-$(dirname "$0")/../../build/cli/streamctl}"
while [[ $# -gt 0 ]]; do
  case $1 in
    --parallelism) parallelism=$2; shift 2 ;;
    --scrapes) scrapes=$2; shift 2 ;;
    --streamctl) streamctl=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
streamctl=$(realpath "$streamctl")
render_bench="$(dirname "$streamctl")/../tests/bench/prometheus_render_bench"

work=$(mktemp -d "${TMPDIR:-/tmp}/streamctl-bench.XXXXXX")
export STREAMCTL_STATE_DIR="$work/state"
job=
trap '[[ -n $job ]] && kill $job 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/p.toml" <<TOML
name = "bench-scrape"
parallelism = $parallelism
[metrics]
listen = "127.0.0.1:$port"
[sources.g]
type = "generator"
profile = "counter"
rate = $((parallelism * 10))
[operators.m]
type = "map"
inputs = ["g"]
set = { twice = "seq * 2" }
[sinks.out]
type = "file"
inputs = ["m"]
path = "$work/out"
parallelism = 1
TOML
"$streamctl" -v run "$work/p.toml" 2>"$work/log" &
job=$!
for _ in $(seq 600); do
  grep -q "records flowing" "$work/log" && break
  kill -0 $job 2>/dev/null || { cat "$work/log" >&2; exit 1; }
  sleep 0.1
done
grep -q "records flowing" "$work/log" || { cat "$work/log" >&2; echo "the job did not start" >&2; exit 1; }
sleep 3 # a few heartbeats and publishes
python3 - "$port" "$scrapes" <<'PY'
import gzip, statistics, sys, time, urllib.request
port, n = sys.argv[1], int(sys.argv[2])
url = "http://127.0.0.1:%s/metrics" % port
for label, headers in (("plain", {}), ("gzip", {"Accept-Encoding": "gzip"})):
    times, size, rows = [], 0, 0
    for _ in range(n):
        t0 = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as r:
            body = r.read()
            encoded = r.headers.get("Content-Encoding")
        times.append((time.perf_counter() - t0) * 1000)
        size = len(body)
        text = gzip.decompress(body) if encoded == "gzip" else body
        rows = text.count(b"\nstreamctl_records_out_total{")
    times.sort()
    print("scrape (%s, %d bytes, %d subtask rows): median %.2f ms, p95 %.2f ms, max %.2f ms over %d"
          % (label, size, rows, statistics.median(times), times[int(0.95 * (n - 1))], times[-1], n))
PY
if [[ -x $render_bench ]]; then
  "$render_bench" $((parallelism * 2 + 1))
fi
