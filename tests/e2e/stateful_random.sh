# Every stateful operator gives the same output multiset at any parallelism (1-4) and batch size
# (WindFlow's graph tests), equal to a plain computation of what it should be. The input is out
# of order by up to 2 s and spread over 4 files of consecutive time ranges (so several source
# subtasks hold their own watermarks, and one that reads two files reads them in time order);
# max_delay = 5s makes no record late, so the result is fully determined.
source "$(dirname "$0")/lib/common.bash"

python3 - "$WORK" <<'PY'
import json, random, sys
work = sys.argv[1]
random.seed(7)
clicks, profiles = [], []
for i in range(12000):
    ts = 1_700_000_000_000 + i * 150 + random.randint(-2000, 2000)
    clicks.append({"id": i, "ts": ts, "user": "u%d" % random.randint(1, 60),
                   "bytes": random.randint(1, 1000)})
    if random.random() < 0.1:  # an exact duplicate, a little later
        clicks.append(dict(clicks[-1]))
for i in range(3000):
    ts = 1_700_000_000_000 + i * 600 + random.randint(-2000, 2000)
    profiles.append({"ts": ts, "user": "u%d" % random.randint(1, 80), "tier": random.choice("abc")})
quarter = (len(clicks) + 3) // 4
for k in range(4):
    with open("%s/clicks-%d.jsonl" % (work, k), "w") as f:
        for r in clicks[k * quarter:(k + 1) * quarter]: f.write(json.dumps(r) + "\n")
with open("%s/profiles.jsonl" % work, "w") as f:
    for r in profiles: f.write(json.dumps(r) + "\n")
PY

source_block() { # NAME FILES
  cat <<TOML
[sources.$1]
type = "file"
path = "$2"
event_time = "ts"
watermark = { max_delay = "5s" }
TOML
}

# pipeline NAME OPERATOR-TOML: clicks (and profiles) -> op -> out (a file sink)
pipeline() {
  { echo "name = \"$1\""
    source_block clicks "$WORK/clicks-*.jsonl"
    source_block profiles "$WORK/profiles.jsonl"
    echo "[operators.op]"
    echo "$2"
    echo "[sinks.out]"
    echo "type = \"file\""
    echo "inputs = [\"op\"]"
    echo "path = \"$WORK/out-$1\""
  } >"$WORK/$1.toml"
}

pipeline tumbling 'type = "window"
inputs = ["clicks"]
key = ["user"]
window = { kind = "tumbling", size = "10s" }
aggregates = { n = "count()", bytes = "sum(bytes)", top = "max(bytes)" }'

pipeline sliding 'type = "window"
inputs = ["clicks"]
key = ["user"]
window = { kind = "sliding", size = "10s", slide = "4s" }
aggregates = { n = "count()" }'

pipeline session 'type = "window"
inputs = ["clicks"]
key = ["user"]
window = { kind = "session", gap = "12s" }
aggregates = { n = "count()", first = "min(id)" }'

pipeline dedup 'type = "dedup"
inputs = ["clicks"]
key = ["id"]
within = "1m"'

pipeline window_join 'type = "join"
inputs = ["clicks", "profiles"]
on = { left = "user", right = "user" }
window = { kind = "tumbling", size = "10s" }
select = { id = "left.id", user = "left.user", tier = "right.tier", pts = "right.ts" }'

pipeline interval_join 'type = "join"
inputs = ["clicks", "profiles"]
on = { left = "user", right = "user" }
interval = { lower = "-3s", upper = "1s" }
select = { id = "left.id", tier = "right.tier", pts = "right.ts" }'

# The profiles source is read by the joins only; the other pipelines leave it out.
for name in tumbling sliding session dedup; do
  python3 - "$WORK/$name.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r'\[sources\.profiles\][^\[]*', '', text)
open(sys.argv[1], 'w').write(text)
PY
done

python3 "$SOURCE_DIR/tests/e2e/lib/stateful_reference.py" "$WORK"

for name in tumbling sliding session dedup window_join interval_join; do
  for round in 1 2; do
    p=$((RANDOM % 4 + 1))
    batch=$(shuf -n1 -e 1 7 64 1024)
    rm -rf "$WORK/out-$name"
    run_expect 0 "$STREAMCTL" run "$WORK/$name.toml" -p $p --set batch_size=$batch
    cat "$WORK/out-$name"/part-* 2>/dev/null | canonical >"$WORK/got-$name"
    if ! cmp -s "$WORK/expected-$name" "$WORK/got-$name"; then
      echo "--- expected vs got, $name at parallelism $p, batch_size $batch:" >&2
      diff "$WORK/expected-$name" "$WORK/got-$name" | head -10 >&2
      fail "$name at parallelism $p, batch size $batch: $(wc -l <"$WORK/got-$name") records, expected $(wc -l <"$WORK/expected-$name")"
    fi
  done
done
assert_no_processes_left
echo ok
