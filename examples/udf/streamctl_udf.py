"""The streamctl `exec` protocol, so that a Python UDF is one function (streamctl-pipeline(5)).

streamctl writes a batch of records to the command's stdin, one JSON object a line, then an
empty line; the command answers with any number of JSON object lines, then an empty line, and
flushes. `run(fn)` does that: `fn` takes a record (a dict) and returns a dict, a list of dicts
(zero, one or many records out), or None (no record out).

    import streamctl_udf
    streamctl_udf.run(lambda r: {**r, "n": r["n"] + 1})
"""

import json
import sys


def run(fn):
    read = sys.stdin.readline
    write = sys.stdout.write
    encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    decode = json.loads
    while True:
        line = read()
        if not line:  # end of input: streamctl closed our stdin
            sys.stdout.flush()
            return
        if line == "\n":  # the batch is over: say so, and hand over what it gave
            write("\n")
            sys.stdout.flush()
            continue
        result = fn(decode(line))
        if result is None:
            continue
        if isinstance(result, dict):
            write(encode(result) + "\n")
        else:
            for record in result:
                write(encode(record) + "\n")
