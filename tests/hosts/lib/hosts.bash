# Hosts for multi-host tests, made of network namespaces on this machine (sourced; needs root).
#
#   source "$SOURCE_DIR/tests/e2e/lib/common.bash"   # optional: WORK, fail, run_expect, ...
#   source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
#   hosts_up 3                 # h1 h2 h3, each a namespace on a bridge running its own sshd
#   ssh -F "$HOSTS_SSH_CONFIG" h2 hostname
#   host_kill_all h2; host_cut h3; host_restore h3; host_exec h1 ip addr; host_pids h1
#
# The coordinator (this shell) stays in the root namespace, on the bridge's first address
# ($HOSTS_COORDINATOR_ADDRESS); host hN is $HOSTS_SUBNET.(10+N). The hosts share this
# machine's filesystem, except the directories listed in HOSTS_PRIVATE_DIRS (set before
# hosts_up): each host's sshd, and so everything started over ssh, sees a tmpfs of its own
# there (a disk that is the host's own). A trap tears everything down on any exit: the
# hosts' processes, the namespaces, the bridge, the ssh ControlMasters, the temp dir.
#
# Without root or without a tool the test cannot run: it says why and exits 77 (skipped).
# Names and the subnet are fixed and unusual (prefix "sctl", 10.213.77.0/24); runs are
# serialised by a lock file across worktrees, and hosts_up first removes what a killed run
# left with the same prefix.

HOSTS_PREFIX=${HOSTS_PREFIX:-sctl}
HOSTS_SUBNET=${HOSTS_SUBNET:-10.213.77}
HOSTS_BRIDGE="${HOSTS_PREFIX}br0"
HOSTS_COORDINATOR_ADDRESS="$HOSTS_SUBNET.1"
HOSTS_NAMES=()
HOSTS_PRIVATE_DIRS=${HOSTS_PRIVATE_DIRS:-}
HOSTS_CONTROL_MASTER=${HOSTS_CONTROL_MASTER:-0}
HOSTS_DIR=""
declare -A HOSTS_SSHD_PID=()

hosts_skip() {
  echo "SKIP: $*" >&2
  exit 77
}

hosts_require() {
  [[ $(id -u) == 0 ]] || hosts_skip "multi-host tests need root (network namespaces)"
  local tool
  for tool in ip ssh ssh-keygen unshare nsenter flock nc; do
    command -v "$tool" >/dev/null || hosts_skip "'$tool' is not installed"
  done
  [[ -x /usr/sbin/sshd ]] || hosts_skip "sshd is not installed (Debian: openssh-server)"
  ip netns list >/dev/null 2>&1 || hosts_skip "'ip netns' does not work here"
  # Root in a container without CAP_SYS_ADMIN or CAP_NET_ADMIN cannot make the hosts.
  unshare --net true 2>/dev/null || hosts_skip "cannot create a network namespace here (unshare --net failed)"
}

host_ns() { echo "$HOSTS_PREFIX-$1"; }
host_ip() { echo "$HOSTS_SUBNET.$((10 + ${1#h}))"; }

# Every process of the host (its namespace), one pid a line.
host_pids() { ip netns pids "$(host_ns "$1")" 2>/dev/null || true; }

# Runs a command in the host's network namespace, and in its sshd's mounts (its private
# dirs) and host name while that sshd runs.
host_exec() {
  local host=$1
  shift
  local pid=${HOSTS_SSHD_PID[$host]:-}
  if [[ -n "$pid" && -e "/proc/$pid/ns/mnt" ]]; then
    nsenter --net="/run/netns/$(host_ns "$host")" --mount="/proc/$pid/ns/mnt" --uts="/proc/$pid/ns/uts" -- "$@"
  else
    nsenter --net="/run/netns/$(host_ns "$host")" -- "$@"
  fi
}

host_ssh() {
  local host=$1
  shift
  ssh -F "$HOSTS_SSH_CONFIG" "$host" -- "$@"
}

