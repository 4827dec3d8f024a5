#!/usr/bin/env python3
"""Benchmarks of checkpoints, savepoints, restore and rescale (issues 4 and 12). A measuring
tool, not a test: it prints figures and fails only when a run fails.

    tests/bench/checkpoint.py [--keys N,N...] [--updates N] [--runs N] [--streamctl PATH]
                              [--changing P,P...] [--seconds T] [--rate R] [--skip-rescale]
                              [--incremental [--rolling [--full-every N]]] [--only-rescale] [--logs DIR]

For each key count (default 3,300,000 and 33,000,000: about 100 MB and 1 GB of keyed state
as serialised, ~31 bytes a key), a generator feeds a keyed window (count and sum per key, ten
years long, so the state only grows) with `updates` records per key (default 3):

  1. throughput of loading that state, without checkpoints and with a checkpoint every second
     (full snapshots): median of --runs runs (default 3) of wall time and of CPU time (user +
     sys of streamctl and its workers, from getrusage(RUSAGE_CHILDREN));
  2. a savepoint of the whole state at the end of input (--savepoint-on-exit): its size, raw
     and compressed, and the time to take it;
  3. restore: time from start to "records flowing" of a run restoring that savepoint, against
     `streamctl snapshot verify` (which reads, checksums and decompresses every segment) and
     against the start-up of a run with no state;
  4. with --changing P,...: the steady phase, once per P (below);
  5. rescale downtime of a running job from 1 to 2 subtasks once it holds the state, then
     back from 2 to 1: from the snapshot that stops the sources to records flowing again
     (the coordinator's figure, printed by `streamctl rescale`); once for a job without
     periodic checkpoints (the rescale takes a savepoint) and once for one with a checkpoint
     every second (the rescale takes a checkpoint, incremental with --incremental; the second
     rescale waits for a periodic checkpoint after the first, since a task's first checkpoint
     after it starts is full). With --changing P,... once per P, the records after the load drawing their keys from P%
     of them as in the steady phase. --only-rescale measures this alone.

The steady phase (--changing P). Each run restores the savepoint of step 2 (every key
loaded) and the generator, whose position the savepoint holds, goes on with M more records
(seq from keys x updates on). Their keys are drawn uniformly, by `hash(seq)`, from a fixed
subset of S = P% of all keys, spread evenly over the key space:

    key = if(seq < LOADED, seq % KEYS, ((hash(seq) % S + S) % S) * KEYS / S)

So whatever the rate, no more than P% of the keys change between two checkpoints (one a
second): "P% of keys changing per second" is that upper bound. It is reached when a second
carries several times S records; the output gives the records a second and the share of keys
they are expected to touch, P% x (1 - exp(-records a second / S)). With --rate R (records per
second, the generator's `rate`) the phase runs at that fixed rate and M = R x --seconds;
without it (the default) the rate is unlimited and M = --seconds x the median load throughput
without checkpoints of step 1, so that the phase lasts about --seconds. Each run has a checkpoint
directory of its own, as a person's one restore of a savepoint would: there the savepoint is
adopted as the newest checkpoint (savepoint_adoption.hpp), and the first checkpoint builds on it.

What is measured in the steady phase: the wall and CPU time of a run of the M records minus
those of a run of the same job with no records after the restore (median of --runs each;
both restore, start up and drain the same state, so the difference is the phase alone);
throughput is M over that difference, in records per wall second and per CPU second, without
checkpoints and with a checkpoint every second. With a fixed --rate the wall figure is the
rate; compare the CPU figures. Of the runs with checkpoints, from their -vv logs:
  - checkpoint size (the coordinator's "checkpoint N complete: B bytes in D ms", B summed
    over the tasks' files) and duration D: from the barrier's injection to the _metadata
    written, the asynchronous write included;
  - the longest pause of a task: the worker's "checkpoint N: state taken in X ms", the time
    its loop is stopped to copy the state of its chain (chain->snapshot()), before the
    barrier is passed on and the write goes to the background; its maximum over the tasks
    and the checkpoints of the runs. It is the only per-subtask figure of the synchronous
    part, and only in the debug log: `streamctl status --json` shows per subtask the last
    checkpoint's duration_ms (barrier to durable file, asynchronous write included) and
    alignment_ms only. Alignment is not measured here: the job is one fused chain (source to
    sink in one task), which has no input channels to align.
  - with --snapshot deferred, the longest stall after the barrier: the worker's "checkpoint
    N: deferred groups written; longest stall X ms", the longest one batch, watermark, timer
    tick or the next checkpoint was held serialising key groups still frozen for checkpoint N,
    or waiting for the writer to finish one (also last_checkpoint.stall_ms in status --json).
  The job's final checkpoint (input ended, windows fired, no window state) is left out.

Checkpoints are full snapshots unless --incremental sets [checkpoint] incremental = true;
that writes only the key groups that changed, and of those (keys drawn uniformly change every
group within a second) only the windows that changed, as keyed_delta segments: the size and
duration then follow P, not the size of the state (a full checkpoint still comes every
full_every = 10 checkpoints, and the first after the restore is full).

The bench writes every [checkpoint] setting it varies (incremental, rolling, snapshot), so that
its flags mean what they meant before streamctl's defaults changed: without flags it measures
full checkpoints copied on the task thread; streamctl's defaults since December 2026 are
--incremental --rolling --snapshot deferred.

Figures depend on the machine and its load; run it twice and compare.
"""
import argparse, glob, json, math, os, re, resource, shutil, statistics, subprocess, sys, tempfile, time
from dataclasses import dataclass, field

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", default="3300000,33000000")
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3, help="runs of each throughput figure; the median is printed")
    ap.add_argument("--changing", default="", help="percent of keys changing per second, e.g. 1,10: adds the steady phase")
    ap.add_argument("--seconds", type=float, default=20, help="length of the steady phase")
    ap.add_argument("--rate", type=float, default=0, help="records per second of the steady phase; 0: unlimited")
    ap.add_argument("--streamctl", default=os.environ.get("STREAMCTL", os.path.join(os.path.dirname(__file__), "../../build/cli/streamctl")))
    ap.add_argument("--skip-rescale", action="store_true")
    ap.add_argument("--logs", default="", help="keep each run's stderr (its -vv log) in this directory, "
                    "as run-N.log with the command on its first line")
    ap.add_argument("--only-rescale", action="store_true", help="measure the rescale downtime only (step 5)")
    ap.add_argument("--incremental", action="store_true",
                    help="[checkpoint] incremental = true: checkpoints write only the entries that changed")
    ap.add_argument("--rolling", action="store_true",
                    help="[checkpoint] rolling = true: with --incremental, a share of the key groups whole at "
                         "each checkpoint instead of a full checkpoint every full_every")
    ap.add_argument("--snapshot", choices=["copy", "fork", "deferred"], default="copy",
                    help='[checkpoint] snapshot: "fork" has a child process serialise and write the state, '
                         '"deferred" the writer thread the key groups written whole')
    ap.add_argument("--full-every", type=int, default=0,
                    help="[checkpoint] full_every (default: streamctl's): with --rolling, the share of the key "
                         "groups written whole at each checkpoint is 1/N")
    args = ap.parse_args()
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
        LOGS["dir"] = args.logs
    global INCREMENTAL, SNAPSHOT, ROLLING, FULL_EVERY
    INCREMENTAL = args.incremental
    FULL_EVERY = args.full_every
    ROLLING = args.rolling
    SNAPSHOT = args.snapshot
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    changing = [float(p) for p in args.changing.split(",") if p.strip()]
    if any(not 0 < p <= 100 for p in changing):
        ap.error("--changing takes percentages above 0 and at most 100")
    streamctl = os.path.realpath(args.streamctl)
    work = tempfile.mkdtemp(prefix="streamctl-ckbench.")
    env = dict(os.environ, STREAMCTL_STATE_DIR=os.path.join(work, "state"))
    try:
        for keys in [int(k) for k in args.keys.split(",")]:
            bench(streamctl, work, env, keys, args, changing)
    finally:
        shutil.rmtree(work, ignore_errors=True)

