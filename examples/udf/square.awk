# A UDF in awk: {"n": N, ...} in, {"n": N, "square": N*N} out; a record without an integer
# `n` gives nothing. Run by examples/udf/awk_udf.toml. The two protocol lines of an awk UDF:
# an empty line ends a batch, and is echoed (and flushed) when its answers are out.
/^$/ { print ""; fflush(); next }
match($0, /"n": *-?[0-9]+/) {
  field = substr($0, RSTART, RLENGTH)
  sub(/"n": */, "", field)
  n = field + 0
  printf "{\"n\":%d,\"square\":%d}\n", n, n * n
}
