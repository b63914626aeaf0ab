package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JWTAuthenticatorSpec configures how to validate JWTs from one OIDC issuer.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.certificateAuthorityData) || !has(self.tls.certificateAuthorityDataSource)",message="set at most one of tls.certificateAuthorityData and tls.certificateAuthorityDataSource"
// +kubebuilder:validation:XValidation:rule="!has(self.claimMappings) || !has(self.claims) || ((!has(self.claims.username) || size(self.claims.username) == 0) && (!has(self.claims.groups) || size(self.claims.groups) == 0))",message="set claims (upstream Pinniped's form) or claimMappings (Kubernetes' form), not both"
type JWTAuthenticatorSpec struct {
	// Issuer is the OIDC issuer URL. It must be https: tokens from a
	// plain-http issuer could be forged by anyone on the network path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^https://`
	Issuer string `json:"issuer"`

	// Audience is the required "aud" claim. Use a value unique to this
	// cluster so a token minted for one cluster cannot be replayed on another.
	// +kubebuilder:validation:MinLength=1
	Audience string `json:"audience"`

	// Audiences are more audiences accepted besides Audience; a token is
	// accepted when its "aud" holds any of them (AudienceMatchPolicy
	// MatchAny), as in kube-apiserver's AuthenticationConfiguration.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	Audiences []string `json:"audiences,omitempty"`

	// AudienceMatchPolicy must be MatchAny (or empty) when Audiences is set.
	// +optional
	// +kubebuilder:validation:Enum=MatchAny
	AudienceMatchPolicy string `json:"audienceMatchPolicy,omitempty"`

	// Claims maps token claims to the Kubernetes username and groups, as
	// upstream Pinniped does: claim names, no prefix. For prefixes, CEL
	// expressions, a UID or validation rules use ClaimMappings instead.
	// +optional
	Claims JWTTokenClaims `json:"claims"`

	// ClaimValidationRules must all hold for a token to be accepted: a
	// claim with a required value, or a CEL expression over claims that
	// returns a bool. Same fields and meaning as kube-apiserver's
	// AuthenticationConfiguration jwt.claimValidationRules.
	// +optional
	ClaimValidationRules []ClaimValidationRule `json:"claimValidationRules,omitempty"`

	// ClaimMappings says how the username, groups and UID are made from
	// the claims, by claim name (with a prefix) or by CEL expression, as
	// kube-apiserver's jwt.claimMappings. Extra mappings are refused: a
	// client certificate cannot carry them.
	// +optional
	ClaimMappings *ClaimMappings `json:"claimMappings,omitempty"`

	// UserValidationRules must all hold for the user the mappings made
	// (CEL over user.username, user.groups, user.uid, user.extra).
	// +optional
	UserValidationRules []UserValidationRule `json:"userValidationRules,omitempty"`

	// TLS configures how to verify the issuer's serving certificate.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// AllowedClockSkew is how far the issuer's clock may be from the
	// agent's, either way, when a token's times are checked. Unset or 0,
	// no token is accepted after its exp, nor whose nbf is more than a
	// minute ahead (kube-apiserver's rules), nor whose iat is (stricter:
	// kube-apiserver does not check iat). Set, a token is accepted until
	// this long after its exp and from this much more before its nbf and
	// iat; a stolen token then works as much longer.
	// At most 3m (a Go duration, e.g. "2m30s"); the Ready condition
	// states the value in force.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('3m')",message="allowedClockSkew must be a duration from 0s to 3m"
	AllowedClockSkew *metav1.Duration `json:"allowedClockSkew,omitempty"`
}

// JWTTokenClaims names the claims that carry the user's identity.
type JWTTokenClaims struct {
	// Groups is the claim holding the groups, as an array or a single string.
	// Defaults to "groups".
	// +optional
	Groups string `json:"groups"`

	// Username is the claim holding the username. Defaults to "username".
	// +optional
	Username string `json:"username"`
}

