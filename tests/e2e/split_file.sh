# One file read by several subtasks (issue 9): a file source at parallelism p over fewer files
# than p splits each file into byte ranges (`range_bytes`), a range being the lines that start
# in it. Whatever the parallelism and the range size, every line is read exactly once: lines
# straddling a range's end, lines longer than a range, a last line without a newline, empty
# and tiny files; bad-record line numbers are those of the file.
source "$(dirname "$0")/lib/common.bash"

pipeline() { # IN OUT P RANGE_BYTES [FORMAT]
  cat <<TOML
name = "split"
parallelism = $3
[sources.in]
type = "file"
path = "$1"
format = "${5:-lines}"
range_bytes = $4
on_error = "dead_letter"
dead_letter = "$WORK/dead.jsonl"
[sinks.out]
type = "file"
inputs = ["in"]
path = "$2"
format = "${5:-lines}"
TOML
}

# check NAME IN P RANGE_BYTES: the output at p is the input's non-blank lines, each once.
check() {
  local name=$1 in=$2 p=$3 bytes=$4
  pipeline "$in" "$WORK/out-$name" "$p" "$bytes" >"$WORK/$name.toml"
  run_expect 0 "$STREAMCTL" run "$WORK/$name.toml"
  cat "$WORK/out-$name"/part-* 2>/dev/null | LC_ALL=C sort >"$WORK/got-$name.txt" || true
  grep -v '^$' "$in" | LC_ALL=C sort >"$WORK/want-$name.txt" || true
  if ! cmp -s "$WORK/want-$name.txt" "$WORK/got-$name.txt"; then
    diff "$WORK/want-$name.txt" "$WORK/got-$name.txt" | head -10 >&2
    fail "$name: $in at parallelism $p, ranges of $bytes bytes: lines lost or read twice"
  fi
}

# 200,000 lines of varying length, in ranges of 64 KiB (about 190 of them) and of the default.
python3 - "$WORK/big.txt" <<'PY'
import random, sys
random.seed(9)
with open(sys.argv[1], "w") as f:
    for i in range(200000):
        f.write("line %d %s\n" % (i, "x" * random.randint(0, 120)))
PY
for p in 1 2 4; do
  check "big-$p" "$WORK/big.txt" $p 65536
  check "big-default-$p" "$WORK/big.txt" $p '"4MiB"'
done
cmp -s "$WORK/got-big-1.txt" "$WORK/got-big-4.txt" || fail "parallelism 1 and 4 read other lines"

# Tiny ranges: most lines straddle a range end, some are longer than several ranges, and many
# ranges hold no line start at all; blank lines; a last line without a newline.
python3 - "$WORK/small.txt" <<'PY'
import random, sys
random.seed(4)
with open(sys.argv[1], "w") as f:
    for i in range(300):
        f.write("r%d-%s\n" % (i, "y" * random.choice((0, 1, 5, 17, 40, 90))))
        if i % 37 == 0: f.write("\n")
    f.write("last line without newline")
PY
for p in 1 2 3 5 8; do
  for bytes in 1 7 16 100; do check "small-$p-$bytes" "$WORK/small.txt" $p $bytes; done
done
grep -qx "last line without newline" "$WORK/got-small-5-7.txt" || fail "the unterminated last line was not read"

# An empty file and a file of fewer lines than subtasks.
: >"$WORK/empty.txt"
printf 'one\ntwo\n' >"$WORK/two.txt"
for p in 1 4; do
  check "empty-$p" "$WORK/empty.txt" $p 4
  check "two-$p" "$WORK/two.txt" $p 4
done

# Bad records keep the file's line numbers, the raw line and the reason in every range.
python3 - "$WORK/bad.jsonl" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(1, 5001):
        f.write('{"n":%d}\n' % i if i % 1000 else 'not json %d\n' % i)
PY
rm -f "$WORK/dead.jsonl"
pipeline "$WORK/bad.jsonl" "$WORK/out-bad" 4 1000 json >"$WORK/bad.toml"
run_expect 0 "$STREAMCTL" run "$WORK/bad.toml"
python3 - "$WORK/dead.jsonl" <<'PY' || fail "dead letters of a split file"
import json, sys
got = sorted((d["line"], d["input"]) for d in map(json.loads, open(sys.argv[1])))
want = [(i, "not json %d" % i) for i in range(1000, 5001, 1000)]
assert got == want, got
assert all(json.loads(l)["error"] for l in open(sys.argv[1]))
PY
[[ $(cat "$WORK/out-bad"/part-* | wc -l) == 4995 ]] || fail "records of the bad-record file lost or repeated"

# A csv file: every range decodes its lines with the file's header.
python3 - "$WORK/in.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("id,name\n")
    for i in range(2000): f.write("%d,n%d\n" % (i, i))
PY
cat >"$WORK/csv.toml" <<TOML
name = "csv"
parallelism = 3
[sources.in]
type = "file"
path = "$WORK/in.csv"
format = "csv"
types = { id = "int" }
range_bytes = 500
on_error = "fail"
[sinks.out]
type = "file"
inputs = ["in"]
path = "$WORK/out-csv"
TOML
run_expect 0 "$STREAMCTL" run "$WORK/csv.toml"
cat "$WORK/out-csv"/part-* | canonical >"$WORK/got-csv.txt"
python3 -c 'import json
for i in range(2000): print(json.dumps({"id": i, "name": "n%d" % i}, sort_keys=True))' | sort >"$WORK/want-csv.txt"
cmp -s "$WORK/want-csv.txt" "$WORK/got-csv.txt" || { diff "$WORK/want-csv.txt" "$WORK/got-csv.txt" | head >&2; fail "csv ranges"; }

assert_no_processes_left
echo ok
