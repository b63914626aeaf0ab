# shellcheck shell=bash
# Sourced by the build scripts, never run on its own. Two rules that every
# script must apply alike, so they live here once instead of drifting apart
# in each script:
#   - what a build running as root may trust (pinniped_require_root_env,
#     pinniped_require_trusted): as root, the scripts execute tools from
#     caches and write root-owned files into the Go caches; a cache another
#     account can change is a way for that account to run its programs as
#     root, and root's files left in it break that account's next build;
#   - where the heavy-build lock lives (pinniped_heavy_lock), which
#     .ci/heavy-build.sh takes for the scripts and for e2e/framework.go.
# Builds that do not run as root are not checked: they can only touch what
# their own account can.

# pinniped_trusted PATH: succeeds when no one but root can change PATH;
# otherwise prints why and fails. That holds when PATH and every directory
# above it are owned by root and writable by no one else. A directory above
# it may be world-writable if it has the sticky bit (/tmp, /var/tmp): there
# no one else can rename or remove root's entries. A PATH that does not exist
# yet is judged by the nearest existing directory above it, where root will
# create the rest, so that directory must not be writable by anyone else,
# sticky or not: otherwise someone could create PATH first. A symbolic link
# is judged both where it is and where it leads.
pinniped_trusted() {
	local path=$1 real
	[[ $path == /* ]] || path=$PWD/$path
	while [[ ! -e $path && ! -L $path ]]; do
		path=$(dirname "$path")
	done
	_pinniped_chain "$path" || return 1
	real=$(realpath -e -- "$path") || { echo "$path cannot be resolved"; return 1; }
	if [[ $real != "$path" ]]; then
		_pinniped_chain "$real" || return 1
	fi
}

# _pinniped_chain PATH: pinniped_trusted's walk from an existing PATH up to /.
_pinniped_chain() {
	local p=$1 first=1 uid user mode type
	while :; do
		IFS=' ' read -r uid user mode type < <(stat -c '%u %U %a %F' -- "$p") || { echo "cannot stat $p"; return 1; }
		if [[ $uid != 0 ]]; then
			echo "$p is owned by $user (uid $uid), not root"
			return 1
		fi
		# A link's own mode means nothing; who may replace it is its directory's business.
		if [[ $type != "symbolic link" ]] && ((8#$mode & 8#022)); then
			if [[ -n $first || $type != directory ]] || ! ((8#$mode & 8#1000)); then
				echo "$p is writable by group or others (mode $mode)"
				return 1
			fi
		fi
		[[ $p == / ]] && return 0
		p=$(dirname "$p")
		first=
	done
}

# _pinniped_refuse WHO LABEL PATH WHY: the refusal, with what to do instead.
_pinniped_refuse() {
	cat >&2 <<EOF
$1: refusing to run as root: $2 ($3) is not root's alone: $4.
  As root this build runs programs from it or leaves root-owned files in it: whoever can change it
  could have root run their programs, and root's files would break their own builds later.
  Run as root with root's own HOME and caches: \`sudo -H make ...\`, \`sudo -i\`, or HOME=/root,
  and unset GOPATH, GOMODCACHE, GOCACHE, GOENV, XDG_CONFIG_HOME, XDG_CACHE_HOME, XDG_DATA_HOME,
  PINNIPED_TOOLS_CACHE and PINNIPED_E2E_CACHE where they point at another account's files.
  (README.md, "Running the checks as root")
EOF
	return 1
}

# pinniped_require_trusted WHO LABEL=PATH...: as root, fails (saying why and
# what to do) unless every PATH is root's alone. Not root: does nothing.
pinniped_require_trusted() {
	local who=$1 arg why
	shift
	[[ $(id -u) == 0 ]] || return 0
	for arg in "$@"; do
		if ! why=$(pinniped_trusted "${arg#*=}"); then
			_pinniped_refuse "$who" "${arg%%=*}" "${arg#*=}" "$why"
			return 1
		fi
	done
}

# pinniped_require_root_env WHO [LABEL=PATH...]: as root, fails unless HOME,
# the XDG directories, the Go caches and every PATH given are root's alone.
# HOME and XDG because git, go (its env file, GOTOOLCHAIN included), helm and
# cosign read their settings from there and write their caches there, not
# only the caches named here. The one rule for every script: a root build
# with another account's HOME is refused rather than redirected, since
# quietly building into another place would leave the developer wondering
# where their caches went. Not root: does nothing.
pinniped_require_root_env() {
	local who=$1 v paths=() parts=()
	shift
	[[ $(id -u) == 0 ]] || return 0
	if [[ -z ${HOME:-} ]]; then
		echo "$who: refusing to run as root with HOME unset: set HOME=/root" >&2
		return 1
	fi
	paths+=("HOME=$HOME")
	for v in XDG_CONFIG_HOME XDG_CACHE_HOME XDG_DATA_HOME XDG_STATE_HOME; do
		[[ -z ${!v:-} ]] || paths+=("$v=${!v}")
	done
	if [[ -n ${GOENV:-} && $GOENV != off ]]; then
		paths+=("GOENV=$GOENV")
	fi
	# Checked before go runs at all: go env itself reads its settings file
	# (under HOME or XDG_CONFIG_HOME, or GOENV), and the GOPROXY and
	# GOTOOLCHAIN in there could have it fetch and run another toolchain.
	# So are the caches the environment names, and the go binary itself.
	for v in GOMODCACHE GOCACHE; do
		[[ -z ${!v:-} || ${!v} == off ]] || paths+=("$v=${!v}")
	done
	local part gobin
	IFS=: read -ra parts <<<"${GOPATH:-}"
	for part in "${parts[@]}"; do
		[[ -z $part ]] || paths+=("GOPATH=$part")
	done
	gobin=$(command -v go) || { echo "$who: go is not on PATH" >&2; return 1; }
	paths+=("the go command=$gobin")
	pinniped_require_trusted "$who" "${paths[@]}" || return 1
	paths=()
	local out goenv=() i names=(GOMODCACHE GOCACHE GOENV GOROOT)
	# GOTOOLCHAIN=local: a go.mod asking for a newer Go would otherwise have
	# this very go env download a toolchain into the module cache and run
	# it, before the module cache is checked.
	out=$(GOTOOLCHAIN=local go env GOMODCACHE GOCACHE GOENV GOROOT GOPATH) || return 1
	mapfile -t goenv <<<"$out"
	for i in 0 1 2 3; do
		v=${goenv[i]:-}
		[[ -z $v || $v == off ]] || paths+=("${names[i]}=$v")
	done
	# GOPATH is a list; go writes into its first entry, but trusts them all.
	IFS=: read -ra parts <<<"${goenv[4]:-}"
	for v in "${parts[@]}"; do
		[[ -z $v ]] || paths+=("GOPATH=$v")
	done
	pinniped_require_trusted "$who" "${paths[@]}" "$@"
}

# pinniped_require_root_owned_tree WHO LABEL DIR: as root, fails unless DIR is
# root's alone and so is every file under it (a binary another account can
# rewrite is as bad as one in a directory it can write). Not root: does nothing.
pinniped_require_root_owned_tree() {
	local who=$1 label=$2 dir=$3 bad
	[[ $(id -u) == 0 ]] || return 0
	pinniped_require_trusted "$who" "$label=$dir" || return 1
	bad=$(find "$dir" -mindepth 1 ! -type l \( ! -user 0 -o -perm /022 \) -print -quit)
	if [[ -n $bad ]]; then
		_pinniped_refuse "$who" "$label" "$dir" "$bad is not root's, or writable by group or others; remove $dir to have it rebuilt"
		return 1
	fi
}

# pinniped_heavy_lock: prints the path of the heavy-build lock, creating the
# directory it lives in. Its purpose: heavy builds on a 2-core machine take
# turns. It used to be /tmp/pinniped-heavy-build.lock, which any local user
# could create first and hold forever, stalling every build.
#   root: /run/pinniped, made 0755 by root. Not /run/lock (on Debian
#     world-writable like /tmp, so someone could make the directory first):
#     /run is root's alone. Every root build on the machine shares it.
#   anyone else: their own runtime directory (XDG_RUNTIME_DIR, when it is
#     theirs and writable by no one else), else a directory of their own
#     under their cache directory. Their builds take turns among
#     themselves, never with another account's.
pinniped_heavy_lock() {
	local dir why
	if [[ $(id -u) == 0 ]]; then
		dir=/run/pinniped
		# shellcheck disable=SC2174 # only the last directory is made here; /run is there
		mkdir -p -m 0755 "$dir"
		if ! why=$(pinniped_trusted "$dir"); then
			echo "heavy-build lock: refusing $dir: $why (remove it; it is made again, root's)" >&2
			return 1
		fi
	else
		dir=${XDG_RUNTIME_DIR:-}
		if [[ -z $dir ]] || ! _pinniped_own_private "$dir"; then
			dir=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/pinniped
			# shellcheck disable=SC2174 # 0700 matters for the lock's own directory alone
			mkdir -p -m 0700 "$dir"
			if ! _pinniped_own_private "$dir"; then
				echo "heavy-build lock: refusing $dir: not a directory of $(id -un)'s alone" >&2
				return 1
			fi
		fi
	fi
	echo "$dir/heavy-build.lock"
}

# _pinniped_own_private DIR: DIR is a directory (not a link) of this user's
# that no one else can write.
_pinniped_own_private() {
	local uid mode
	[[ -d $1 && ! -L $1 ]] || return 1
	read -r uid mode < <(stat -c '%u %a' -- "$1") || return 1
	[[ $uid == "$(id -u)" ]] && ! ((8#$mode & 8#022))
}
