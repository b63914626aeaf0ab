#!/usr/bin/env bash
# goreleaser's signing command (goreleaser.yaml, signs:): signs FILE with
# cosign and writes a Sigstore bundle (signature, and certificate or key
# hint) to BUNDLE.
#
#   .ci/cosign-sign.sh FILE BUNDLE
#
# In the release workflow: keyless. Sigstore's Fulcio certifies the
# workflow's GitHub OIDC identity and Rekor logs the signature, so anyone
# can check which workflow of which repository signed (README shows how).
# With PINNIPED_SIGN_KEY set (make release-snapshot makes a throwaway key):
# signed with that key, offline, in a network namespace of its own, and
# logged nowhere; that proves the configuration, not the build.
set -euo pipefail
file=${1:?usage: cosign-sign.sh FILE BUNDLE}
bundle=${2:?usage: cosign-sign.sh FILE BUNDLE}
cosign=$("$(dirname "$0")/tools.sh" cosign)
if [[ -n ${PINNIPED_SIGN_KEY:-} ]]; then
	exec unshare --net -- "$cosign" sign-blob --yes --key "$PINNIPED_SIGN_KEY" \
		--tlog-upload=false --use-signing-config=false --bundle "$bundle" "$file" >/dev/null
fi
exec "$cosign" sign-blob --yes --bundle "$bundle" "$file" >/dev/null
