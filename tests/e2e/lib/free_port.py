"""Prints a tcp port free on 127.0.0.1 now (the kernel's choice for port 0)."""
import socket

s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
