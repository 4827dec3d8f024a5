#!/usr/bin/env python3
"""Benchmarks of checkpoints, savepoints, restore and rescale (issue 4). A measuring tool,
not a test: it prints figures and fails only when a run fails.

    tests/bench/checkpoint.py [--keys N,N...] [--updates N] [--streamctl PATH] [--skip-rescale]

For each key count (default 3,300,000 and 33,000,000: about 100 MB and 1 GB of keyed state
as serialised, ~31 bytes a key), a generator feeds a keyed window (count and sum per key, ten
years long, so the state only grows) with `updates` records per key (default 3):

  1. throughput without checkpoints, and with a checkpoint every second (full snapshots);
  2. a savepoint of the whole state at the end of input (--savepoint-on-exit): its size, raw
     and compressed, and the time to take it;
  3. restore: time from start to "records flowing" of a run restoring that savepoint, against
     `streamctl snapshot verify` (which reads, checksums and decompresses every segment) and
     against the start-up of a run with no state;
  4. rescale downtime of a running job from 1 to 2 subtasks once it holds the state: from the
     savepoint that stops the sources to records flowing again (the coordinator's figure).

Figures depend on the machine and its load; run it twice and compare.
"""
import argparse, glob, json, os, re, shutil, subprocess, sys, tempfile, time

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", default="3300000,33000000")
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--streamctl", default=os.environ.get("STREAMCTL", os.path.join(os.path.dirname(__file__), "../../build/cli/streamctl")))
    ap.add_argument("--skip-rescale", action="store_true")
    args = ap.parse_args()
    streamctl = os.path.realpath(args.streamctl)
    work = tempfile.mkdtemp(prefix="streamctl-ckbench.")
    env = dict(os.environ, STREAMCTL_STATE_DIR=os.path.join(work, "state"))
    try:
        for keys in [int(k) for k in args.keys.split(",")]:
            bench(streamctl, work, env, keys, args.updates, args.skip_rescale)
    finally:
        shutil.rmtree(work, ignore_errors=True)

def pipeline(work, name, keys, records):
    path = os.path.join(work, name + ".toml")
    with open(path, "w") as f:
        f.write(f'''name = "{name}"
[checkpoint]
dir = "{work}/ck"
retain = 1
timeout = "10m"
[sources.g]
type = "generator"
profile = "counter"
count = {records}
event_time = "ts"
[operators.k]
type = "map"
inputs = ["g"]
set = {{ key = "seq % {keys}" }}
[operators.per_key]
type = "window"
inputs = ["k"]
key = ["key"]
window = {{ kind = "tumbling", size = "3650d" }}
aggregates = {{ n = "count()", s = "sum(seq)" }}
[sinks.out]
type = "file"
inputs = ["per_key"]
path = "{work}/out-{name}"
''')
    return path

def run(cmd, env, watch=None):
    """Runs cmd; returns (seconds, stderr text, {pattern: seconds when first seen})."""
    start = time.monotonic()
    seen = {}
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in p.stderr:
        lines.append(line)
        for pattern in watch or []:
            if pattern not in seen and pattern in line:
                seen[pattern] = time.monotonic() - start
    code = p.wait()
    elapsed = time.monotonic() - start
    text = "".join(lines)
    if code != 0:
        sys.exit(f"{' '.join(cmd)} exited {code}:\n{text[-2000:]}")
    return elapsed, text, seen

def mb(n):
    return f"{n / 1e6:,.1f} MB"

def bench(streamctl, work, env, keys, updates, skip_rescale):
    records = keys * updates
    print(f"== {keys:,} keys, {records:,} records ({updates} per key), keyed window state")
    name = f"ck{keys}"
    toml = pipeline(work, name, keys, records)

    plain, _, _ = run([streamctl, "run", toml], env)
    print(f"  no checkpoints:          {plain:6.2f} s  {records / plain:12,.0f} records/s")
    timed, log, _ = run([streamctl, "-vv", "run", toml, "--set", "checkpoint.interval=1s"], env)
    done = [(int(b), int(ms)) for b, ms in re.findall(r"checkpoint \d+ complete: (\d+) bytes in (\d+) ms", log)]
    failed = len(re.findall(r"checkpoint \d+ failed", log))
    print(f"  checkpoint every 1 s:    {timed:6.2f} s  {records / timed:12,.0f} records/s  "
          f"({100 * (timed - plain) / plain:+.1f}% time; {len(done)} checkpoints"
          + (f", largest {mb(max(b for b, _ in done))} in {max(ms for _, ms in done)} ms" if done else "")
          + (f", {failed} failed" if failed else "") + ")")

    _, log, _ = run([streamctl, "-v", "run", toml, "--savepoint-on-exit"], env)
    m = re.search(r"savepoint \d+ complete: (\S+) \((\d+) bytes, (\d+) ms\)", log)
    savepoint, size, ms = m.group(1), int(m.group(2)), int(m.group(3))
    inspect = subprocess.run([streamctl, "snapshot", "inspect", "--json", savepoint], env=env, capture_output=True, text=True)
    raw = raw_bytes(inspect.stdout, savepoint, streamctl, env)
    print(f"  savepoint:               {mb(size)} in the files, {mb(raw)} raw (ratio {raw / size:.2f}), "
          f"taken in {ms} ms ({raw / 1e6 / (ms / 1000):,.0f} MB/s raw)")

    empty = pipeline(work, name + "-empty", keys, 1)
    _, _, seen = run([streamctl, "-v", "run", empty], env, ["records flowing"])
    startup = seen["records flowing"]
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        cache = "cold cache"
    except OSError:
        cache = "warm cache"
    _, _, seen = run([streamctl, "-v", "run", toml, "--from-savepoint", savepoint, "--savepoint-on-exit"], env,
                     ["records flowing"])
    restore = seen["records flowing"] - startup
    verify, _, _ = run([streamctl, "snapshot", "verify", savepoint], env)
    print(f"  restore:                 {restore:6.2f} s beyond a start-up of {startup:.2f} s ({cache}); "
          f"reading and decompressing the files (snapshot verify): {verify:.2f} s; ratio {restore / verify:.2f}")

    if skip_rescale:
        return
    endless = pipeline(work, name + "-rescale", keys, records * 1000)
    p = subprocess.Popen([streamctl, "-v", "run", endless], env=env, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, "rescale.log"), "w"))
    try:
        while True:
            time.sleep(0.5)
            st = subprocess.run([streamctl, "status", name + "-rescale", "--json"], env=env, capture_output=True, text=True)
            if st.returncode != 0:
                continue
            ops = {o["name"]: o for o in json.loads(st.stdout)["operators"]}
            if sum(s["records_in"] for s in ops["per_key"]["subtasks"]) >= records:
                break
        r = subprocess.run([streamctl, "rescale", name + "-rescale", "--parallelism", "2"], env=env,
                           capture_output=True, text=True)
        m = re.search(r"downtime (\d+) ms", r.stderr)
        print(f"  rescale 1 -> 2 subtasks: downtime {m.group(1) if m else '?'} ms" + ("" if m else f" ({r.stderr.strip()})"))
    finally:
        subprocess.run([streamctl, "cancel", name + "-rescale"], env=env, capture_output=True)
        p.wait()

def raw_bytes(text, savepoint, streamctl, env):
    total = 0
    for path in glob.glob(os.path.join(savepoint, "*.snap")):
        out = subprocess.run([streamctl, "snapshot", "inspect", "--json", path], env=env, capture_output=True, text=True)
        total += json.loads(out.stdout).get("raw_bytes", 0)
    return total

if __name__ == "__main__":
    main()
