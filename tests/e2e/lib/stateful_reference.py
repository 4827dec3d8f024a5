"""What each pipeline of stateful_random.sh must output, computed plainly from its input.

Writes WORK/expected-NAME: the records as canonical JSON (sorted keys), one a line, sorted.
"""
import glob
import json
import sys
from collections import defaultdict

work = sys.argv[1]
clicks = [json.loads(l) for p in sorted(glob.glob(work + "/clicks-*.jsonl")) for l in open(p)]
profiles = [json.loads(l) for l in open(work + "/profiles.jsonl")]


def dump(name, rows):
    with open("%s/expected-%s" % (work, name), "w") as f:
        for line in sorted(json.dumps(r, sort_keys=True) for r in rows):
            f.write(line + "\n")


def window_starts(ts, size, slide):
    """Starts of the windows [s, s + size) aligned to the epoch that hold ts."""
    start = ts - ts % slide
    while start > ts - size:
        yield start
        start -= slide


def tumbling():
    agg = defaultdict(lambda: [0, 0, 0])
    for r in clicks:
        for s in window_starts(r["ts"], 10000, 10000):
            a = agg[(r["user"], s)]
            a[0] += 1
            a[1] += r["bytes"]
            a[2] = max(a[2], r["bytes"])
    return [{"user": u, "window_start": s, "window_end": s + 10000, "n": a[0], "bytes": a[1], "top": a[2]}
            for (u, s), a in agg.items()]


def sliding():
    agg = defaultdict(int)
    for r in clicks:
        for s in window_starts(r["ts"], 10000, 4000):
            agg[(r["user"], s)] += 1
    return [{"user": u, "window_start": s, "window_end": s + 10000, "n": n} for (u, s), n in agg.items()]


def sessions():
    """Records at most the gap apart share a session, which ends at its last event + gap."""
    gap = 12000
    by_user = defaultdict(list)
    for r in clicks:
        by_user[r["user"]].append(r)
    rows = []
    for user, records in by_user.items():
        records.sort(key=lambda r: r["ts"])
        current = None
        for r in records:
            if current and r["ts"] <= current["window_end"]:
                current["window_end"] = max(current["window_end"], r["ts"] + gap)
                current["n"] += 1
                current["first"] = min(current["first"], r["id"])
            else:
                if current:
                    rows.append(current)
                current = {"user": user, "window_start": r["ts"], "window_end": r["ts"] + gap,
                           "n": 1, "first": r["id"]}
        rows.append(current)
    return rows


def dedup():
    """Duplicates are exact copies a little later: each id once."""
    seen = {}
    for r in clicks:
        seen.setdefault(r["id"], r)
    return list(seen.values())


def window_join():
    rights = defaultdict(list)
    for p in profiles:
        rights[(p["user"], p["ts"] - p["ts"] % 10000)].append(p)
    return [{"id": c["id"], "user": c["user"], "tier": p["tier"], "pts": p["ts"]}
            for c in clicks for p in rights[(c["user"], c["ts"] - c["ts"] % 10000)]]


def interval_join():
    by_user = defaultdict(list)
    for p in profiles:
        by_user[p["user"]].append(p)
    return [{"id": c["id"], "tier": p["tier"], "pts": p["ts"]}
            for c in clicks for p in by_user[c["user"]] if c["ts"] - 3000 <= p["ts"] <= c["ts"] + 1000]


dump("tumbling", tumbling())
dump("sliding", sliding())
dump("session", sessions())
dump("dedup", dedup())
dump("window_join", window_join())
dump("interval_join", interval_join())
