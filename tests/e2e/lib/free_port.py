"""Prints a tcp port free on 127.0.0.1 now, for a test to listen on.

Not the kernel's choice for port 0: that comes from the ephemeral range, where every outgoing
connection and every bind to port 0 of the tests running beside this one (ZeroMQ's endpoints,
the peers of other sink tests) also takes its ports, so the port could be taken between this
check and the test's own bind. A random port below that range is taken only by another test
that picked the same one (ctest runs two at a time here, from over 20,000 ports).
"""
import random
import socket


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    low, high = 10000, max(ephemeral_low() - 1, 10001)
    for _ in range(200):
        port = random.randint(low, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    # Every try taken (a crowded machine): the kernel's choice, with the race described above.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    print(free_port())
