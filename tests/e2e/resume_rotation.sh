# `run --resume` over log files that were rotated between runs (issue 7, finding 3). The file
# source's position used to be a byte offset per path, checked only against the file's size: a
# file replaced (mv new over old) or truncated in place (copytruncate) that had grown past the
# old offset was read from that offset, and the records before it were lost with exit 0; a file
# renamed under a glob was read again from its start. Now a position records each file's
# identity (device, inode, a fingerprint of its first bytes): a file that is not the one read
# before is read from its start, a renamed one goes on where it was, and one whose identity
# cannot be told is refused with exit 3. In each case below the union of all runs' output must
# be exactly the records of all the input, none lost and none twice.
source "$(dirname "$0")/lib/common.bash"

# pipeline NAME PATH OUT: a file source (path or glob) straight into a file sink.
pipeline() {
  cat <<TOML
name = "$1"
[sources.in]
type = "file"
path = "$2"
[sinks.out]
type = "file"
inputs = ["in"]
path = "$3"
TOML
}

# lines TAG FROM TO: records {"id": "TAG-N"} for N in [FROM, TO), one per line, padded so that
# lines are long enough for offsets to matter.
lines() {
  python3 -c 'import sys
tag, a, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for n in range(a, b): print("{\"id\": \"%s-%06d\", \"pad\": \"%s\"}" % (tag, n, "x" * 40))' "$@"
}

# resume NAME: one cron run of job NAME (pipeline $WORK/NAME.toml), ending with a savepoint.
resume() {
  run_expect 0 "$STREAMCTL" -v run "$WORK/$1.toml" --resume --savepoint-on-exit
  cat "$WORK/err" >>"$WORK/$1.log"
  grep -q "stopped with savepoint" "$WORK/err" || fail "$1: the run did not end with a savepoint: $(cat "$WORK/err")"
  assert_no_processes_left
}

# check NAME EXPECTED-FILE: the union of job NAME's output is exactly the records of EXPECTED.
check() {
  canonical <"$2" >"$WORK/$1.expected"
  cat "$WORK/$1-out"/part-* | canonical >"$WORK/$1.got"
  if ! cmp -s "$WORK/$1.expected" "$WORK/$1.got"; then
    echo "--- $1: records missing (<) or extra (>), first lines:" >&2
    diff "$WORK/$1.expected" "$WORK/$1.got" | head -10 >&2
    echo "--- $1: $(wc -l <"$WORK/$1.expected") expected, $(wc -l <"$WORK/$1.got") written" >&2
    fail "$1: the --resume runs lost or repeated records"
  fi
}

# 1. Replaced: a new file moved over the old one, grown past the old offset. It is all new.
mkdir "$WORK/replaced"
pipeline replaced "$WORK/replaced/app.log" "$WORK/replaced-out" >"$WORK/replaced.toml"
lines old 0 500 >"$WORK/replaced/app.log"
resume replaced
lines new 0 2000 >"$WORK/replaced/app.log.new"
mv "$WORK/replaced/app.log.new" "$WORK/replaced/app.log"
resume replaced
assert_contains "$WORK/replaced.log" "is not the file the snapshot read"
{ lines old 0 500; lines new 0 2000; } >"$WORK/replaced.all"
check replaced "$WORK/replaced.all"

# 2. copytruncate: the file is copied away and truncated in place (same inode), then written on
# past the old offset.
mkdir "$WORK/copytruncate"
pipeline copytruncate "$WORK/copytruncate/app.log" "$WORK/copytruncate-out" >"$WORK/copytruncate.toml"
lines old 0 500 >"$WORK/copytruncate/app.log"
resume copytruncate
lines old 500 600 >>"$WORK/copytruncate/app.log" # written after run 1 ...
cp "$WORK/copytruncate/app.log" "$WORK/copytruncate/app.log.1" # ... and copied away, outside path
: >"$WORK/copytruncate/app.log"
lines new 0 2000 >>"$WORK/copytruncate/app.log"
resume copytruncate
assert_contains "$WORK/copytruncate.log" "was truncated or rewritten in place"
# Lines old-500.. went into the copy, which `path` does not name: reading them is the rotator's
# matter (a glob that matches app.log.1 would read them), not this job's.
{ lines old 0 500; lines new 0 2000; } >"$WORK/copytruncate.all"
check copytruncate "$WORK/copytruncate.all"

