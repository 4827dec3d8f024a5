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
    out = sys.stdout
    flush = out.flush
    encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    decode = json.loads
    # Output lines are collected and written once per batch (or per 4096 lines): one pipe
    # write per record, as with PYTHONUNBUFFERED=1, would cost more than the record itself.
    lines = []
    add = lines.append

    def write_out():
        out.write("".join(lines))
        lines.clear()

    # Iterating stdin hands over each line as soon as it has arrived (no wait for a full
    # buffer), so the empty line that ends a batch is answered at once.
    for line in sys.stdin:
        if line == "\n":  # the batch is over: say so, and hand over what it gave
            add("\n")
            write_out()
            flush()
            continue
        result = fn(decode(line))
        if result is None:
            continue
        if type(result) is dict:
            add(encode(result) + "\n")
        else:
            for record in result:
                add(encode(record) + "\n")
        if len(lines) >= 4096:
            write_out()
    write_out()  # end of input: streamctl closed our stdin
    flush()