# kill -9 of every process on the host, its sshd included, until none is left.
host_kill_all() {
  local pids
  for _ in $(seq 50); do
    pids=$(host_pids "$1")
    [[ -z "$pids" ]] && return 0
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  echo "host_kill_all $1: processes left: $(host_pids "$1")" >&2
  return 1
}

host_stop_sshd() {
  local pid=${HOSTS_SSHD_PID[$1]:-}
  [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
  HOSTS_SSHD_PID[$1]=""
}

# The host's link goes down (a cut cable: no FIN, no RST) and comes back.
host_cut() { ip -n "$(host_ns "$1")" link set eth0 down; }
host_restore() { ip -n "$(host_ns "$1")" link set eth0 up; }

# Waits until nothing but the host's sshd runs there (after its workers were told to go).
# host_wait_only_sshd HOST SECONDS
host_wait_only_sshd() {
  local host=$1 deadline=$((SECONDS + ${2:-10})) pids
  while :; do
    pids=$(host_pids "$host" | grep -vx "${HOSTS_SSHD_PID[$host]:-none}" || true)
    [[ -z "$pids" ]] && return 0
    if ((SECONDS >= deadline)); then
      echo "host $host still runs:" >&2
      local p
      for p in $pids; do echo "  $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" >&2; done
      return 1
    fi
    sleep 0.1
  done
}

hosts_clean_stale() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$HOSTS_PREFIX-h" || true); do
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n "$pids" ]] && kill -9 $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$HOSTS_BRIDGE" 2>/dev/null || true
  local link
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^${HOSTS_PREFIX}h[0-9]*a$" || true); do
    ip link del "$link" 2>/dev/null || true
  done
}

hosts_teardown() {
  local host
  if [[ -n "$HOSTS_DIR" && "$HOSTS_CONTROL_MASTER" == 1 ]]; then
    for host in "${HOSTS_NAMES[@]}"; do
      ssh -F "$HOSTS_SSH_CONFIG" -O exit "$host" >/dev/null 2>&1 || true
    done
  fi
  for host in "${HOSTS_NAMES[@]}"; do
    local pids
    pids=$(host_pids "$host")
    [[ -n "$pids" ]] && kill -9 $pids 2>/dev/null || true
  done
  hosts_clean_stale
  [[ -n "$HOSTS_DIR" ]] && rm -rf "$HOSTS_DIR"
  HOSTS_DIR=""
}

# Runs hosts_teardown on exit, before whatever EXIT trap was there (common.bash's cleanup).
hosts_install_trap() {
  local previous
  previous=$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")
  # shellcheck disable=SC2064
  trap "hosts_teardown; $previous" EXIT
}

hosts_start_sshd() {
  local host=$1 ns ip
  ns=$(host_ns "$host")
  ip=$(host_ip "$host")
  cat >"$HOSTS_DIR/sshd_$host.conf" <<EOF
ListenAddress $ip
Port 22
HostKey $HOSTS_DIR/host_key
PidFile none
AuthorizedKeysFile $HOSTS_DIR/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
ClientAliveInterval 1
ClientAliveCountMax 3
MaxStartups 100
MaxSessions 100
LogLevel ERROR
EOF
  # exec all the way down: the pid of the background job is sshd's.
  # A host name of its own too (a UTS namespace), for messages that name the host.
  ip netns exec "$ns" unshare --mount --uts --propagation private -- sh -c '
    hostname "$4" || exit 1
    for d in $1; do mount -t tmpfs -o size=512m,mode=0755 tmpfs "$d" || exit 1; done
    exec /usr/sbin/sshd -D -f "$2" -E "$3"' sh "$HOSTS_PRIVATE_DIRS" "$HOSTS_DIR/sshd_$host.conf" \
    "$HOSTS_DIR/sshd_$host.log" "$host" </dev/null {HOSTS_LOCK_FD}>&- &
  HOSTS_SSHD_PID[$host]=$!
  disown "$!" # its kill -9 at teardown is no news
}