# 3. Rename rotation under a glob: app.log -> app.log.1 -> app.log.2, a new app.log each time,
# and lines appended to app.log after a run and before its rotation. The renamed file goes on
# at its offset, the new one is read from its start.
mkdir "$WORK/renamed"
pipeline renamed "$WORK/renamed/app.log*" "$WORK/renamed-out" >"$WORK/renamed.toml"
lines a 0 300 >"$WORK/renamed/app.log"
resume renamed
lines a 300 400 >>"$WORK/renamed/app.log"
mv "$WORK/renamed/app.log" "$WORK/renamed/app.log.1"
lines b 0 700 >"$WORK/renamed/app.log"
resume renamed
assert_contains "$WORK/renamed.log" "renamed"
lines b 700 800 >>"$WORK/renamed/app.log"
mv "$WORK/renamed/app.log.1" "$WORK/renamed/app.log.2"
mv "$WORK/renamed/app.log" "$WORK/renamed/app.log.1"
lines c 0 100 >"$WORK/renamed/app.log"
resume renamed
{ lines a 0 400; lines b 0 800; lines c 0 100; } >"$WORK/renamed.all"
check renamed "$WORK/renamed.all"

# 4. The first bytes rewritten in place (same inode, same length or longer): not the file read
# before, so all of it is read.
mkdir "$WORK/rewritten"
pipeline rewritten "$WORK/rewritten/app.log" "$WORK/rewritten-out" >"$WORK/rewritten.toml"
lines old 0 500 >"$WORK/rewritten/app.log"
resume rewritten
inode=$(stat -c %i "$WORK/rewritten/app.log")
python3 - "$WORK/rewritten/app.log" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.write(b'{"id": "new-000000"')  # the first record, in place: same length
PY
lines old 500 800 >>"$WORK/rewritten/app.log"
assert_eq "$inode" "$(stat -c %i "$WORK/rewritten/app.log")" "inode of the file rewritten in place"
resume rewritten
assert_contains "$WORK/rewritten.log" "was truncated or rewritten in place"
{ lines old 0 500; cat "$WORK/rewritten/app.log"; } >"$WORK/rewritten.all"
check rewritten "$WORK/rewritten.all"

# 5. copytruncate under a glob that matches the copy too: the copy starts with the first 1 KiB
# read before (its fingerprint) where no file with that inode does any more, so it is taken for
# the file read, and goes on at its offset (the lines written before the copy, once); the
# truncated file is read from its start.
mkdir "$WORK/copyglob"
pipeline copyglob "$WORK/copyglob/app.log*" "$WORK/copyglob-out" >"$WORK/copyglob.toml"
lines old 0 500 >"$WORK/copyglob/app.log"
resume copyglob
lines old 500 600 >>"$WORK/copyglob/app.log"
cp "$WORK/copyglob/app.log" "$WORK/copyglob/app.log.1"
: >"$WORK/copyglob/app.log"
lines new 0 2000 >>"$WORK/copyglob/app.log"
resume copyglob
assert_contains "$WORK/copyglob.log" "taking it for a copy of it"
assert_contains "$WORK/copyglob.log" "was truncated or rewritten in place"
{ lines old 0 600; lines new 0 2000; } >"$WORK/copyglob.all"
check copyglob "$WORK/copyglob.all"

# 6. A file moved over the one read, with another inode but the same first bytes, when that
# file was shorter than the fingerprint (1 KiB): it may be a copy of the file read before, or a
# new file that starts alike, and nothing tells which. The run is refused with exit 3 naming
# the file, and nothing is written.
mkdir "$WORK/undecided"
pipeline undecided "$WORK/undecided/app.log" "$WORK/undecided-out" >"$WORK/undecided.toml"
lines old 0 5 >"$WORK/undecided/app.log"
resume undecided
{ lines old 0 5; lines other 0 100; } >"$WORK/undecided/app.log.new"
mv "$WORK/undecided/app.log.new" "$WORK/undecided/app.log"
before=$(ls -a "$WORK/undecided-out")
run_expect 3 "$STREAMCTL" run "$WORK/undecided.toml" --resume --savepoint-on-exit
assert_contains "$WORK/err" "cannot tell which file '$WORK/undecided/app.log' is"
assert_eq "$before" "$(ls -a "$WORK/undecided-out")" "output of a refused run"
assert_no_processes_left

# 7. An unchanged file that grew (the cron case) still goes on at its offset.
mkdir "$WORK/grown"
pipeline grown "$WORK/grown/app.log" "$WORK/grown-out" >"$WORK/grown.toml"
lines g 0 500 >"$WORK/grown/app.log"
resume grown
lines g 500 900 >>"$WORK/grown/app.log"
resume grown
resume grown
if grep -q "reading it from its start" "$WORK/grown.log"; then fail "grown: an appended file was read again"; fi
lines g 0 900 >"$WORK/grown.all"
check grown "$WORK/grown.all"
echo ok
