#!/usr/bin/env bash
# Benchmarks of jobs across hosts (issue 8), as root, with network namespaces as hosts (the
# harness of tests/hosts: one sshd per namespace, [cluster] launcher = "ssh"). A measuring
# tool, not a test: it never fails on speed, only when a job fails or miscounts.
#
#   sudo tests/bench/hosts.sh [--records N] [--repeat N] [--start-repeat N] [--streamctl PATH]
#
#   1. Keyed count: generator (counter) -> map k = seq % 1000 -> keyed window (one window of
#      1000 days, so 1000 rows out) at parallelism 2 -> file. Three ways: on one host (no
#      [cluster]; ipc, and tcp on loopback), and across two hosts over tcp, the generator on h1
#      and the window and sink on h2, with CURVE (encrypt = true, the default) and without.
#      Records per second of wall time, and records per CPU second of every process of the
#      job on every host: the coordinator, its ssh clients, the hosts' sshd sessions and the
#      workers. Medians of --repeat runs (default 3) of --records records (default 2,000,000).
#      "marginal" is per CPU second over the CPU above that of the same job on 1,000 records
#      (the logins, the start and the stop), i.e. the cost of moving records.
#   2. Job start on 3 hosts (generator on h1, window on h2, sink on h3), without and with
#      ssh ControlMaster (HOSTS_CONTROL_MASTER=1; the masters opened before the runs, as a
#      user's would be): seconds from `streamctl run -v` to its log line "records flowing",
#      median of --start-repeat runs (default 5).
#
# How CPU is counted. Remote workers are children of their host's sshd, not of `streamctl
# run`, so `time streamctl run` misses them. Every sshd (and so all it forks: sessions,
# workers) is moved into a cpuacct cgroup of its own, the `streamctl run` into another; a
# cgroup's counter keeps the CPU of processes that have exited, so reading it before and after
# a run (once nothing but the sshds is left on the hosts) is exact, with no sampling. Without
# a usable cgroup (v1 cpuacct or v2), the fallback is as exact when every process is reaped by
# its parent: `streamctl run` under /usr/bin/time (it reaps its local workers and ssh clients)
# plus the growth of cutime + cstime in /proc/PID/stat of each host's listening sshd, which
# has reaped its sessions, which reaped their workers.
#
# All hosts are namespaces of this one machine, sharing its cores: the figures show the
# relative cost of the links (CURVE against plain tcp, hosts against one host), not a network.
# On a loaded machine wall time varies; CPU seconds vary much less.
set -euo pipefail

records=2000000
repeat=3
start_repeat=5
only=""
streamctl="${STREAMCTL:-$(dirname "$0")/../../build/cli/streamctl}"
while [[ $# -gt 0 ]]; do
  case $1 in
    --records) records=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --start-repeat) start_repeat=$2; shift 2 ;;
    --streamctl) streamctl=$2; shift 2 ;;
    --only) only=$2; shift 2 ;; # internal: one part, in a process of its own (own hosts)
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
streamctl=$(realpath "$streamctl")
self=$(realpath "$0")
for tool in python3 /usr/bin/time; do
  command -v $tool >/dev/null || { echo "bench needs $tool" >&2; exit 2; }
done
[[ $(id -u) == 0 ]] || { echo "hosts.sh needs root (network namespaces)" >&2; exit 2; }

if [[ -z $only ]]; then
  # Each part brings up its own hosts, in a process of its own: the harness reads
  # HOSTS_CONTROL_MASTER when sourced and tears its hosts down on exit.
  args=(--records "$records" --repeat "$repeat" --start-repeat "$start_repeat" --streamctl "$streamctl")
  "$self" --only count "${args[@]}"
  echo
  echo "== job start on 3 hosts: from \`streamctl run -v\` to \"records flowing\", median of $start_repeat"
  printf '  %-28s %8s %8s %8s\n' "" median min max
  HOSTS_CONTROL_MASTER=0 "$self" --only start "${args[@]}"
  HOSTS_CONTROL_MASTER=1 "$self" --only start "${args[@]}"
  exit 0
