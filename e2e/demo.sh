#!/usr/bin/env bash
# The local demo (`make demo`): brings a test bed up (a real cluster + Dex), builds the agent
# image from the working tree, installs pinniped, points it at Dex, makes a kubeconfig, logs
# in and runs kubectl through it, printing each step.
#
# The bed stays up afterwards, and so do the binaries, alice's kubeconfig and her cached
# login (in the bed's state directory, removed with the bed): the last lines are commands to
# paste, to go on as alice, to log in as a person with the device flow, and to tear it down.
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

say "Toolchain: Kubernetes (PINNIPED_E2E_KUBE_VERSION, else the newest), etcd, Dex (built once per version, then cached)"
bindir="$(e2e/scripts/build-tools.sh | tail -n1)"
echo "    $("$bindir/kube-apiserver" --version) in $bindir"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
go build -o "$work/testbed" ./e2e/cmd/testbed
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
CGO_ENABLED=0 .ci/heavy-build.sh go build -trimpath -o "$work/pinniped-agent" ./cmd/pinniped-agent
tag="localhost/pinniped-e2e/pinniped-agent:$(sha256sum "$work/pinniped-agent" | cut -c1-16)"
tb image --binary "$work/pinniped-agent" --tag "$tag"

state="${PINNIPED_E2E_STATE_DIR:-/var/lib/pinniped-e2e/$name}" # as testbed finds it
issuer="$(grep PINNIPED_E2E_DEX_ISSUER "$state/env.sh" | cut -d'"' -f2)"

# What the demo leaves to play with lives in the bed's state directory: gone with the bed.
keep="$state/demo"
mkdir -p -m 0700 "$keep/bin"
cp "$work/testbed" "$keep/bin/testbed" # the lines to paste below work from any directory
# The commit goes into both binaries where git answers (pinniped doctor compares them).
buildvcs=false
if git status --porcelain >/dev/null 2>&1; then buildvcs=auto; fi
CGO_ENABLED=0 .ci/heavy-build.sh go build -trimpath -buildvcs=$buildvcs -o "$keep/bin/" ./cmd/pinniped ./cmd/pinniped-engine

say "pinniped install, trusting Dex ($issuer) for this cluster"
# Dex puts the address in "email"; its ID tokens carry the client ID as audience.
in_bed "$keep/bin/pinniped" install --image "$tag" --image-pull-policy Never \
	--oidc-issuer "$issuer" --oidc-audience pinniped-cli --oidc-ca-bundle "$state/pki/testbed-ca.crt" \
	--oidc-username-claim email --authenticator-name dex
in_bed kubectl get credentialissuers.config.concierge.pinniped.dev pinniped-config \
	-o jsonpath='{range .status.strategies[*]}    {.type}: {.status} ({.reason}){"\n"}{end}'

say "RBAC: Dex group \"developers\" may view the cluster"
in_bed sh -c 'kubectl create clusterrolebinding demo-developers-view --clusterrole=view --group=developers --dry-run=client -o yaml | kubectl apply -f -'

say "pinniped get kubeconfig (as the admin; the result holds no secrets)"
# --oidc-flow password: the demo logs in with PINNIPED_USERNAME/PASSWORD; users get a browser login by default.
in_bed "$keep/bin/pinniped" get kubeconfig --kubeconfig "$state/kubeconfig/admin.kubeconfig" --oidc-flow password >"$keep/alice.kubeconfig"
grep -E 'command:|--issuer|--concierge-endpoint' "$keep/alice.kubeconfig" | sed 's/^ */    /'
# The same cluster for a person at a terminal: the device flow shows a link to open in a browser.
in_bed "$keep/bin/pinniped" get kubeconfig --kubeconfig "$state/kubeconfig/admin.kubeconfig" --oidc-flow device >"$keep/person.kubeconfig"

# Sourced inside the bed: kubectl and pinniped as alice, with her own cache; or as a person.
# Her name is part of her cache entry's key (so another user in the same shell is never
# answered from it), hence PINNIPED_USERNAME here too.
cat >"$keep/alice.sh" <<EOT
export KUBECONFIG="$keep/alice.kubeconfig" XDG_CONFIG_HOME="$keep/alice" PATH="$keep/bin:\$PATH" PINNIPED_USERNAME=alice@example.com
EOT
cat >"$keep/person.sh" <<EOT
export KUBECONFIG="$keep/person.kubeconfig" XDG_CONFIG_HOME="$keep/person" PATH="$keep/bin:\$PATH"
EOT

say "kubectl get namespaces as alice@example.com (kubectl runs pinniped login: password grant against Dex, token exchange at the agent)"
in_bed sh -c ". '$keep/alice.sh' && PINNIPED_PASSWORD=alice-password kubectl get namespaces"

say "Again: now from the credential cache, no login"
in_bed sh -c ". '$keep/alice.sh' && kubectl auth whoami"

say "pinniped doctor: every link of alice's chain"
in_bed sh -c ". '$keep/alice.sh' && pinniped doctor"

tb_bin="$keep/bin/testbed"
cat <<EOT

The bed stays up, with alice's login cached (later kubectl asks for her password: alice-password).
Paste these as root, as the demo ran. Go on as alice:
  $tb_bin exec --name $name -- sh -c '. $keep/alice.sh && kubectl get ns && pinniped whoami && pinniped doctor'
Log in as a person, with the device flow (alice@example.com / alice-password, or bob@example.com / bob-password):
  1. The bed's network is its own; this serves its Dex at https://localhost:5556 here (leave it running):
     $tb_bin dex-proxy --name $name
     (from another machine, forward the port first: ssh -L 5556:127.0.0.1:5556 THIS-MACHINE)
  2. In another terminal:
     $tb_bin exec --name $name -- sh -c '. $keep/person.sh && kubectl get ns'
  3. Open the link it shows with https://localhost:5556 in place of $issuer, in a browser
     trusting $state/pki/testbed-ca.crt (or accept its warning), and log in.
A shell with the admin kubeconfig:  $tb_bin shell --name $name
Tear it all down:                   $tb_bin down --name $name
EOT
