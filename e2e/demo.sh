#!/usr/bin/env bash
# The local demo (`make demo`): brings a test bed up (a real cluster + Dex), builds the agent
# image from the working tree, installs pinniped, points it at Dex, makes a kubeconfig, logs
# in and runs kubectl through it, printing each step.
#
# The bed stays up afterwards so you can look around; the last lines say how to get a shell
# in it and how to tear it down.
#   PINNIPED_E2E_NAME     bed name (default "demo")
#   PINNIPED_E2E_PROFILE  kubeadm (default) or managed
set -euo pipefail
cd "$(dirname "$0")/.."

name="${PINNIPED_E2E_NAME:-demo}"
profile="${PINNIPED_E2E_PROFILE:-kubeadm}"
step=0
say() { step=$((step + 1)); printf '\n\033[1m==> %d. %s\033[0m\n' "$step" "$*"; }

if [[ $(id -u) != 0 ]]; then
	echo "demo: must run as root (the test bed creates a network namespace, bridges and cgroups)" >&2
	exit 1
fi

say "System packages (apt, only what is missing)"
e2e/scripts/install-deps.sh

say "Toolchain: Kubernetes v1.34, etcd, Dex (built once, then cached)"
bindir="$(e2e/scripts/build-tools.sh | tail -n1)"
echo "    $bindir"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
go build -o "$work/testbed" ./e2e/cmd/testbed
CGO_ENABLED=0 flock /tmp/pinniped-heavy-build.lock go build -trimpath -o "$work/" ./cmd/pinniped ./cmd/pinniped-engine
tb() { "$work/testbed" "$@" --name "$name"; }
in_bed() { "$work/testbed" exec --name "$name" -- "$@"; }

say "Test bed \"$name\" (profile $profile): etcd, kube-apiserver, kcm, scheduler, containerd, kubelet, kube-proxy, Dex"
if tb status >/dev/null 2>&1; then
	echo "    already up; reusing it"
else
	"$work/testbed" up --name "$name" --profile "$profile" --bin-dir "$bindir" >/dev/null
fi
in_bed kubectl get nodes -o wide

say "Agent image from the working tree (static build, packed without docker, imported into containerd)"
CGO_ENABLED=0 flock /tmp/pinniped-heavy-build.lock go build -trimpath -o "$work/pinniped-agent" ./cmd/pinniped-agent
tag="localhost/pinniped-e2e/pinniped-agent:$(sha256sum "$work/pinniped-agent" | cut -c1-16)"
tb image --binary "$work/pinniped-agent" --tag "$tag"

state="/var/lib/pinniped-e2e/$name"
issuer="$(grep PINNIPED_E2E_DEX_ISSUER "$state/env.sh" | cut -d'"' -f2)"

say "pinniped install, trusting Dex ($issuer) for this cluster"
# Dex puts the address in "email"; its ID tokens carry the client ID as audience.
in_bed "$work/pinniped" install --image "$tag" --image-pull-policy Never \
	--oidc-issuer "$issuer" --oidc-audience pinniped-cli --oidc-ca-bundle "$state/pki/testbed-ca.crt" \
	--oidc-username-claim email --authenticator-name dex
in_bed kubectl get credentialissuer pinniped-config \
	-o jsonpath='{range .status.strategies[*]}    {.type}: {.status} ({.reason}){"\n"}{end}'

say "RBAC: Dex group \"developers\" may view the cluster"
in_bed sh -c 'kubectl create clusterrolebinding demo-developers-view --clusterrole=view --group=developers --dry-run=client -o yaml | kubectl apply -f -'

say "pinniped get kubeconfig (as the admin; the result holds no secrets)"
# --oidc-flow password: the demo logs in with PINNIPED_USERNAME/PASSWORD; users get a browser login by default.
in_bed "$work/pinniped" get kubeconfig --kubeconfig "$state/kubeconfig/admin.kubeconfig" --oidc-flow password >"$work/user.kubeconfig"
grep -E 'command:|--issuer|--concierge-endpoint' "$work/user.kubeconfig" | sed 's/^ */    /'

say "kubectl get namespaces as alice@example.com (kubectl runs pinniped login: password grant against Dex, token exchange at the agent)"
in_bed env KUBECONFIG="$work/user.kubeconfig" XDG_CONFIG_HOME="$work/config" \
	PINNIPED_USERNAME=alice@example.com PINNIPED_PASSWORD=alice-password kubectl get namespaces

say "Again: now from the credential cache, no login"
in_bed env KUBECONFIG="$work/user.kubeconfig" XDG_CONFIG_HOME="$work/config" kubectl auth whoami

cat <<EOT

The bed stays up. Shell with the admin kubeconfig:  go run ./e2e/cmd/testbed shell --name $name
Tear it down:                                      go run ./e2e/cmd/testbed down --name $name
EOT
