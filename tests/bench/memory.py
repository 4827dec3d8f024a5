#!/usr/bin/env python3
"""Peak memory of keyed state (issue 9, item 7). A measuring tool, not a test: it prints
figures and fails only when a run fails or its output is wrong.

    tests/bench/memory.py [--keys N] [--json-records N] [--streamctl PATH]

  1. keyed count: a generator (profile counter) feeds a keyed window (count per key, ten
     years long, so every key stays in state until the end) with one record per key, at
     parallelism 1 and 2;
  2. count per user over a JSON lines file of --json-records clicks (100,000 users).

For each run it prints the peak RSS of every process (the coordinator and each worker, from
/proc/PID/status VmHWM sampled every 50 ms, whose last sample before a process exits is its
peak) and, for the keyed count, the bytes of RSS per key: (sum of the workers' peaks - the
same job's peaks with 1,000 keys) / keys, and that minus the key's own bytes.
"""
import argparse, glob, os, shutil, subprocess, sys, tempfile, threading, time

def descendants(root):
    """PIDs of root and every process below it."""
    children = {}
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(status) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            children.setdefault(int(fields["PPid"]), []).append(int(fields["Pid"]))
        except (OSError, KeyError, ValueError):
            pass
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out

def peak_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None

def run_measured(cmd, env):
    """Runs cmd; returns (seconds, {pid: (role, peak bytes)})."""
    start = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peaks, roles = {}, {}
    stop = threading.Event()
    def sample():
        while not stop.is_set():
            for pid in descendants(proc.pid):
                peak = peak_of(pid)
                if peak is None:
                    continue
                peaks[pid] = max(peaks.get(pid, 0), peak)
                if pid not in roles:
                    try:
                        with open(f"/proc/{pid}/cmdline", "rb") as f:
                            argv = f.read().split(b"\0")
                        roles[pid] = "worker" if b"worker" in argv else "coordinator"
                    except OSError:
                        roles[pid] = "?"
            time.sleep(0.05)
    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = proc.communicate()
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return time.time() - start, {pid: (roles.get(pid, "?"), peak) for pid, peak in peaks.items()}

def mib(n):
    return f"{n / 1048576:,.1f} MiB"

def report(label, seconds, peaks):
    workers = sum(p for role, p in peaks.values() if role == "worker")
    parts = ", ".join(f"{role} {mib(p)}" for role, p in sorted(peaks.values(), key=lambda x: x[0]))
    print(f"{label}: {seconds:.1f} s; peak RSS: {parts}; workers together {mib(workers)}")
    return workers

def keyed_pipeline(path, out, keys):
    with open(path, "w") as f:
        f.write(f'''name = "bench-memory"
[sources.g]
type = "generator"
count = {keys}
[operators.per_key]
type = "window"
inputs = ["g"]
key = ["seq"]
window = {{ kind = "tumbling", size = "3650d" }}
aggregates = {{ n = "count()" }}
[sinks.out]
type = "file"
inputs = ["per_key"]
path = "{out}"
''')

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--json-records", type=int, default=10_000_000)
    ap.add_argument("--streamctl", default=os.environ.get("STREAMCTL", os.path.join(os.path.dirname(__file__), "../../build/cli/streamctl")))
    args = ap.parse_args()
    streamctl = os.path.realpath(args.streamctl)
    work = tempfile.mkdtemp(prefix="streamctl-membench.")
    env = dict(os.environ, STREAMCTL_STATE_DIR=os.path.join(work, "state"))
    try:
        # A key is the canonical bytes of an int (state/key_codec.hpp): a tag and up to 9 bytes.
        key_bytes = 1 + len(str(args.keys)) // 2
        print(f"== generator -> keyed count, one record per key, {args.keys:,} keys (key ~{key_bytes} bytes)")
        for p in (1, 2):
            out = os.path.join(work, "out")
            baseline = 0
            for keys in (1000, args.keys):
                shutil.rmtree(out, ignore_errors=True)
                keyed_pipeline(os.path.join(work, "keyed.toml"), out, keys)
                seconds, peaks = run_measured([streamctl, "run", os.path.join(work, "keyed.toml"), "-p", str(p)], env)
                rows = sum(1 for part in glob.glob(os.path.join(out, "part-*")) for _ in open(part))
                if rows != keys:
                    sys.exit(f"expected {keys} rows, got {rows}")
                if keys == 1000:
                    baseline = sum(pk for role, pk in peaks.values() if role == "worker")
                    continue
                workers = report(f"parallelism {p}", seconds, peaks)
                per_key = (workers - baseline) / keys
                print(f"  {per_key:.0f} bytes of RSS per key ({per_key - key_bytes:.0f} beyond the key's own bytes)")

        n = args.json_records
        print(f"\n== JSON file -> count per user, {n:,} lines")
        gen = os.path.join(work, "gen.toml")
        with open(gen, "w") as f:
            f.write(f'''name = "bench-memory-gen"
[sources.g]
type = "generator"
profile = "clicks"
users = 100000
count = {n}
seed = 1
[sinks.out]
type = "file"
inputs = ["g"]
path = "{work}/gen"
''')
        subprocess.run([streamctl, "run", gen], env=env, check=True)
        data = os.path.join(work, "clicks.jsonl")
        os.rename(os.path.join(work, "gen", "part-0-0.json"), data)
        count = os.path.join(work, "count.toml")
        with open(count, "w") as f:
            f.write(f'''name = "bench-memory-count"
[sources.in]
type = "file"
path = "{data}"
event_time = "ts"
[operators.per_user]
type = "window"
inputs = ["in"]
key = ["user"]
window = {{ kind = "tumbling", size = "3650d" }}
aggregates = {{ n = "count()" }}
[sinks.out]
type = "file"
inputs = ["per_user"]
path = "{work}/count"
''')
        for p in (1, 2):
            shutil.rmtree(os.path.join(work, "count"), ignore_errors=True)
            seconds, peaks = run_measured([streamctl, "run", count, "-p", str(p)], env)
            report(f"parallelism {p}", seconds, peaks)
    finally:
        shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
