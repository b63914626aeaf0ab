#!/usr/bin/env bash
# Tests, by hand, the checks that keep a build run as root from trusting
# another account's files (.ci/lib.sh, README.md "Running the checks as
# root"): what counts as root's alone, the refusal of another account's HOME
# and Go caches, tools.sh's check of a cached binary before it hands it out,
# build-tools.sh's check of the toolchain, and where the heavy-build lock is.
# The other account is nobody: parts of a temporary directory are chowned to
# it, and the non-root cases run as it. Offline, builds nothing, takes a few
# seconds; not part of `make test` (it needs root and a nobody account, and
# what it checks is the scripts' own plumbing).
#
#   sudo .ci/test-root-guards.sh
#
# It creates /run/pinniped (root's, 0755) if missing, as any root build would.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=.ci/lib.sh
. "$repo/.ci/lib.sh"
if [[ $(id -u) != 0 ]]; then
	echo "test-root-guards: run as root (it chowns files to nobody and checks root's rules)" >&2
	exit 1
fi
id nobody >/dev/null
nogroup=$(id -gn nobody)

tmp=$(mktemp -d)
holder=
cleanup() {
	# The lock holder below ends on its own within seconds.
	if [[ -n $holder ]]; then wait "$holder" || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
# nobody must reach its own directories below this one.
chmod 0755 "$tmp"

fails=0
pass() { echo "ok    $1"; }
fail() {
	echo "FAIL  $1"
	fails=$((fails + 1))
}
trusted() { # NAME PATH
	local why
	if why=$(pinniped_trusted "$2"); then pass "$1"; else fail "$1: refused: $why"; fi
}
untrusted() { # NAME PATH
	local why
	if why=$(pinniped_trusted "$2"); then fail "$1: trusted"; else pass "$1 ($why)"; fi
}
# as_nobody CMD...: CMD as nobody, with nothing of root's environment but PATH.
as_nobody() {
	setpriv --reuid=nobody --regid="$nogroup" --clear-groups env -i PATH="$PATH" "$@"
}
# root_env VAR=VALUE...: pinniped_require_root_env in a clean environment
# (HOME=$tmp/home unless given), its refusal on stdout.
root_env() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	env -i PATH="$PATH" HOME="$tmp/home" GOTOOLCHAIN=local "$@" \
		bash -c 'cd / && . "$0" && pinniped_require_root_env test' "$repo/.ci/lib.sh" 2>&1
}

echo "--- what counts as root's alone (pinniped_trusted)"
mkdir -m 0755 "$tmp/root" "$tmp/root/real" "$tmp/home"
mkdir -m 0755 "$tmp/nob" && chown nobody "$tmp/nob"
mkdir -m 0755 "$tmp/nob/rootsub"
mkdir -m 0775 "$tmp/groupw"
mkdir -m 0757 "$tmp/otherw"
mkdir -m 1777 "$tmp/sticky" && mkdir -m 0755 "$tmp/sticky/rootdir"
trusted "a root-owned 0755 directory" "$tmp/root"
trusted "a path not made yet, under a root-owned directory" "$tmp/root/a/b/c"
untrusted "a directory owned by nobody" "$tmp/nob"
untrusted "a path not made yet, under nobody's directory" "$tmp/nob/x/y"
untrusted "root's directory inside nobody's" "$tmp/nob/rootsub"
untrusted "a group-writable directory" "$tmp/groupw"
untrusted "an other-writable directory" "$tmp/otherw"
trusted "root's directory under a sticky world-writable one (as in /tmp)" "$tmp/sticky/rootdir"
untrusted "a path not made yet, right under a sticky world-writable directory" "$tmp/sticky/missing"
untrusted "a sticky world-writable directory itself" "$tmp/sticky"
ln -s "$tmp/nob" "$tmp/root/to-nob"
ln -s "$tmp/root/real" "$tmp/root/to-real"
ln -s "$tmp/root/real" "$tmp/nob/to-root"
untrusted "root's link to nobody's directory" "$tmp/root/to-nob"
trusted "root's link to root's directory" "$tmp/root/to-real"
untrusted "a link in nobody's directory to root's directory" "$tmp/nob/to-root"
install -m 0755 /dev/null "$tmp/root/bin-ok"
install -m 0775 /dev/null "$tmp/root/bin-groupw"
install -m 0755 -o nobody /dev/null "$tmp/root/bin-nobody"
trusted "a root-owned 0755 file" "$tmp/root/bin-ok"
untrusted "a group-writable file" "$tmp/root/bin-groupw"
untrusted "a file owned by nobody" "$tmp/root/bin-nobody"

