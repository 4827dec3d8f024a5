#!/usr/bin/env bash
# Throughput of the tcp source (issue 11): a loopback client sends N lines (sendfile of a
# prepared file) into `type = "tcp"`, which feeds a stdout sink whose output is counted. A
# measuring tool, not a test: it fails only when the count is wrong. The aim is 2 M lines/s
# per core.
#
#   tests/bench/tcp_source.sh [--lines N] [--format lines|json] [--checkpoints] [--streamctl PATH]
#
# Prints lines/s of wall time (from the client's first byte to the job's exit) and lines per
# CPU second of the job (user + sys of `streamctl run` and its workers, which it reaps).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lines=5000000 format=lines checkpoints=0 streamctl="$here/../../build/cli/streamctl"
while (($#)); do
  case $1 in
  --lines) lines=$2; shift 2 ;;
  --format) format=$2; shift 2 ;;
  --checkpoints) checkpoints=1; shift ;;
  --streamctl) streamctl=$2; shift 2 ;;
  *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STREAMCTL_STATE_DIR="$work/state"
port=$(python3 "$here/../e2e/lib/free_port.py")
python3 - "$lines" "$format" >"$work/in.txt" <<'PY'
import sys
n, fmt = int(sys.argv[1]), sys.argv[2]
line = (lambda i: '{"seq":%d,"user":"u%d"}' % (i, i % 1000)) if fmt == "json" else (lambda i: "line %d of the benchmark" % i)
out = sys.stdout
for start in range(0, n, 100000):
    out.write("\n".join(line(i) for i in range(start, min(n, start + 100000))) + "\n")
PY
{
  echo 'name = "tcpbench"'
  if ((checkpoints)); then printf '[checkpoint]\ninterval = "1s"\ndir = "%s/ck"\n' "$work"; fi
  cat <<TOML
[sources.in]
type = "tcp"
address = "127.0.0.1:$port"
format = "$format"
end_after_idle = "200ms"
[sinks.out]
type = "stdout"
inputs = ["in"]
TOML
} >"$work/job.toml"
/usr/bin/time -f "%U %S" -o "$work/cpu" "$streamctl" run "$work/job.toml" 2>"$work/log" | wc -l >"$work/count" &
job=$!
python3 - "$port" "$work/in.txt" "$work/start" <<'PY'
import socket, sys, time
port, path, stamp = int(sys.argv[1]), sys.argv[2], sys.argv[3]
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port)); break
    except OSError:
        time.sleep(0.01)
open(stamp, "w").write(repr(time.time()))
with open(path, "rb") as f:
    s.sendfile(f)
s.shutdown(socket.SHUT_WR)
while s.recv(4096):
    pass
PY
wait $job
end=$(python3 -c 'import time; print(time.time())')
count=$(cat "$work/count")
[[ $count == "$lines" ]] || { tail -5 "$work/log" >&2; echo "counted $count lines, sent $lines" >&2; exit 1; }
read -r user sys <"$work/cpu"
python3 - "$lines" "$(cat "$work/start")" "$end" "$user" "$sys" "$format" "$checkpoints" <<'PY'
import sys
n, start, end, user, sys_ = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
wall = end - start - 0.2  # less end_after_idle
print("tcp source, %d %s lines, checkpoints %s: %.2f M lines/s wall, CPU %.2f s (user %.2f + sys %.2f): %.2f M lines per CPU second"
      % (n, sys.argv[6], "on" if sys.argv[7] == "1" else "off", n / wall / 1e6, user + sys_, user, sys_, n / (user + sys_) / 1e6))
PY
