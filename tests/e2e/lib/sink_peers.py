#!/usr/bin/env python3
"""Peers for the tcp and zmq sink tests: real servers that write what they receive to a file,
one line per line or message, flushed as it comes.

  sink_peers.py free-port
  sink_peers.py tcp PORT OUT [--close-at N,N,...] [--reopen-after SECONDS]
      Accepts connections one after another on 127.0.0.1:PORT and appends every complete line
      to OUT. With --close-at, closes the connection (and the listening socket) abruptly once
      it has written the Nth line in all (each N once), and listens again after
      --reopen-after seconds: the sink sees a peer that went away mid-stream.
  sink_peers.py pull ENDPOINT OUT      binds a PULL socket, one line per message
  sink_peers.py sub ENDPOINT OUT       binds a SUB socket subscribed to everything
Runs until killed; writes OUT.ready once it listens.
"""
import socket
import sys
import time

from free_port import free_port


def listen(port):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(8)
    return server


def tcp(port, out_path, close_at, reopen_after):
    written = 0
    with open(out_path, "a") as out:
        server = listen(port)
        open(out_path + ".ready", "w").close()
        while True:
            conn, _ = server.accept()
            pending = b""
            closed_early = False
            while True:
                data = conn.recv(65536)
                if not data:
                    break  # an unterminated last line is dropped
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    out.write(line.decode() + "\n")
                    written += 1
                out.flush()
                if close_at and written >= close_at[0]:
                    while close_at and written >= close_at[0]:
                        close_at.pop(0)
                    # Abruptly: whatever the socket still holds unread is lost (an RST).
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    closed_early = True
                    break
            conn.close()
            if closed_early:
                server.close()
                time.sleep(reopen_after)
                server = listen(port)


def zmq_peer(kind, endpoint, out_path):
    import zmq

    context = zmq.Context()
    sock = context.socket(zmq.PULL if kind == "pull" else zmq.SUB)
    if kind == "sub":
        sock.setsockopt(zmq.SUBSCRIBE, b"")
    sock.bind(endpoint)
    with open(out_path, "a") as out:
        open(out_path + ".ready", "w").close()
        while True:
            out.write(sock.recv().decode() + "\n")
            out.flush()


def main(argv):
    if argv[0] == "free-port":
        print(free_port())
        return 0
    if argv[0] == "tcp":
        close_at, reopen_after = [], 0.5
        rest = argv[3:]
        while rest:
            if rest[0] == "--close-at":
                close_at = sorted(int(n) for n in rest[1].split(","))
            elif rest[0] == "--reopen-after":
                reopen_after = float(rest[1])
            else:
                sys.exit("unknown option " + rest[0])
            rest = rest[2:]
        return tcp(int(argv[1]), argv[2], close_at, reopen_after)
    if argv[0] in ("pull", "sub"):
        return zmq_peer(argv[0], argv[1], argv[2])
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
