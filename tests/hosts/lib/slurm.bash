# A Slurm cluster on the namespace hosts of hosts.bash, for multi-host tests (sourced; root).
#
#   source "$SOURCE_DIR/tests/e2e/lib/common.bash"
#   source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
#   source "$SOURCE_DIR/tests/hosts/lib/slurm.bash"
#   slurm_require; hosts_up 3; slurm_up      # munged, slurmctld here, one slurmd per host
#   salloc -N 3 "$STREAMCTL" run job.toml   # SLURM_CONF is exported
#   slurm_wait_only_daemons h2 10
#
# Everything lives under $HOSTS_DIR/slurm: a munged of its own on its own socket (with the
# machine's key; AuthInfo=socket=... points Slurm at it), slurmctld in the root namespace on
# the bridge address (the coordinator's host plays the login node), and slurmd -N hN in each
# host's network namespace (nsenter --net: `ip netns exec` remounts /sys, which slurmd
# refuses). Ports are unusual (16817/16818). The daemons are killed by the hosts' trap (slurmd
# is in its host's namespace) and by slurm_teardown (munged, slurmctld), which runs first.

SLURM_DIR=""
SLURM_MUNGED_PID=""
SLURM_CTLD_PID=""

slurm_require() {
  [[ $(id -u) == 0 ]] || hosts_skip "Slurm tests need root (network namespaces, slurmd)"
  local tool
  for tool in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd srun salloc sbatch scontrol scancel squeue sinfo; do
    command -v "$tool" >/dev/null || hosts_skip "'$tool' is not installed (Debian: slurmctld slurmd slurm-client munge)"
  done
  [[ -r /etc/munge/munge.key ]] || hosts_skip "no /etc/munge/munge.key (Debian: munge)"
}

slurm_teardown() {
  # The jobs first (their steps on the hosts), then the daemons.
  if [[ -n "$SLURM_CTLD_PID" ]] && kill -0 "$SLURM_CTLD_PID" 2>/dev/null; then
    scancel --full --quiet --user=root >/dev/null 2>&1 || true
  fi
  if [[ -n "$SLURM_CTLD_PID" ]]; then kill -9 "$SLURM_CTLD_PID" 2>/dev/null || true; fi
  if [[ -n "$SLURM_MUNGED_PID" ]]; then kill -9 "$SLURM_MUNGED_PID" 2>/dev/null || true; fi
  SLURM_CTLD_PID=""
  SLURM_MUNGED_PID=""
}

slurm_show_logs() {
  local f
  for f in "$SLURM_DIR"/*.log; do
    [[ -f "$f" ]] || continue
    echo "--- $f" >&2
    tail -20 "$f" >&2
  done
}

# slurm_up: after hosts_up; exports SLURM_CONF.
slurm_up() {
  SLURM_DIR="$HOSTS_DIR/slurm"
  mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool"
  local previous
  previous=$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")
  # shellcheck disable=SC2064
  trap "slurm_teardown; $previous" EXIT

  install -m 0600 /etc/munge/munge.key "$SLURM_DIR/munge.key"
  /usr/sbin/munged --foreground --force --socket="$SLURM_DIR/munge.sock" \
    --key-file="$SLURM_DIR/munge.key" --pid-file="$SLURM_DIR/munged.pid" \
    --seed-file="$SLURM_DIR/munged.seed" --log-file="$SLURM_DIR/munged.log" \
    </dev/null >/dev/null 2>&1 {HOSTS_LOCK_FD}>&- &
  SLURM_MUNGED_PID=$!
  disown "$SLURM_MUNGED_PID"

  local cpus host
  cpus=$(nproc)
  export SLURM_CONF="$SLURM_DIR/slurm.conf"
  cat >"$SLURM_CONF" <<CONF
ClusterName=sctl
SlurmctldHost=$(hostname -s)($HOSTS_COORDINATOR_ADDRESS)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_DIR/munge.sock
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.%n.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/linear
ReturnToService=2
SlurmdTimeout=30
MessageTimeout=10
KillWait=2
InactiveLimit=0
PlugStackConfig=/dev/null
MailProg=/bin/true
CONF
  for host in "${HOSTS_NAMES[@]}"; do
    mkdir -p "$SLURM_DIR/spool/$host"
    echo "NodeName=$host NodeAddr=$(host_ip "$host") CPUs=$cpus State=UNKNOWN" >>"$SLURM_CONF"
  done
  echo "PartitionName=sctl Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$SLURM_CONF"

  local deadline=$((SECONDS + 10))
  until [[ -S "$SLURM_DIR/munge.sock" ]]; do
    if ((SECONDS >= deadline)) || ! kill -0 "$SLURM_MUNGED_PID" 2>/dev/null; then
      echo "slurm_up: munged did not start" >&2
      slurm_show_logs
      return 1
    fi
    sleep 0.05
  done

  /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" </dev/null >"$SLURM_DIR/slurmctld.out" 2>&1 {HOSTS_LOCK_FD}>&- &
  SLURM_CTLD_PID=$!
  disown "$SLURM_CTLD_PID"
  for host in "${HOSTS_NAMES[@]}"; do
    nsenter --net="/run/netns/$(host_ns "$host")" -- /usr/sbin/slurmd -D -N "$host" -f "$SLURM_CONF" \
      </dev/null >"$SLURM_DIR/slurmd.$host.out" 2>&1 {HOSTS_LOCK_FD}>&- &
    disown "$!"
  done

  # Every node idle: then salloc gets them at once.
  deadline=$((SECONDS + 30))
  local idle
  while :; do
    idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l)
    ((idle == ${#HOSTS_NAMES[@]})) && break
    if ((SECONDS >= deadline)); then
      echo "slurm_up: nodes not idle within 30 s:" >&2
      sinfo -N >&2 || true
      slurm_show_logs
      return 1
    fi
    sleep 0.2
  done
}

# Waits until nothing but its sshd and slurmd runs on the host.
# slurm_wait_only_daemons HOST SECONDS
slurm_wait_only_daemons() {
  local host=$1 deadline=$((SECONDS + ${2:-10})) p left
  while :; do
    left=""
    for p in $(host_pids "$host"); do
      [[ "$p" == "${HOSTS_SSHD_PID[$host]:-none}" ]] && continue
      [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == slurmd ]] && continue
      [[ -e "/proc/$p" ]] && left+="$p "
    done
    [[ -z "$left" ]] && return 0
    if ((SECONDS >= deadline)); then
      echo "host $host still runs:" >&2
      for p in $left; do echo "  $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" >&2; done
      return 1
    fi
    sleep 0.1
  done
}

# Waits until Slurm's queue is empty. A cancelled or ended allocation passes through the
# CG (completing) state while slurmd cleans up its steps, so an empty queue right after
# salloc returns is not guaranteed; CI once saw job 1 still CG there.
# slurm_wait_queue_empty SECONDS
slurm_wait_queue_empty() {
  local deadline=$((SECONDS + ${1:-15}))
  until [[ -z "$(squeue -h)" ]]; do
    if ((SECONDS >= deadline)); then
      echo "jobs left in the queue:" >&2
      squeue >&2
      return 1
    fi
    sleep 0.2
  done
}
