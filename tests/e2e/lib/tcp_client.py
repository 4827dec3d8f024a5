"""Sends lines to a tcp source, as a real client would: connects (retrying while the job
starts), writes in random-sized slices so that lines are cut across packets, closes.

usage: tcp_client.py PORT FILE [SEED]   (FILE's bytes are sent as they are)
"""
import random
import socket
import sys
import time

port, path = int(sys.argv[1]), sys.argv[2]
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
data = open(path, "rb").read()
deadline = time.time() + 60
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port))
        break
    except OSError:
        if time.time() > deadline:
            raise
        time.sleep(0.05)
at = 0
while at < len(data):
    step = rng.randint(1, 65536)
    s.sendall(data[at:at + step])
    at += step
s.shutdown(socket.SHUT_WR)
# Wait for the source to close its side: the bytes were read, not just queued.
s.settimeout(60)
while s.recv(4096):
    pass
s.close()