# hosts_up N: hosts h1..hN, each with its sshd listening; exports HOSTS_SSH_CONFIG,
# HOSTS_COORDINATOR_ADDRESS and HOSTS_DIR.
hosts_up() {
  local count=$1 i host
  hosts_require
  local d
  for d in $HOSTS_PRIVATE_DIRS; do
    [[ -d "$d" ]] || { echo "hosts_up: HOSTS_PRIVATE_DIRS: '$d' is not a directory" >&2; return 1; }
  done
  # One run at a time on this machine, whichever worktree or ctest it comes from.
  exec {HOSTS_LOCK_FD}>/run/lock/streamctl-hosts.lock
  flock -w 900 "$HOSTS_LOCK_FD" || { echo "hosts_up: another run holds the hosts lock" >&2; return 1; }
  hosts_clean_stale
  HOSTS_DIR=$(mktemp -d /tmp/sctl-hosts.XXXXXX)
  hosts_install_trap
  ssh-keygen -q -t ed25519 -N '' -f "$HOSTS_DIR/host_key" -C host
  ssh-keygen -q -t ed25519 -N '' -f "$HOSTS_DIR/id" -C coordinator
  cp "$HOSTS_DIR/id.pub" "$HOSTS_DIR/authorized_keys"
  mkdir -p /run/sshd

  ip link add "$HOSTS_BRIDGE" type bridge
  ip addr add "$HOSTS_COORDINATOR_ADDRESS/24" dev "$HOSTS_BRIDGE"
  ip link set "$HOSTS_BRIDGE" up
  HOSTS_SSH_CONFIG="$HOSTS_DIR/ssh_config"
  : >"$HOSTS_SSH_CONFIG"
  for i in $(seq "$count"); do
    host="h$i"
    HOSTS_NAMES+=("$host")
    local ns root_end host_end
    ns=$(host_ns "$host")
    root_end="${HOSTS_PREFIX}h${i}a"
    host_end="${HOSTS_PREFIX}h${i}b"
    ip netns add "$ns"
    ip link add "$root_end" type veth peer name "$host_end"
    ip link set "$root_end" master "$HOSTS_BRIDGE" up
    ip link set "$host_end" netns "$ns"
    ip -n "$ns" link set "$host_end" name eth0
    ip -n "$ns" addr add "$(host_ip "$host")/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$HOSTS_COORDINATOR_ADDRESS"
    hosts_start_sshd "$host"
    cat >>"$HOSTS_SSH_CONFIG" <<EOF
Host $host
  HostName $(host_ip "$host")
EOF
  done
  cat >>"$HOSTS_SSH_CONFIG" <<EOF
Host *
  User root
  IdentityFile $HOSTS_DIR/id
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  ConnectTimeout 5
EOF
  if [[ "$HOSTS_CONTROL_MASTER" == 1 ]]; then
    cat >>"$HOSTS_SSH_CONFIG" <<EOF
  ControlMaster auto
  ControlPath $HOSTS_DIR/cm-%C
  ControlPersist 60
EOF
  fi
  export HOSTS_SSH_CONFIG HOSTS_COORDINATOR_ADDRESS HOSTS_DIR
  for host in "${HOSTS_NAMES[@]}"; do
    local deadline=$((SECONDS + 20))
    until nc -z -w 1 "$(host_ip "$host")" 22 2>/dev/null; do
      if ((SECONDS >= deadline)) || ! kill -0 "${HOSTS_SSHD_PID[$host]}" 2>/dev/null; then
        echo "hosts_up: sshd of $host did not start:" >&2
        cat "$HOSTS_DIR/sshd_$host.log" >&2 || true
        return 1
      fi
      sleep 0.05
    done
  done
}