INCREMENTAL = False  # --incremental
SNAPSHOT = "copy"  # --snapshot
ROLLING = False  # --rolling
FULL_EVERY = 0  # --full-every; 0: streamctl's default

def pipeline(work, name, keys, records, key=None, rate=0):
    """Writes the pipeline; `key` replaces the key expression (default: seq % keys)."""
    path = os.path.join(work, name + ".toml")
    key = key or f"seq % {keys}"
    with open(path, "w") as f:
        f.write(f'''name = "{name}"
[checkpoint]
dir = "{work}/ck"
retain = 1
timeout = "10m"
incremental = {"true" if INCREMENTAL else "false"}
rolling = {"true" if ROLLING else "false"}
{f"full_every = {FULL_EVERY}" if FULL_EVERY else ""}
snapshot = "{SNAPSHOT}"
[sources.g]
type = "generator"
profile = "counter"
count = {records}
event_time = "ts"
{f"rate = {rate}" if rate else ""}
[operators.k]
type = "map"
inputs = ["g"]
set = {{ key = "{key}" }}
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

@dataclass
class Run:
    wall: float          # seconds from start to exit
    cpu: float           # user + sys seconds of the command and every process it waited for
    log: str             # its stderr
    seen: dict = field(default_factory=dict)  # {pattern: seconds when first seen on stderr}

LOGS = {"dir": "", "count": 0}  # --logs: where run() keeps each run's stderr

def run(cmd, env, watch=None):
    """Runs cmd to its end; fails the benchmark if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
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
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = "".join(lines)
    if LOGS["dir"]:
        LOGS["count"] += 1
        with open(os.path.join(LOGS["dir"], f"run-{LOGS['count']}.log"), "w") as f:
            f.write(" ".join(cmd) + "\n" + text)
    if code != 0:
        sys.exit(f"{' '.join(cmd)} exited {code}:\n{text[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(elapsed, cpu, text, seen)

def runs(n, cmd, env, watch=None):
    return [run(cmd, env, watch) for _ in range(n)]

def runs_apart(n, cmd, env, work):
    """As runs(), each run with an empty checkpoint directory of its own (removed after it):
    a restore of the load's savepoint there is the first and only one, as a person's would be."""
    out = []
    for _ in range(n):
        own = os.path.join(work, "ck-run")
        shutil.rmtree(own, ignore_errors=True)
        out.append(run(cmd + ["--set", f"checkpoint.dir={own}"], env))
        shutil.rmtree(own, ignore_errors=True)
    return out

def median(values):
    return statistics.median(values)

def mb(n):
    return f"{n / 1e6:,.1f} MB"

def checkpoints(logs):
    """The periodic checkpoints of -vv logs: [(bytes, ms)] complete, the number failed, and the
    tasks' synchronous pauses [(ms, task)] ("state taken in"). The job's final checkpoint, taken
    once the input has ended and the windows have fired, holds no window state: left out."""
    done, failed, pauses, stalls = [], 0, [], []
    for log in logs:
        final = set(re.findall(r"final checkpoint complete: \S*chk-(\d+)", log))
        done += [(int(b), int(ms)) for n, b, ms in re.findall(r"checkpoint (\d+) complete: (\d+) bytes in (\d+) ms", log)
                 if n not in final]
        failed += len(re.findall(r"checkpoint \d+ failed", log))
        pauses += [(int(ms), task, parts) for task, n, ms, parts in
                   re.findall(r"Z (.+?): debug: checkpoint (\d+): state taken in (\d+) ms(.*)", log) if n not in final]
        stalls += [(int(ms), task) for task, n, ms in
                   re.findall(r"Z (.+?): debug: checkpoint (\d+): deferred groups written; longest stall (\d+) ms", log)
                   if n not in final]
    return done, failed, pauses, stalls

def describe_checkpoints(done, failed, pauses, stalls):
    if not done:
        return "no checkpoint completed" + (f", {failed} failed" if failed else "")
    sizes = [b for b, _ in done]
    durations = [ms for _, ms in done]
    return (f"{len(done)} checkpoints of {mb(median(sizes))} (median; largest {mb(max(sizes))}), "
            f"duration median {median(durations):.0f} ms, longest {max(durations)} ms; "
            + (f"longest task pause (state taken, synchronous) {max(pauses)[0]} ms in {max(pauses)[1]}, "
               f"median {median([p[0] for p in pauses]):.0f} ms" + pause_parts(pauses)
               if pauses else 'no task pause figure in the log (no "state taken" line)')
            + (f"; longest stall on deferred groups after the barrier {max(stalls)[0]} ms in {max(stalls)[1]}, "
               f"median {median([ms for ms, _ in stalls]):.0f} ms" if stalls else "")
            + (f"; {failed} failed" if failed else ""))

def pause_parts(pauses):
    """The medians of the parts of a pause the worker's line names ("changes 12 ms, ..."):
    where the time at the barrier goes."""
    parts = {}
    for _, _, text in pauses:
        for name, ms in re.findall(r"(earlier freeze|changes|segments) (\d+) ms", text):
            parts.setdefault(name, []).append(int(ms))
    if not parts:
        return ""
    return " (medians: " + ", ".join(f"{name} {median(v):.0f} ms" for name, v in parts.items()) + ")"

def drop_caches():
    """Empties the page cache (root only), so that what follows reads from the disk: True if it did."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def bench(streamctl, work, env, keys, args, changing):
    records = keys * args.updates
    print(f"== {keys:,} keys, {records:,} records ({args.updates} per key), keyed window state; "
          f"medians of {args.runs} run(s)")
    name = f"ck{keys}"
    toml = pipeline(work, name, keys, records)
    if args.only_rescale:
        rescale(streamctl, work, env, name, keys, records, changing)
        return

    plain = runs(args.runs, [streamctl, "run", toml], env)
    wall, cpu = median([r.wall for r in plain]), median([r.cpu for r in plain])
    load_rate = records / wall
    print(f"  no checkpoints:          {wall:6.2f} s  {records / wall:12,.0f} records/s  "
          f"(CPU {cpu:.2f} s, {records / cpu:,.0f} records/CPU s)")
    timed = runs(args.runs, [streamctl, "-vv", "run", toml, "--set", "checkpoint.interval=1s"], env)
    twall, tcpu = median([r.wall for r in timed]), median([r.cpu for r in timed])
    print(f"  checkpoint every 1 s:    {twall:6.2f} s  {records / twall:12,.0f} records/s  "
          f"(CPU {tcpu:.2f} s, {records / tcpu:,.0f} records/CPU s; {100 * (twall - wall) / wall:+.1f}% time, "
          f"{100 * (tcpu - cpu) / cpu:+.1f}% CPU)")
    print(f"    {describe_checkpoints(*checkpoints([r.log for r in timed]))}")

    log = run([streamctl, "-v", "run", toml, "--savepoint-on-exit"], env).log
    m = re.search(r"savepoint \d+ complete: (\S+) \((\d+) bytes, (\d+) ms\)", log)
    savepoint, size, ms = m.group(1), int(m.group(2)), int(m.group(3))
    raw = raw_bytes(savepoint, streamctl, env)
    print(f"  savepoint:               {mb(size)} in the files, {mb(raw)} raw (ratio {raw / size:.2f}), "
          f"taken in {ms} ms ({raw / 1e6 / (max(ms, 1) / 1000):,.0f} MB/s raw)")

    empty = pipeline(work, name + "-empty", keys, 1)
    startup = run([streamctl, "-v", "run", empty], env, ["records flowing"]).seen["records flowing"]
    cache = "cold cache" if drop_caches() else "warm cache"
    seen = run([streamctl, "-v", "run", toml, "--from-savepoint", savepoint, "--savepoint-on-exit"], env,
               ["records flowing"]).seen
    restore = seen["records flowing"] - startup
    drop_caches() # the same start as the restore's
    verify = run([streamctl, "snapshot", "verify", savepoint], env).wall
    print(f"  restore:                 {restore:6.2f} s beyond a start-up of {startup:.2f} s ({cache}); "
          f"reading and decompressing the files (snapshot verify): {verify:.2f} s; ratio {restore / verify:.2f}")

    if changing:
        steady(streamctl, work, env, name, keys, records, savepoint, load_rate, args, changing)
    if not args.skip_rescale:
        rescale(streamctl, work, env, name, keys, records, changing)

def steady(streamctl, work, env, name, keys, loaded, savepoint, load_rate, args, changing):
    """The steady phase after the load: see the module's docstring."""
    phase = int(args.rate * args.seconds) if args.rate else int(load_rate * args.seconds)
    print(f"  steady phase: {phase:,} records after the load, "
          + (f"at {args.rate:,.0f} records/s" if args.rate else "unlimited rate")
          + f", from the savepoint; phase = run of them minus run of none")
    for percent in changing:
        subset, key = changing_key(keys, loaded, percent)
        figures = {}
        for label, extra in (("no checkpoints", []), ("checkpoint every 1 s", ["--set", "checkpoint.interval=1s"])):
            # The same name as the load, so that the savepoint's job is this one; runs one at a time.
            base = pipeline(work, name, keys, loaded, key, args.rate)
            base_runs = runs_apart(args.runs, [streamctl, "-vv", "run", base, "--from-savepoint", savepoint] + extra,
                                   env, work)
            full = pipeline(work, name, keys, loaded + phase, key, args.rate)
            full_runs = runs_apart(args.runs, [streamctl, "-vv", "run", full, "--from-savepoint", savepoint] + extra,
                                   env, work)
            wall = median([r.wall for r in full_runs]) - median([r.wall for r in base_runs])
            cpu = median([r.cpu for r in full_runs]) - median([r.cpu for r in base_runs])
            figures[label] = (wall, cpu, full_runs)
        print(f"  -- {percent:g}% of keys changing per second: keys drawn from {subset:,} of {keys:,}")
        for label, (wall, cpu, _) in figures.items():
            if wall <= 0 or cpu <= 0:
                print(f"    {label + ':':24} phase too short to measure (wall {wall:+.2f} s, CPU {cpu:+.2f} s); "
                      f"raise --seconds")
                continue
            print(f"    {label + ':':24} {wall:6.2f} s  {phase / wall:12,.0f} records/s  "
                  f"(CPU {cpu:.2f} s, {phase / cpu:,.0f} records/CPU s)")
        (wall, cpu, _), (twall, tcpu, _) = figures.values()
        if min(wall, cpu, twall, tcpu) > 0:
            print(f"    checkpoints cost {100 * (twall - wall) / wall:+.1f}% wall time, {100 * (tcpu - cpu) / cpu:+.1f}% CPU")
            per_second = args.rate or phase / twall
            touched = percent * (1 - math.exp(-per_second / subset))
            print(f"    {per_second:,.0f} records a second with checkpoints: about {touched:.2f}% of the keys "
                  f"touched between two checkpoints (at most {percent:g}%)")
        print(f"    {describe_checkpoints(*checkpoints([r.log for r in figures['checkpoint every 1 s'][2]]))}")

def changing_key(keys, loaded, percent):
    """The steady phase's key: every key once loaded, then keys from a subset of percent% of them."""
    subset = max(1, round(keys * percent / 100))
    return subset, f"if(seq < {loaded}, seq % {keys}, ((hash(seq) % {subset} + {subset}) % {subset}) * {keys} / {subset})"

def rescale(streamctl, work, env, name, keys, records, changing):
    """Once the state is loaded, the job goes on with every key changing (the load's key) or,
    with --changing P, with keys from P% of them, so that an incremental checkpoint is small."""
    for percent in changing or [None]:
        key = changing_key(keys, records, percent)[1] if percent else None
        updates = "every key" if percent is None else f"{percent:g}% of the keys"
        for label, extra in (("no periodic checkpoints (a savepoint)", []),
                             ("a checkpoint every 1 s (a checkpoint)", ["--set", "checkpoint.interval=1s"])):
            print(f"  rescale of a job with {label}, updating {updates} after the load:")
            rescale_once(streamctl, work, env, name, keys, records, extra, key)

def rescale_once(streamctl, work, env, name, keys, records, extra, key=None):
    job = name + "-rescale"
    endless = pipeline(work, job, keys, records * 1000, key)
    p = subprocess.Popen([streamctl, "-v", "run", endless] + extra, env=env, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, "rescale.log"), "w"))
    try:
        while True:
            time.sleep(0.5)
            if p.poll() is not None:
                sys.exit(f"the rescale job ended early (exit {p.returncode}); see {work}/rescale.log")
            st = subprocess.run([streamctl, "status", job, "--json"], env=env, capture_output=True, text=True)
            if st.returncode != 0:
                continue
            ops = {o["name"]: o for o in json.loads(st.stdout)["operators"]}
            if sum(s["records_in"] for s in ops["per_key"]["subtasks"]) >= records:
                break
        if extra and key:
            # Checkpoints of the steady updates, not of the load's last seconds (every key new).
            wait_for_checkpoint(streamctl, env, job, 2, "since the load")
        for before, after in ((1, 2), (2, 1)):
            if before == 2 and extra:
                wait_for_checkpoint(streamctl, env, job, 1, "since the rescale, the tasks' first and full")
            r = subprocess.run([streamctl, "rescale", job, "--parallelism", str(after)], env=env,
                               capture_output=True, text=True)
            m = re.search(r"downtime (\d+) ms", r.stderr)
            print(f"    {before} -> {after} subtasks: downtime {m.group(1) if m else '?'} ms"
                  + ("" if m else f" ({r.stderr.strip()})"))
    finally:
        subprocess.run([streamctl, "cancel", job], env=env, capture_output=True)
        p.wait()

def wait_for_checkpoint(streamctl, env, job, count, what):
    """Waits for `count` more periodic checkpoints of the job. A task's first checkpoint after it
    starts is full, so a rescale right after another would write all the state; a job is seldom
    rescaled twice within seconds, so the second rescale comes after that first checkpoint.
    With --changing, the first rescale comes after two checkpoints of the steady updates."""
    def completed():
        st = subprocess.run([streamctl, "status", job, "--json"], env=env, capture_output=True, text=True)
        return json.loads(st.stdout).get("checkpoints_completed", 0) if st.returncode == 0 else None
    start, first = time.monotonic(), None
    while first is None:
        first = completed()
        time.sleep(0.2)
    while (completed() or 0) < first + count:
        if time.monotonic() - start > 600:
            sys.exit(f"no checkpoint completed within 10 minutes of the rescale of {job}")
        time.sleep(0.2)
    print(f"    ({count} checkpoint(s) {what}: completed after {time.monotonic() - start:.1f} s)")

def raw_bytes(savepoint, streamctl, env):
    total = 0
    for path in glob.glob(os.path.join(savepoint, "*.snap")):
        out = subprocess.run([streamctl, "snapshot", "inspect", "--json", path], env=env, capture_output=True, text=True)
        total += json.loads(out.stdout).get("raw_bytes", 0)
    return total

if __name__ == "__main__":
    main()