echo "--- HOME, XDG and the Go caches as root (pinniped_require_root_env)"
refused() { # NAME WHAT-THE-REFUSAL-NAMES VAR=VALUE...
	local name=$1 want=$2 out
	shift 2
	if out=$(root_env "$@"); then
		fail "$name: accepted"
	elif [[ $out != *"$want"*"not root's alone"* ]]; then
		fail "$name: refused, but not naming $want: $out"
	else
		pass "$name"
	fi
}
if out=$(root_env); then pass "root's own HOME, Go's caches under it"; else fail "root's own HOME refused: $out"; fi
refused "HOME owned by nobody" "HOME" HOME="$tmp/nob"
refused "HOME group-writable" "HOME" HOME="$tmp/groupw"
refused "XDG_CACHE_HOME owned by nobody" "XDG_CACHE_HOME" XDG_CACHE_HOME="$tmp/nob/cache"
refused "GOMODCACHE in nobody's directory" "GOMODCACHE" GOMODCACHE="$tmp/nob/mod"
refused "GOCACHE in nobody's directory" "GOCACHE" GOCACHE="$tmp/nob/gocache"
refused "GOPATH's second entry nobody's" "GOPATH" GOPATH="$tmp/home/go:$tmp/nob/go"
refused "GOENV, go's settings file, nobody's" "GOENV" GOENV="$tmp/nob/env"
# A go command another account can replace, first on PATH: refused before it
# runs (it would run as root).
mkdir -p "$tmp/nob/gobin"
ln -s "$(command -v go)" "$tmp/nob/gobin/go"
chown -h nobody "$tmp/nob/gobin/go"
refused "the go command in nobody's directory" "the go command" PATH="$tmp/nob/gobin:$PATH"
# shellcheck disable=SC2016 # expanded by the inner bash
if out=$(env -i PATH="$PATH" HOME="$tmp/home" GOTOOLCHAIN=local bash -c \
	'cd / && . "$0" && pinniped_require_root_env test "the cache=$1"' "$repo/.ci/lib.sh" "$tmp/nob/c" 2>&1); then
	fail "a cache given by the caller, nobody's: accepted"
else
	pass "a cache given by the caller, nobody's"
fi

echo "--- tools.sh: the cached binary is checked before its path is handed out"
ver=$(sed -n 's/^ *\[cosign\]=\(v.*\)$/\1/p' "$repo/.ci/tools.sh")
tools=$tmp/tools
mkdir -p "$tools/cosign@$ver"
printf '#!/bin/sh\necho fake cosign\n' >"$tools/cosign@$ver/cosign"
chmod 0755 "$tools/cosign@$ver/cosign"
tools_sh() { env -i PATH="$PATH" HOME="$tmp/home" GOTOOLCHAIN=local PINNIPED_TOOLS_CACHE="$tools" "$repo/.ci/tools.sh" cosign 2>/dev/null; }
if out=$(tools_sh) && [[ $out == "$tools/cosign@$ver/cosign" ]]; then pass "root's binary in root's cache: its path"; else fail "root's binary in root's cache: got '${out:-}'"; fi
chmod 0775 "$tools/cosign@$ver/cosign"
if out=$(tools_sh) || [[ -n $out ]]; then fail "a group-writable binary: handed out ($out)"; else pass "a group-writable binary: refused, no path"; fi
chmod 0755 "$tools/cosign@$ver/cosign"
chown nobody "$tools/cosign@$ver/cosign"
if out=$(tools_sh) || [[ -n $out ]]; then fail "nobody's binary: handed out ($out)"; else pass "nobody's binary: refused, no path"; fi
chown root "$tools/cosign@$ver/cosign"
chown nobody "$tools/cosign@$ver"
if out=$(tools_sh) || [[ -n $out ]]; then fail "root's binary in nobody's directory: handed out ($out)"; else pass "root's binary in nobody's directory: refused, no path"; fi
chown root "$tools/cosign@$ver"
if out=$(env -i PATH="$PATH" HOME="$tmp/nob" GOTOOLCHAIN=local PINNIPED_TOOLS_CACHE="$tools" "$repo/.ci/tools.sh" cosign 2>/dev/null) || [[ -n $out ]]; then
	fail "root's cache, nobody's HOME: handed out ($out)"
