# csv (header, columns, types) and lines in; json, csv and lines out.
source "$(dirname "$0")/lib/common.bash"

printf 'user,bytes,ok,price\na,10,true,1.5\n"b, the second",20,false,2\n' >"$WORK/in.csv"
cat >"$WORK/csv.toml" <<TOML
name = "csv"
[sources.rows]
type = "file"
path = "$WORK/in.csv"
format = "csv"
types = { bytes = "int", ok = "bool", price = "float" }
[sinks.out]
type = "stdout"
inputs = ["rows"]
TOML
run_expect 0 "$STREAMCTL" run "$WORK/csv.toml"
assert_eq '{"user":"a","bytes":10,"ok":true,"price":1.5}
{"user":"b, the second","bytes":20,"ok":false,"price":2.0}' "$(cat "$WORK/out")" "typed csv as json"

# Without types, every csv value is a string; `columns` names them and the header is skipped.
sed -i 's/^types = .*/columns = ["u", "b", "o", "p"]/' "$WORK/csv.toml"
run_expect 0 "$STREAMCTL" run "$WORK/csv.toml"
assert_eq '{"u":"a","b":"10","o":"true","p":"1.5"}
{"u":"b, the second","b":"20","o":"false","p":"2"}' "$(cat "$WORK/out")" "untyped csv"

# lines in, csv out.
printf 'alpha beta\ngamma\n' >"$WORK/in.txt"
cat >"$WORK/lines.toml" <<TOML
name = "lines"
[sources.text]
type = "file"
path = "$WORK/in.txt"
format = "lines"
[operators.m]
type = "map"
inputs = ["text"]
set = { n = "len(line)" }
[sinks.out]
type = "stdout"
inputs = ["m"]
format = "csv"
TOML
run_expect 0 "$STREAMCTL" run "$WORK/lines.toml"
assert_eq 'line,n
alpha beta,10
gamma,5' "$(cat "$WORK/out")" "lines to csv"

# lines out writes the `line` field as it is.
sed -i 's/^format = "csv"/format = "lines"/' "$WORK/lines.toml"
run_expect 0 "$STREAMCTL" run "$WORK/lines.toml"
assert_eq 'alpha beta
gamma' "$(cat "$WORK/out")" "lines to lines"

# A file sink writes a part file that appears only when complete, and never overwrites an
# earlier run's.
cat >"$WORK/file.toml" <<TOML
name = "to-files"
[sources.text]
type = "file"
path = "$WORK/in.txt"
format = "lines"
[sinks.out]
type = "file"
inputs = ["text"]
path = "$WORK/outdir"
TOML
run_expect 0 "$STREAMCTL" run "$WORK/file.toml"
run_expect 0 "$STREAMCTL" run "$WORK/file.toml"
assert_eq "part-0-0.json part-0-1.json" "$(cd "$WORK/outdir" && echo *)" "part files of two runs"
assert_eq "" "$(cd "$WORK/outdir" && ls -A | grep '^\.' || true)" "in-progress files left"
assert_eq '{"line":"alpha beta"}
{"line":"gamma"}' "$(cat "$WORK/outdir/part-0-1.json")" "part file content"
echo ok
