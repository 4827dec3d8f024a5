#!/usr/bin/env bash
# The Debian package, end to end (issue 11):
#
#   bash tests/packaging/deb_install.sh BUILD_DIR
#
# runs `cpack -G DEB` in BUILD_DIR (already built) and checks the package's file list and
# Depends. As root it then installs the package with apt-get, runs an installed example with
# the installed binary and compares the output with the build tree binary's, finds the man
# page, and purges the package (and any dependency the install pulled in) on the way out, even
# on failure. It refuses to run when streamctl is already on the machine, which the purge would
# remove. Not root: only the checks that need no install, then exit 77 (skipped).
# Not a ctest test because it installs system-wide; .ci/run runs it (as root).
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ $# == 1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd) || fail "$1: no such build directory"
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
binary=$build/cli/streamctl
[[ -x $binary ]] || fail "$binary: not built (cmake --build $1 first)"

work=$(mktemp -d "${TMPDIR:-/tmp}/streamctl-deb.XXXXXX")
export STREAMCTL_STATE_DIR=$work/state
installed=0  # set just before apt-get install: from then on the trap purges
extra_packages=()

cleanup() {
  local code=$?
  if ((installed)); then
    echo "+ apt-get purge streamctl ${extra_packages[*]}"
    if ! DEBIAN_FRONTEND=noninteractive apt-get purge -y -q -o DPkg::Lock::Timeout=300 \
        streamctl "${extra_packages[@]}" >"$work/purge.log" 2>&1; then
      cat "$work/purge.log" >&2
      echo "FAIL: apt-get purge streamctl failed: the package is still installed" >&2
      code=1
    elif [[ $(dpkg-query -W -f='${db:Status-Status}' streamctl 2>/dev/null || true) =~ ^(|not-installed)$ ]] &&
        [[ ! -e /usr/bin/streamctl ]]; then
      echo "purged: dpkg knows no installed streamctl, /usr/bin/streamctl is gone"
    else
      echo "FAIL: streamctl is still installed after the purge" >&2
      code=1
    fi
  fi
  rm -rf "$work"
  exit "$code"
}
trap cleanup EXIT

# A package, or files, from before this test would be overwritten and then purged: refuse.
status=$(dpkg-query -W -f='${db:Status-Status}' streamctl 2>/dev/null || true)
if [[ -n $status && $status != not-installed ]]; then
  fail "streamctl is already installed from a package (dpkg status '$status'); this test would" \
    "purge it. Remove it first (apt-get purge streamctl) or run the test elsewhere"
fi

