# Malformed input (issue 7, finding 7 and its bad-input deliverable): a seeded input with ~1% of
# lines of each of 15 kinds of bad line among good ones, through json -> filter -> map -> file
# sink with on_error = "dead_letter", at parallelism 1 and 2; then csv and lines with invalid
# UTF-8; then dead-letter paths in a missing directory (finding 9).
#
# What broke: invalid UTF-8 inside JSON strings passed through into the output (Python's json
# module rejected it), dead letters embedded the raw bytes (not JSON), csv and lines took any
# bytes; and a dead_letter path in a missing directory made the job restart for 31 s.
source "$(dirname "$0")/lib/common.bash"

SEED=${SEED:-$RANDOM}
echo "seed: $SEED (replay with SEED=$SEED)"

# Writes $WORK/in.jsonl and $WORK/expect.json: the ids of the good records, the source line
# numbers of the bad lines, and the ids of the records the map must reject.
python3 - "$SEED" "$WORK" <<'PY'
import json, random, sys
seed, work = int(sys.argv[1]), sys.argv[2]
rng = random.Random(seed)
N = 20000

def good(i, text="plain"):
    return b'{"id":%d,"ts":%d,"v":%d,"s":%s}' % (i, 1700000000000 + i, i % 97,
                                                 json.dumps(text, ensure_ascii=False).encode())

# Good lines that look unusual: multi-byte and 4-byte UTF-8, escapes, CRLF line ends.
good_kinds = [
    lambda i: good(i, "caf\u00e9 \u20ac \U0001F600 \u4e2d\u6587"),
    lambda i: b'{"id":%d,"ts":%d,"v":1,"s":"\\u00e9\\ud83d\\ude00\\n\\t"}' % (i, 1700000000000 + i),
    lambda i: good(i) + b"\r",                       # CRLF: the "\r" is stripped
    lambda i: b'  {"id":%d , "ts":%d,"v":2,"s":"x"}\t' % (i, 1700000000000 + i),
]
# Bad lines, each a bad record at the source.
bad_kinds = {
    "invalid json": lambda i: b'{"id":%d,"ts":' % i,
    "trailing garbage": lambda i: good(i) + b" x",
    "overlong": lambda i: b'{"id":%d,"ts":1,"s":"\xc0\xaf \xe0\x80\xaf"}' % i,
    "lone continuation": lambda i: b'{"id":%d,"ts":1,"s":"a\x80b"}' % i,
    "utf-8 surrogate": lambda i: b'{"id":%d,"ts":1,"s":"\xed\xa0\x80"}' % i,
    "truncated sequence": lambda i: b'{"id":%d,"ts":1,"s":"\xe2\x82"}' % i,
    "bytes f5-ff": lambda i: b'{"id":%d,"ts":1,"s":"%s"}' % (i, bytes([rng.randint(0xF5, 0xFF)])),
    "invalid key": lambda i: b'{"id":%d,"ts":1,"\xff":1}' % i,
    "nul in string": lambda i: b'{"id":%d,"ts":1,"s":"a\x00b"}' % i,
    "nul bytes": lambda i: b"\x00" * 8 + good(i),
    "control char": lambda i: b'{"id":%d,"ts":1,"s":"a\x01b"}' % i,
    "binary garbage": lambda i: bytes([rng.randint(0x80, 0xFF)]) +
        bytes(rng.choice([b for b in range(256) if b != 0x0A]) for _ in range(rng.randint(8, 200))),
    "not an object": lambda i: rng.choice([b"[1,2,3]", b'"just a string"', b"42", b"null"]),
    "no event time": lambda i: b'{"id":%d,"v":1}' % i,
    "bad event time": lambda i: b'{"id":%d,"ts":"yesterday","v":1}' % i,
    "too deep": lambda i: b'{"id":%d,"ts":1,"a":' % i + b"[" * 200 + b"]" * 200 + b"}",
}
lines, good_ids, map_bad = [], [], []
for i in range(N):
    r = rng.random()
    k = int(r * 100)
    if k < len(bad_kinds):                      # 1% of lines per bad kind
        name = list(bad_kinds)[k]
        lines.append(bad_kinds[name](i))
    elif k == 50:                               # 1%: the map's expression fails (v is a string)
        lines.append(b'{"id":%d,"ts":%d,"v":"nan","s":"x"}' % (i, 1700000000000 + i))
        map_bad.append(i)
    else:
        lines.append(good_kinds[k % len(good_kinds)](i) if k > 80 else good(i))
        good_ids.append(i)