else
	pass "root's cache, nobody's HOME: refused, no path"
fi

echo "--- build-tools.sh's check of the toolchain (pinniped_require_root_owned_tree)"
tc=$tmp/root/toolchain
mkdir -p "$tc"
install -m 0755 /dev/null "$tc/kubelet"
install -m 0644 /dev/null "$tc/.kubelet.stamp"
ln -s kubelet "$tc/a-link"
if pinniped_require_root_owned_tree test "the toolchain" "$tc" 2>/dev/null; then pass "root's toolchain"; else fail "root's toolchain refused"; fi
chown nobody "$tc/kubelet"
if pinniped_require_root_owned_tree test "the toolchain" "$tc" 2>/dev/null; then fail "a toolchain with nobody's kubelet: accepted"; else pass "a toolchain with nobody's kubelet: refused"; fi
chown root "$tc/kubelet" && chmod 0757 "$tc/kubelet"
if pinniped_require_root_owned_tree test "the toolchain" "$tc" 2>/dev/null; then fail "a toolchain with a writable kubelet: accepted"; else pass "a toolchain with a writable kubelet: refused"; fi

echo "--- the heavy-build lock"
if out=$("$repo/.ci/heavy-build.sh" --path) && [[ $out == /run/pinniped/heavy-build.lock ]]; then
	pass "root: $out"
else
	fail "root: got '${out:-}'"
fi
untrusted "a lock directory like /run/lock, world-writable with the sticky bit" "$tmp/sticky/pinniped"
trusted "/run/pinniped as made" /run/pinniped
if setpriv --reuid=nobody --regid="$nogroup" --clear-groups test -r "$repo/.ci/lib.sh"; then
	mkdir -m 0700 "$tmp/nobhome" "$tmp/nobrun" && chown nobody "$tmp/nobhome" "$tmp/nobrun"
	if out=$(as_nobody HOME="$tmp/nobhome" XDG_RUNTIME_DIR="$tmp/nobrun" "$repo/.ci/heavy-build.sh" --path) &&
		[[ $out == "$tmp/nobrun/heavy-build.lock" ]]; then
		pass "nobody, with a runtime directory of its own: $out"
	else
		fail "nobody, with a runtime directory of its own: got '${out:-}'"
	fi
	if out=$(as_nobody HOME="$tmp/nobhome" XDG_RUNTIME_DIR="$tmp/root" "$repo/.ci/heavy-build.sh" --path) &&
		[[ $out == "$tmp/nobhome/.cache/pinniped/heavy-build.lock" ]] &&
		[[ $(stat -c '%U %a' "$tmp/nobhome/.cache/pinniped") == "nobody 700" ]]; then
		pass "nobody, with someone else's runtime directory: its own 0700 directory, $out"
	else
		fail "nobody, with someone else's runtime directory: got '${out:-}'"
	fi
	chmod 0777 "$tmp/nobhome/.cache/pinniped"
	if out=$(as_nobody HOME="$tmp/nobhome" "$repo/.ci/heavy-build.sh" --path 2>/dev/null); then
		fail "nobody, its lock directory writable by others: used ($out)"
	else
		pass "nobody, its lock directory writable by others: refused"
	fi
	chmod 0700 "$tmp/nobhome/.cache/pinniped"
	# The lock is taken, not only named: a second command waits for the first.
	as_nobody HOME="$tmp/nobhome" "$repo/.ci/heavy-build.sh" sleep 3 &
	holder=$!
	sleep 1
	rc=0
	as_nobody HOME="$tmp/nobhome" timeout 1 "$repo/.ci/heavy-build.sh" true || rc=$?
	if [[ $rc == 124 ]]; then pass "a second heavy build waits while the first holds the lock"; else fail "a second heavy build did not wait (exit $rc)"; fi
	wait "$holder" || true
	holder=
else
	echo "skip  the non-root lock cases: nobody cannot read $repo"
fi

echo
if ((fails)); then
	echo "test-root-guards: $fails FAILED"
	exit 1
fi
echo "test-root-guards: all passed"