echo "+ cpack -G DEB in $build"
rm -f "$build"/streamctl_*.deb
(cd "$build" && cpack -G DEB) >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log" >&2; fail "cpack -G DEB failed in $build"; }
debs=("$build"/streamctl_*.deb)
[[ ${#debs[@]} == 1 && -f ${debs[0]} ]] || fail "cpack made no single streamctl_*.deb in $build: ${debs[*]}"
deb=${debs[0]}
echo "package: $deb ($(du -k "$deb" | cut -f1) KiB)"

# The file list, one ./path a line (directories end in /).
dpkg-deb -c "$deb" | awk '{ print $6 }' >"$work/contents"
has() {
  grep -qxF -- ".$1" "$work/contents" || { cat "$work/contents" >&2; fail "$deb does not hold $1"; }
}
has /usr/bin/streamctl
has /usr/share/man/man1/streamctl.1.gz
has /usr/share/man/man1/streamctl-run.1.gz
has /usr/share/man/man5/streamctl-pipeline.5.gz
has /usr/share/bash-completion/completions/streamctl
has /usr/share/zsh/vendor-completions/_streamctl
has /usr/share/fish/vendor_completions.d/streamctl.fish
has /usr/share/doc/streamctl/copyright
# Every file of examples/, uncompressed, at the same relative path (not the __pycache__ that
# the e2e tests leave in examples/udf), and nothing else there.
find "$source_dir/examples" -name __pycache__ -prune -o -type f -printf './usr/share/doc/streamctl/examples/%P\n' |
  sort >"$work/examples"
while IFS= read -r example; do
  has "${example#.}"
done <"$work/examples"
extra=$(grep '^\./usr/share/doc/streamctl/examples/.*[^/]$' "$work/contents" | sort | comm -13 "$work/examples" - || true)
[[ -z $extra ]] || fail "$deb holds examples that are not in examples/: $extra"
outside=$(grep -v -e '^\./$' -e '^\./usr/' "$work/contents" || true)
[[ -z $outside ]] || fail "$deb holds files outside /usr: $outside"
uncompressed=$(grep -E '^\./usr/share/man/man[0-9]/.*[^/]$' "$work/contents" | grep -v '\.gz$' || true)
[[ -z $uncompressed ]] || fail "$deb holds man pages that are not gzipped: $uncompressed"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/man/man1/streamctl.1.gz | gzip -t ||
  fail "streamctl.1.gz in $deb is not gzip data"
echo "ok: file list ($(grep -vc '/$' "$work/contents") files)"

field() { dpkg-deb -f "$deb" "$1"; }
depends=$(field Depends)
echo "Depends: $depends"
for library in libzmq5 liblz4-1; do
  # A whole package name in the list: "libzmq5 (>= 4.3.4), liblz4-1 (>= 0.0~r130)", ...
  grep -qE "(^|[,|] *)$library( |,|$)" <<<"$depends" || fail "Depends of $deb does not name $library: $depends"
done
[[ $(field Architecture) == "$(dpkg --print-architecture)" ]] ||
  fail "Architecture '$(field Architecture)' is not dpkg's '$(dpkg --print-architecture)'"
version=$("$binary" --version)
[[ $version == *" $(field Version)" || $version == "$(field Version)" ]] ||
  fail "package Version '$(field Version)' is not the binary's ('$version')"
for name in Maintainer Description Section; do
  [[ -n $(field "$name") ]] || fail "$deb has no $name field"
done
echo "ok: control fields (Version $(field Version), Architecture $(field Architecture), Section $(field Section))"

if [[ $(id -u) != 0 ]]; then
  echo "SKIP: not root: installing the package system-wide (apt-get install, run, man, purge) needs root;" \
    "the file list and control checks passed"
  exit 77
fi

# Files of the package already on disk belong to something else (a `cmake --install --prefix
# /usr`, say): the install would overwrite them and the purge delete them.
while IFS= read -r path; do
  [[ ! -e ${path#.} ]] || fail "${path#.} already exists outside any streamctl package; this test would overwrite and then delete it"
done < <(grep -v '/$' "$work/contents")

# What apt-get would install besides streamctl (dependencies missing from this machine) is
# purged with it, so the machine is left as it was.
apt-get install -s "$deb" >"$work/simulate.log" 2>&1 || { cat "$work/simulate.log" >&2; fail "apt-get cannot install $deb"; }
mapfile -t extra_packages < <(awk '$1 == "Inst" && $2 != "streamctl" { print $2 }' "$work/simulate.log")
echo "+ apt-get install -y $deb${extra_packages[*]:+ (pulls in ${extra_packages[*]})}"
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 "$deb" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "apt-get install $deb failed"; }

# A dpkg path-exclude (slim container images drop /usr/share/doc and /usr/share/man) keeps an
# installed file off the disk; say so instead of failing on something the package got right.
excluded() {
  local pattern
  while read -r _ pattern; do
    # shellcheck disable=SC2053  # the right side is dpkg's glob, matched as a glob
    [[ $1 == $pattern ]] && return 0
  done < <(cat /etc/dpkg/dpkg.cfg /etc/dpkg/dpkg.cfg.d/* 2>/dev/null | grep '^path-exclude')
  return 1
}

[[ -x /usr/bin/streamctl ]] || fail "/usr/bin/streamctl is not there after the install"
[[ $(/usr/bin/streamctl --version) == "$version" ]] ||
  fail "installed streamctl --version says '$(/usr/bin/streamctl --version)', the build tree's '$version'"

examples=/usr/share/doc/streamctl/examples
if [[ ! -f $examples/clicks_filter.toml ]] && excluded "$examples/clicks_filter.toml"; then
  echo "note: dpkg's path-exclude keeps $examples off this machine; running the source tree's examples"
  examples=$source_dir/examples
fi
echo "+ /usr/bin/streamctl run $examples/clicks_filter.toml < $examples/data/clicks.jsonl"
"$binary" run "$source_dir/examples/clicks_filter.toml" <"$source_dir/examples/data/clicks.jsonl" >"$work/expected" ||
  fail "the build tree's streamctl failed on examples/clicks_filter.toml"
/usr/bin/streamctl run "$examples/clicks_filter.toml" <"$examples/data/clicks.jsonl" >"$work/actual" ||
  fail "/usr/bin/streamctl failed on $examples/clicks_filter.toml"
[[ -s $work/expected ]] || fail "examples/clicks_filter.toml gave no output: nothing to compare"
diff -u "$work/expected" "$work/actual" >&2 || fail "the installed streamctl's output differs from the build tree's"
echo "ok: same $(wc -l <"$work/expected") records from the installed binary and the build tree's"
# The udf example runs its script from the installed examples directory (found from the file).
/usr/bin/streamctl test "$examples/udf/awk_udf.toml" >"$work/test.log" 2>&1 ||
  { cat "$work/test.log" >&2; fail "streamctl test $examples/udf/awk_udf.toml failed"; }
echo "ok: streamctl test $examples/udf/awk_udf.toml"

page=/usr/share/man/man1/streamctl.1.gz
if [[ ! -f $page ]] && excluded "$page"; then
  echo "note: dpkg's path-exclude keeps $page off this machine; not looking for the man page"
elif command -v man >/dev/null; then
  found=$(man -w streamctl) || fail "man -w streamctl finds no page"
  [[ $found == "$page" ]] || fail "man -w streamctl gives '$found', not $page"
  echo "ok: man -w streamctl: $found"
else
  [[ -f $page ]] || fail "$page is not there after the install"
  echo "ok: $page (no man on this machine to ask)"
fi
[[ -f /usr/share/bash-completion/completions/streamctl ]] || excluded /usr/share/bash-completion/completions/streamctl ||
  fail "the bash completion is not there after the install"
echo "ok: installed"
