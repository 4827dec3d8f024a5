#!/usr/bin/env bash
# `streamctl snapshot inspect|verify` on the golden snapshot file (tests/data/snapshots) and on
# damaged copies of it: good files are described and pass; a flipped byte, a truncated copy, a
# missing file and a directory without snapshots exit 3 naming the file.
source "$(dirname "$0")/lib/common.bash"

golden="$SOURCE_DIR/tests/data/snapshots/golden-v1.snap"
[[ -f $golden ]] || fail "no golden snapshot at $golden"
mkdir -p "$WORK/chk-42"
good="$WORK/chk-42/count-1.snap"
cp "$golden" "$good"
size=$(stat -c %s "$good")

# inspect: the header and one line per segment.
run_expect 0 "$STREAMCTL" snapshot inspect "$good"
assert_contains "$WORK/out" "job:             golden"
assert_contains "$WORK/out" "checkpoint:      42"
assert_contains "$WORK/out" "parse -> count -> out"
assert_contains "$WORK/out" "[4, 8) of 8"
assert_contains "$WORK/out" "sink_pending"
assert_eq 6 "$(grep -cE '^(count|parse|out) ' "$WORK/out")" "segment rows"
grep -qE '^count +keyed +6 +' "$WORK/out" || fail "no row for key group 6 of count: $(cat "$WORK/out")"

# inspect --json: one object with the header and every segment.
run_expect 0 "$STREAMCTL" snapshot inspect --json "$good"
python3 - "$WORK/out" "$good" "$size" <<'PY' || fail "inspect --json: unexpected output"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["file"] == sys.argv[2], doc["file"]
assert doc["format_version"] == 1 and doc["job"] == "golden" and doc["checkpoint_id"] == 42
assert doc["pipeline_hash"] == "0123456789abcdef", doc["pipeline_hash"]
assert doc["chain"] == ["parse", "count", "out"] and doc["subtask"] == 1 and doc["parallelism"] == 2
assert doc["key_groups"] == {"first": 4, "end": 8} and doc["max_parallelism"] == 8
assert doc["file_bytes"] == int(sys.argv[3])
segs = doc["segments"]
assert [(s["node"], s["kind"], s["key_group"]) for s in segs] == [
    ("count", "keyed", 4), ("count", "keyed", 6), ("count", "keyed", 7),
    ("count", "subtask", None), ("parse", "source_position", None), ("out", "sink_pending", None)], segs
assert sum(s["raw_bytes"] for s in segs) == doc["raw_bytes"]
assert all(len(s["xxh64"]) == 16 for s in segs)
PY

# verify: a file, and a directory of files without _metadata (an incomplete checkpoint: exit
# 3, but each file is still checked).
cp "$good" "$WORK/chk-42/count-0.snap"
run_expect 0 "$STREAMCTL" snapshot verify "$good"
assert_eq "$good: ok (6 segments, $size bytes)" "$(cat "$WORK/out")" "verify output"
run_expect 3 "$STREAMCTL" snapshot verify "$WORK/chk-42"
assert_contains "$WORK/err" "chk-42/_metadata: missing"
assert_eq 2 "$(grep -c ': ok (6 segments' "$WORK/out")" "files verified in the directory"
run_expect 0 "$STREAMCTL" -q snapshot verify "$good"
assert_eq "" "$(cat "$WORK/out")" "verify -q output"

# A flipped byte in the middle of the segments.
flipped="$WORK/flipped.snap"
python3 - "$good" "$flipped" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[len(data) // 3] ^= 0x20
open(sys.argv[2], "wb").write(data)
PY
run_expect 3 "$STREAMCTL" snapshot verify "$flipped"
assert_contains "$WORK/err" "streamctl: $flipped: "
assert_contains "$WORK/err" "mismatch"

# A truncated copy: refused by verify and by inspect.
truncated="$WORK/truncated.snap"
head -c $((size - 10)) "$good" >"$truncated"
run_expect 3 "$STREAMCTL" snapshot verify "$truncated"
assert_contains "$WORK/err" "streamctl: $truncated: truncated"
run_expect 3 "$STREAMCTL" snapshot inspect "$truncated"
assert_contains "$WORK/err" "streamctl: $truncated: truncated"

# A missing file.
run_expect 3 "$STREAMCTL" snapshot verify "$WORK/missing.snap"
assert_contains "$WORK/err" "streamctl: $WORK/missing.snap: cannot open: No such file or directory"
run_expect 3 "$STREAMCTL" snapshot inspect --json "$WORK/missing.snap"
assert_eq "" "$(cat "$WORK/out")" "inspect output for a missing file"

# Good and bad together: every file is checked, the good one reported ok, exit 3.
run_expect 3 "$STREAMCTL" snapshot verify "$good" "$flipped" "$truncated"
assert_contains "$WORK/out" "$good: ok"
assert_contains "$WORK/err" "$flipped"
assert_contains "$WORK/err" "$truncated"

# A directory with a damaged file, and one with no snapshot at all.
cp "$truncated" "$WORK/chk-42/count-2.snap"
run_expect 3 "$STREAMCTL" snapshot verify "$WORK/chk-42"
assert_contains "$WORK/err" "$WORK/chk-42/count-2.snap: truncated"
assert_eq 2 "$(grep -c ': ok' "$WORK/out")" "good files of a damaged directory"
mkdir "$WORK/empty"
run_expect 3 "$STREAMCTL" snapshot verify "$WORK/empty"
assert_contains "$WORK/err" "$WORK/empty: no *.snap file in the directory"

# Usage errors are not snapshot errors.
run_expect 2 "$STREAMCTL" snapshot verify
run_expect 2 "$STREAMCTL" snapshot

echo "snapshot_cli: ok"
