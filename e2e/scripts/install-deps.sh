#!/usr/bin/env bash
# Installs (idempotently, quietly) the system packages the e2e test bed needs: the container
# runtime and CNI plugins, iptables/conntrack for kube-proxy, nsenter/ip, Chromium for
# browser logins, a D-Bus session bus and gnome-keyring for the Secret Service keyring,
# tmux for TUI tests, GNU time for the login benchmark's peak memory, and curl for a
# request as another local user. Debian/Ubuntu (apt) only.
set -euo pipefail

pkgs=(containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux
	chromium dbus-daemon dbus-bin gnome-keyring tmux ca-certificates time curl)

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if ((${#missing[@]} == 0)); then
	exit 0
fi
if [[ $(id -u) != 0 ]]; then
	echo "install-deps: need root to install: ${missing[*]}" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# --no-install-recommends: dbus-x11 (recommended by gnome-keyring) would make libraries
# spawn dbus-launch daemons behind our back.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/pinniped-e2e-apt.log 2>&1 || {
	echo "install-deps: apt-get install failed; see /tmp/pinniped-e2e-apt.log" >&2
	tail -20 /tmp/pinniped-e2e-apt.log >&2
	exit 1
}
# Debian starts services from maintainer scripts where it can; the test bed runs its own
# containerd with its own socket and never uses a system one.