// ClaimValidationRule is one rule a token's claims must follow.
type ClaimValidationRule struct {
	// Claim must be present and equal RequiredValue (strings only).
	// +optional
	Claim string `json:"claim,omitempty"`
	// +optional
	RequiredValue string `json:"requiredValue,omitempty"`

	// Expression is CEL over claims returning a bool; false refuses the
	// token with Message.
	// +optional
	Expression string `json:"expression,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// ClaimMappings makes the Kubernetes user from the claims.
type ClaimMappings struct {
	// Username is required: a claim with a prefix ("" for none), or an
	// expression returning a non-empty string. An expression that reads
	// claims.email must also check claims.email_verified.
	Username PrefixedClaimOrExpression `json:"username"`
	// Groups: a claim (string or list) with a prefix, or an expression
	// returning a string or a list of strings.
	// +optional
	Groups PrefixedClaimOrExpression `json:"groups,omitempty"`
	// UID: a claim or an expression returning a string. It reaches the
	// API server in the certificate (the Kubernetes UID name attribute,
	// read by kube-apiserver 1.33 and later).
	// +optional
	UID ClaimOrExpression `json:"uid,omitempty"`
	// Extra is accepted only to name it in the error: client
	// certificates have no place for extra values.
	// +optional
	Extra []ExtraMapping `json:"extra,omitempty"`
}

// PrefixedClaimOrExpression is a claim name with a prefix, or a CEL expression.
type PrefixedClaimOrExpression struct {
	// +optional
	Claim string `json:"claim,omitempty"`
	// Prefix is required with Claim; "" means none.
	// +optional
	Prefix *string `json:"prefix,omitempty"`
	// +optional
	Expression string `json:"expression,omitempty"`
}

// ClaimOrExpression is a claim name or a CEL expression.
type ClaimOrExpression struct {
	// +optional
	Claim string `json:"claim,omitempty"`
	// +optional
	Expression string `json:"expression,omitempty"`
}

// ExtraMapping maps a key of the user's extra to a CEL expression.
type ExtraMapping struct {
	Key             string `json:"key"`
	ValueExpression string `json:"valueExpression"`
}

// UserValidationRule is one rule the mapped user must follow.
type UserValidationRule struct {
	// Expression is CEL over user returning a bool.
	Expression string `json:"expression"`
	// +optional
	Message string `json:"message,omitempty"`
}

// JWTAuthenticatorStatus is the agent's view of the authenticator.
type JWTAuthenticatorStatus struct {
	// Conditions say what is working and, when not, what to fix.
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Phase summarises the conditions.
	// +kubebuilder:default=Pending
	// +optional
	Phase Phase `json:"phase,omitempty"`
}

// Condition types specific to JWTAuthenticator.
const (
	ConditionIssuerURLValid    = "IssuerURLValid"
	ConditionDiscoveryURLValid = "DiscoveryURLValid"
	ConditionJWKSURLValid      = "JWKSURLValid"
	ConditionJWKSFetchValid    = "JWKSFetchValid"
	// ConditionClaimRulesValid is false when the claim rules do not
	// compile or break kube-apiserver's rules for them; its message names
	// the field.
	ConditionClaimRulesValid = "ClaimRulesValid"
)

// JWTAuthenticator tells the agent to trust JWTs from an OIDC issuer.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=pinniped;pinniped-authenticator;pinniped-authenticators
// +kubebuilder:printcolumn:name="Issuer",type=string,JSONPath=`.spec.issuer`
// +kubebuilder:printcolumn:name="Audience",type=string,JSONPath=`.spec.audience`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type JWTAuthenticator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   JWTAuthenticatorSpec   `json:"spec"`
	Status JWTAuthenticatorStatus `json:"status,omitempty"`
}

// JWTAuthenticatorList is a list of JWTAuthenticator.
//
// +kubebuilder:object:root=true
type JWTAuthenticatorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []JWTAuthenticator `json:"items"`
}