fi

export SOURCE_DIR=${SOURCE_DIR:-$(realpath "$(dirname "$0")/../..")}
work=$(mktemp -d "${TMPDIR:-/tmp}/streamctl-bench-hosts.XXXXXX")
export STREAMCTL_STATE_DIR="$work/state"
cgroups=()
cleanup() {
  local cg
  for cg in "${cgroups[@]}"; do
    # The sshds were killed by the harness's teardown (which runs first); an empty cgroup goes.
    for _ in $(seq 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
  done
  rm -rf "$work"
}
trap cleanup EXIT
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"

median() { python3 -c 'import sys, statistics; print(statistics.median(float(a) for a in sys.argv[1:]))' "$@"; }
fmt_rate() { python3 -c "print(f'{$1/$2:,.0f}' if $2 > 0 else '-')"; }

# pipeline COUNT [CLUSTER_TEXT GENERATOR_HOST WINDOW_HOST SINK_HOST]: without the cluster
# part, the job on one host.
pipeline() {
  local count=$1 cluster=${2:-} gen_host=${3:-} window_host=${4:-} sink_host=${5:-}
  pin() { [[ -n $1 ]] && echo "host = \"$1\"" || true; }
  cat <<TOML
name = "bench-hosts"
$cluster
[sources.g]
type = "generator"
profile = "counter"
count = $count
event_time = "ts"
$(pin "$gen_host")
[operators.keyed]
type = "map"
inputs = ["g"]
set = { k = "seq % 1000" }
$(pin "$gen_host")
[operators.per_key]
type = "window"
inputs = ["keyed"]
parallelism = 2
key = ["k"]
window = { kind = "tumbling", size = "1000d" }
aggregates = { n = "count()" }
$(pin "$window_host")
[sinks.out]
type = "file"
inputs = ["per_key"]
path = "$work/out"
$([[ -n $sink_host ]] && echo "shared = true")
$(pin "$sink_host")
TOML
}

# --- CPU accounting (see the header) ---------------------------------------------------------
cpu_method=""
cg_hosts="" cg_run=""
cg_setup() {
  local base=""
  # BENCH_CPU_METHOD=sshd-cutime forces the fallback (to cross-check it against the cgroups).
  [[ ${BENCH_CPU_METHOD:-} == sshd-cutime ]] && { cpu_method=sshd-cutime; return 0; }
  if [[ -w /sys/fs/cgroup/cpuacct && -d /sys/fs/cgroup/cpuacct ]]; then
    base=/sys/fs/cgroup/cpuacct; cpu_method="cgroup-v1"
  elif [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    base=/sys/fs/cgroup; cpu_method="cgroup-v2"
  elif [[ -d /sys/fs/cgroup/unified ]]; then
    base=/sys/fs/cgroup/unified; cpu_method="cgroup-v2"
  fi
  if [[ -n $base ]] && mkdir "$base/sctl-bench-$$-hosts" 2>/dev/null; then
    cgroups+=("$base/sctl-bench-$$-hosts")
    cg_hosts="$base/sctl-bench-$$-hosts"
    if mkdir "$base/sctl-bench-$$-run" 2>/dev/null; then
      cgroups+=("$base/sctl-bench-$$-run")
      cg_run="$base/sctl-bench-$$-run"
      local host ok=1
      for host in "${HOSTS_NAMES[@]}"; do
        echo "${HOSTS_SSHD_PID[$host]}" >"$cg_hosts/cgroup.procs" 2>/dev/null || ok=0
      done
      # A cgroup-v2 without cpu.stat (old kernels) cannot count.
      [[ $cpu_method == cgroup-v1 || -f $cg_hosts/cpu.stat ]] || ok=0
      ((ok)) && return 0
    fi
  fi
  cpu_method="sshd-cutime"
}
# CPU seconds counted so far in cgroup $1
cg_seconds() {
  if [[ $cpu_method == cgroup-v1 ]]; then
    python3 -c "print(int(open('$1/cpuacct.usage').read()) / 1e9)"
  else
    awk '$1 == "usage_usec" { print $2 / 1e6 }' "$1/cpu.stat"
  fi
}
# CPU seconds of the children the hosts' listening sshds have reaped (fallback method)
sshd_children_seconds() {
  local host total=0
  for host in "${HOSTS_NAMES[@]}"; do
    total=$(python3 -c "
f = open('/proc/${HOSTS_SSHD_PID[$host]}/stat').read().rsplit(')', 1)[1].split()
import os; print($total + (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK'))")
  done
  echo "$total"
}
hosts_cpu_now() {
  case $cpu_method in
    cgroup-*) cg_seconds "$cg_hosts" ;;
    sshd-cutime) sshd_children_seconds ;;
    *) echo 0 ;;
  esac
}

# Waits until no process but sshd (the listener, and a ControlMaster's session) runs on any
# host: the job's workers and their sessions have ended, and their CPU is counted.
wait_hosts_idle() {
  local host pid busy deadline=$((SECONDS + 30))
  while :; do
    busy=""
    for host in "${HOSTS_NAMES[@]}"; do
      for pid in $(host_pids "$host"); do
        [[ $(cat "/proc/$pid/comm" 2>/dev/null || echo sshd) == sshd ]] || busy+=" $pid"
      done
    done
    [[ -z $busy ]] && return 0
    ((SECONDS < deadline)) || { echo "still running on the hosts:$busy" >&2; exit 1; }
    sleep 0.05
  done
}

# run_job TOML LOG_TEXT [run options...]: runs it with -v and checks that its log holds
# LOG_TEXT; prints "WALL CPU" (CPU: the run and every host).
run_job() {
  local toml=$1 expect=$2
  shift 2
  rm -rf "$work/out"
  local h0 h1 r0 r1 t0 t1
  h0=$(hosts_cpu_now)
  [[ -n $cg_run ]] && r0=$(cg_seconds "$cg_run")
  t0=$(date +%s.%N)
  if [[ -n $cg_run ]]; then
    sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg_run" \
      "$streamctl" run -v "$toml" "$@" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  else
    /usr/bin/time -o "$work/time" -f "%U %S" "$streamctl" run -v "$toml" "$@" 2>"$work/err" ||
      { cat "$work/err" >&2; exit 1; }
  fi
  t1=$(date +%s.%N)
  # Remote workers and their sessions may end just after the run: count them too (these hosts
  # have no ControlMaster, so every session ends with its worker).
  local host
  for host in "${HOSTS_NAMES[@]}"; do host_wait_only_sshd "$host" 30 >&2 || exit 1; done
  h1=$(hosts_cpu_now)
  if [[ -n $cg_run ]]; then
    r1=$(cg_seconds "$cg_run")
  else
    r0=0
    r1=$(awk '{ print $1 + $2 }' "$work/time")
  fi
  grep -q "$expect" "$work/err" || { echo "the job's log does not say \"$expect\":" >&2; cat "$work/err" >&2; exit 1; }
  local total
  total=$(cat "$work/out"/part-* | python3 -c 'import sys, json; print(sum(json.loads(l)["n"] for l in sys.stdin))')
  [[ $total == "$count" ]] || { echo "the windows counted $total records, expected $count" >&2; exit 1; }
  python3 -c "print($t1 - $t0, ($r1 - $r0) + ($h1 - $h0))"
}

# measure NAME TOML TOML_1000_RECORDS LOG_TEXT [run options...]: one table row.
measure() {
  local name=$1 toml_big=$2 toml_small=$3 expect=$4
  shift 4
  local walls=() cpus=() smalls=() i out
  for i in $(seq "$repeat"); do
    count=$records
    out=$(run_job "$toml_big" "$expect" "$@")
    walls+=("${out% *}"); cpus+=("${out#* }")
    count=1000
    out=$(run_job "$toml_small" "$expect" "$@")
    smalls+=("${out#* }")
  done
  local wall cpu small
  wall=$(median "${walls[@]}"); cpu=$(median "${cpus[@]}"); small=$(median "${smalls[@]}")
  printf '  %-30s %12s %8.2f %14s %8.2f %14s\n' "$name" "$(fmt_rate "$records" "$wall")" "$cpu" \
    "$(fmt_rate "$records" "$cpu")" "$small" "$(fmt_rate "$records" "$(python3 -c "print($cpu - $small)")")"
}

if [[ $only == count ]]; then
  hosts_up 2
  cg_setup
  cluster() { # $1: encrypt
    echo "[cluster]
hosts = [\"h1\", { host = \"h2\", slots = 4 }]
ssh_options = [\"-F\", \"$HOSTS_SSH_CONFIG\"]
encrypt = $1"
  }
  pipeline "$records" >"$work/local.toml"
  pipeline 1000 >"$work/local-small.toml"
  for encrypt in true false; do
    pipeline "$records" "$(cluster $encrypt)" h1 h2 h2 >"$work/hosts-$encrypt.toml"
    pipeline 1000 "$(cluster $encrypt)" h1 h2 h2 >"$work/hosts-$encrypt-small.toml"
  done
  echo "== keyed count (generator -> k = seq % 1000 -> window, parallelism 2 -> file), $records records, median of $repeat; CPU: $cpu_method"
  printf '  %-30s %12s %8s %14s %8s %14s\n' "" "records/s" "CPU s" "rec/CPU s" "fixed s" "marginal"
  measure "one host (ipc)" "$work/local.toml" "$work/local-small.toml" "records flowing"
  measure "one host (tcp loopback)" "$work/local.toml" "$work/local-small.toml" "records flowing" --transport tcp
  measure "2 hosts, tcp, CURVE" "$work/hosts-true.toml" "$work/hosts-true-small.toml" "links between hosts: CURVE"
  measure "2 hosts, tcp, plain" "$work/hosts-false.toml" "$work/hosts-false-small.toml" "NOT encrypted"
  exit 0
fi

if [[ $only == start ]]; then
  hosts_up 3
  if [[ $HOSTS_CONTROL_MASTER == 1 ]]; then
    # The masters, opened as a user's would be before the job (they persist 60 s).
    for host in "${HOSTS_NAMES[@]}"; do host_ssh "$host" true; done
  fi
  pipeline 1000 "[cluster]
hosts = [\"h1\", \"h2\", \"h3\"]
ssh_options = [\"-F\", \"$HOSTS_SSH_CONFIG\"]" h1 h2 h3 >"$work/start.toml"
  times=()
  for i in $(seq "$start_repeat"); do
    rm -rf "$work/out"
    # Timed from just before the exec of `streamctl run` to the arrival of the log line.
    times+=("$(python3 - "$streamctl" "$work/start.toml" <<'PY'
import subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen([sys.argv[1], "run", "-v", sys.argv[2]], stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
seen = None
lines = []
for line in p.stderr:
    lines.append(line)
    if seen is None and "records flowing" in line:
        seen = time.monotonic() - t0
if p.wait() != 0 or seen is None:
    sys.stderr.write("".join(lines))
    sys.exit(1)
print(seen)
PY
)")
    wait_hosts_idle
  done
  label=$([[ $HOSTS_CONTROL_MASTER == 1 ]] && echo "ssh with ControlMaster" || echo "ssh, a login per worker")
  printf '  %-28s %7.2fs %7.2fs %7.2fs\n' "$label" "$(median "${times[@]}")" \
    "$(python3 -c 'import sys; print(min(map(float, sys.argv[1:])))' "${times[@]}")" \
    "$(python3 -c 'import sys; print(max(map(float, sys.argv[1:])))' "${times[@]}")"
  exit 0
fi
echo "unknown part $only" >&2
exit 2
