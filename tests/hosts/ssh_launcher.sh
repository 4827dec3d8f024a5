#!/usr/bin/env bash
# The ssh launcher against real sshd: three namespace hosts (and a fourth whose sshd is
# stopped), then the [.ssh] unit tests (tests/unit/pipeline/ssh_launcher_hosts_test.cpp):
# prepare() on every host, an unreachable host, a wrong binary path, another version,
# ship_binary once per host, a remote worker's exit on its ssh's death and on the
# coordinator's silence, and a remote worker refusing another version.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
UNIT_TESTS=${UNIT_TESTS:-$(dirname "$STREAMCTL")/../tests/unit_tests}
[[ -x "$UNIT_TESTS" ]] || fail "no unit_tests binary at '$UNIT_TESTS' (set UNIT_TESTS)"

mkdir -p "$WORK/disk"
HOSTS_PRIVATE_DIRS="$WORK/disk"
hosts_up 4
host_stop_sshd h4

STREAMCTL_SSH_CONFIG="$HOSTS_SSH_CONFIG" \
STREAMCTL_SSH_HOSTS="h1 h2 h3" \
STREAMCTL_SSH_DOWN_HOST=h4 \
STREAMCTL_SSH_NETNS_PREFIX="$HOSTS_PREFIX-" \
STREAMCTL_SSH_COORDINATOR_ADDRESS="$HOSTS_COORDINATOR_ADDRESS" \
STREAMCTL_SSH_DISK="$WORK/disk" \
  "$UNIT_TESTS" '[.ssh]'

for host in h1 h2 h3; do host_wait_only_sshd "$host" 10 || fail "processes left on $host"; done
echo "ssh_launcher: ok"