# One 50 MB line that is a good record, one that is a bad one.
i = N
lines.insert(N // 3, good(i, "y" * (50 << 20))); good_ids.append(i)
lines.insert(2 * N // 3, b'{"id":%d,"ts":1,"s":"' % (i + 1) + b"z" * (50 << 20))
with open(work + "/in.jsonl", "wb") as f:
    f.write(b"\n".join(lines) + b"\n")
json.dump({"good": good_ids, "map_bad": map_bad}, open(work + "/expect.json", "w"))
PY

# The bad lines by line number: everything the reference decoder (Python: strict JSON, strict
# UTF-8, no raw control characters in strings) refuses, that is not an object, lacks an int
# `ts`, or nests deeper than 128 levels. Computed from the file itself, so that the generator
# and the check cannot disagree about line numbers.
python3 - "$WORK" <<'PY'
import base64, json, sys
work = sys.argv[1]
bad = {}
for n, raw in enumerate(open(work + "/in.jsonl", "rb").read().split(b"\n")[:-1], 1):
    line = raw[:-1] if raw.endswith(b"\r") else raw
    try:
        v = json.loads(line.decode("utf-8"))
        ok = isinstance(v, dict) and isinstance(v.get("ts"), int) and b"[" * 129 not in line
    except (ValueError, RecursionError):
        ok = False
    if not ok:
        bad[n] = line
json.dump({str(n): base64.b64encode(l).decode() for n, l in bad.items()}, open(work + "/bad.json", "w"))
print(f"{len(bad)} bad lines")
PY

# check_run DIR DEAD MAPDEAD: the output and the dead letters of one run.
check_run() {
  python3 - "$WORK" "$1" "$2" "$3" <<'PY' || fail "run into $1 lost or garbled records (seed $SEED)"
import base64, collections, glob, json, sys
work, out_dir, dead, map_dead = sys.argv[1:]
expect = json.load(open(work + "/expect.json"))
bad = {int(n): base64.b64decode(b) for n, b in json.load(open(work + "/bad.json")).items()}

def rows(path):
    # Strict: every line must be UTF-8 and JSON.
    return [json.loads(l) for l in open(path, "rb").read().decode("utf-8").split("\n") if l]

out = [r for p in sorted(glob.glob(out_dir + "/part-*")) for r in rows(p)]
ids = collections.Counter(r["id"] for r in out)
assert all(c == 1 for c in ids.values()), "duplicated: %s" % [i for i, c in ids.items() if c > 1][:10]
missing = set(expect["good"]) - set(ids)
extra = set(ids) - set(expect["good"])
assert not missing and not extra, "missing %s, unexpected %s" % (sorted(missing)[:10], sorted(extra)[:10])
assert all(r["w"] == r["v"] * 2 for r in out)
big = [r for r in out if len(r["s"]) == 50 << 20]
assert len(big) == 1, "the 50 MB good record is not in the output"

dl = rows(dead)
lines = collections.Counter(r["line"] for r in dl)
assert all(c == 1 for c in lines.values()), "dead-lettered twice: %s" % [n for n, c in lines.items() if c > 1][:10]
assert set(lines) == set(bad), "dead letters: missing lines %s, unexpected lines %s" % (
    sorted(set(bad) - set(lines))[:10], sorted(set(lines) - set(bad))[:10])
for r in dl:
    raw = base64.b64decode(r["input_base64"]) if "input_base64" in r else r["input"].encode("utf-8")
    assert raw == bad[r["line"]], "line %d: the dead letter does not hold the input bytes" % r["line"]
    try:
        bad[r["line"]].decode("utf-8")
        assert "input_base64" not in r, r
    except UnicodeDecodeError:
        assert "input_base64" in r and "\ufffd" in r["input"], r["line"]
    assert r["node"] == "in" and r["error"], r

md = rows(map_dead)
assert sorted(json.loads(r["input"])["id"] for r in md) == sorted(expect["map_bad"]), "map dead letters"
assert all(r["node"] == "double" and r["line"] is None for r in md)
print("%d good records, %d bad lines, %d map failures: ok" % (len(out), len(dl), len(md)))
PY
}

for p in 1 2; do
  cat >"$WORK/p$p.toml" <<TOML
name = "malformed-p$p"
parallelism = $p
[sources.in]
type = "file"
path = "$WORK/in.jsonl"
event_time = "ts"
on_error = "dead_letter"
dead_letter = "$WORK/dead-p$p.jsonl"
[operators.keep]
type = "filter"
inputs = ["in"]
where = "id >= 0"
[operators.double]
type = "map"
inputs = ["keep"]
set = { w = "v * 2" }
on_error = "dead_letter"
dead_letter = "$WORK/dead-map-p$p.jsonl"
[sinks.out]
type = "file"
inputs = ["double"]
path = "$WORK/out-p$p"
TOML
  run_expect 0 timeout 300 "$STREAMCTL" run "$WORK/p$p.toml"
  check_run "$WORK/out-p$p" "$WORK/dead-p$p.jsonl" "$WORK/dead-map-p$p.jsonl"
done

# csv and lines: a line that is not UTF-8 is a bad record too; its exact bytes are in the dead
# letter's input_base64, its text (invalid bytes as U+FFFD) in `input`.
printf 'name,n\ncaf\xc3\xa9,1\nbad\xff,2\n"\xe2\x82\xac, euro",3\nlone\x80,4\nnul\x00inside,5\r\n' >"$WORK/in.csv"
printf 'ok \xf0\x9f\x98\x80\nover\xc0\xaflong\nsur\xed\xa0\x80rogate\nplain\r\n' >"$WORK/in.txt"
for format in csv lines; do
  file=$WORK/in.csv
  [[ $format == lines ]] && file=$WORK/in.txt
  cat >"$WORK/$format.toml" <<TOML
name = "malformed-$format"
[sources.in]
type = "file"
path = "$file"
format = "$format"
on_error = "dead_letter"
dead_letter = "$WORK/dead-$format.jsonl"
[sinks.out]
type = "file"
inputs = ["in"]
path = "$WORK/out-$format"
TOML
  run_expect 0 timeout 120 "$STREAMCTL" run "$WORK/$format.toml"
done
python3 - "$WORK" <<'PY' || fail "csv or lines with invalid UTF-8"
import base64, glob, json, sys
work = sys.argv[1]
def rows(path):
    return [json.loads(l) for l in open(path, "rb").read().decode("utf-8").split("\n") if l]
def out(fmt):
    return [r for p in sorted(glob.glob(work + "/out-" + fmt + "/part-*")) for r in rows(p)]
assert out("csv") == [{"name": "caf\u00e9", "n": "1"}, {"name": "\u20ac, euro", "n": "3"},
                      {"name": "nul\x00inside", "n": "5"}], out("csv")
assert out("lines") == [{"line": "ok \U0001F600"}, {"line": "plain"}], out("lines")
for fmt, expected in (("csv", {3: b"bad\xff,2", 5: b"lone\x80,4"}),
                      ("lines", {2: b"over\xc0\xaflong", 3: b"sur\xed\xa0\x80rogate"})):
    dl = rows(work + "/dead-" + fmt + ".jsonl")
    got = {r["line"]: base64.b64decode(r["input_base64"]) for r in dl}
    assert got == expected, (fmt, dl)
    for r in dl:
        assert "\ufffd" in r["input"] and "UTF-8" in r["error"], r
PY

# Finding 9: a dead_letter file in a directory that does not exist yet is created with it, as
# file sinks create theirs; one that can never be created is refused by `validate` (exit 2); one
# that only fails when the worker opens it (a dangling symlink) ends the job at once with exit 2
# instead of restarting for half a minute. `timeout` guards against the restarts.
printf '{"ts":1}\nnot json\n' >"$WORK/two.jsonl"
write_dl_pipeline() {
  # With checkpoints the default restart strategy is "exponential": what made the 31 s.
  cat >"$WORK/dl.toml" <<TOML
name = "dead-letter-dir"
[checkpoint]
interval = "10s"
dir = "$WORK/checkpoints"
[sources.in]
type = "file"
path = "$WORK/two.jsonl"
on_error = "dead_letter"
dead_letter = "$1"
[sinks.out]
type = "stdout"
inputs = ["in"]
TOML
}
write_dl_pipeline "$WORK/new/sub/dead.jsonl"
run_expect 0 timeout 60 "$STREAMCTL" run "$WORK/dl.toml"
assert_eq '{"ts":1}' "$(cat "$WORK/out")" "output with a dead-letter file in a new directory"
assert_contains "$WORK/new/sub/dead.jsonl" '"input":"not json"'

touch "$WORK/a-file"
write_dl_pipeline "$WORK/a-file/dead.jsonl"
run_expect 2 timeout 60 "$STREAMCTL" validate "$WORK/dl.toml"
assert_contains "$WORK/err" "$WORK/a-file"
run_expect 2 timeout 60 "$STREAMCTL" run "$WORK/dl.toml"
assert_contains "$WORK/err" "$WORK/a-file"

ln -s "$WORK/nowhere/dead.jsonl" "$WORK/dangling.jsonl"
write_dl_pipeline "$WORK/dangling.jsonl"
started=$SECONDS
run_expect 2 timeout 25 "$STREAMCTL" run "$WORK/dl.toml"
assert_contains "$WORK/err" "cannot open dead-letter file '$WORK/dangling.jsonl'"
if grep -q "restarting" "$WORK/err"; then fail "a configuration error was retried: $(cat "$WORK/err")"; fi
((SECONDS - started < 20)) || fail "the job took $((SECONDS - started)) s to give up"
assert_no_processes_left
echo ok
