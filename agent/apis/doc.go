// Package apis holds the wire contract between the pinniped CLI and the
// pinniped agent. The groups, kinds and JSON field names deliberately match
// upstream Pinniped's Concierge so that existing clients, kubeconfigs and
// GitOps manifests keep working against this agent unchanged.
//
// Nothing in these packages may import client-go or any other heavy package:
// the CLI links them and runs on every kubectl call.
package apis
