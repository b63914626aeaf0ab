#!/usr/bin/env bash
# The local demo (`make demo`): brings a test bed up (a real cluster + Dex), builds the agent
# image from the working tree, installs pinniped, points it at Dex, makes a kubeconfig, logs
# in and runs kubectl through it, printing each step. Steps whose CLI command does not exist
# yet are reported as PENDING (and name the issue that adds them) instead of being faked.
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
pending() { printf '    PENDING: %s\n' "$*"; }

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
CGO_ENABLED=0 flock /tmp/pinniped-heavy-build.lock go build -trimpath -o "$work/pinniped" ./cmd/pinniped
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

has() { "$work/pinniped" "$@" --help >/dev/null 2>&1; }
state="/var/lib/pinniped-e2e/$name"
issuer="$(grep PINNIPED_E2E_DEX_ISSUER "$state/env.sh" | cut -d'"' -f2)"
ca_b64="$(base64 -w0 "$state/pki/testbed-ca.crt")"

say "pinniped install"
if has install; then
	in_bed "$work/pinniped" install --image "$tag"
else
	pending "'pinniped install' is not implemented yet (issue 6). Applying the CRDs only:"
	for f in install/crds/*.yaml; do in_bed kubectl apply --server-side -f "$f"; done
fi

say "A JWTAuthenticator that trusts Dex ($issuer)"
cat >"$work/jwtauthenticator.yaml" <<YAML
apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata:
  name: dex
spec:
  issuer: $issuer
  audience: pinniped-cli
  tls:
    certificateAuthorityData: $ca_b64
YAML
in_bed kubectl apply -f "$work/jwtauthenticator.yaml"

say "pinniped get kubeconfig"
if has get kubeconfig; then
	in_bed "$work/pinniped" get kubeconfig --kubeconfig "$state/kubeconfig/admin.kubeconfig" >"$work/user.kubeconfig"
	echo "    wrote a kubeconfig with no secrets in it ($(wc -l <"$work/user.kubeconfig") lines)"
else
	pending "'pinniped get kubeconfig' is not implemented yet (issue 6)"
fi

say "Log in as alice@example.com (password grant against Dex)"
if has login oidc; then
	pending "the login runs inside kubectl via the kubeconfig's exec plugin (next step)"
else
	pending "'pinniped login oidc' is not implemented yet (issue 5). Showing that Dex issues alice a verified ID token:"
	tb token --user alice@example.com --claims | sed 's/^/    /'
fi

say "kubectl get namespaces through the generated kubeconfig"
if [[ -s "$work/user.kubeconfig" ]] && has login oidc; then
	in_bed env KUBECONFIG="$work/user.kubeconfig" PINNIPED_USERNAME=alice@example.com PINNIPED_PASSWORD=alice-password kubectl get namespaces
else
	pending "needs 'pinniped get kubeconfig' and 'pinniped login' (issues 5, 6)"
fi

cat <<EOT

The bed stays up. Shell with the admin kubeconfig:  go run ./e2e/cmd/testbed shell --name $name
Tear it down:                                      go run ./e2e/cmd/testbed down --name $name
EOT
