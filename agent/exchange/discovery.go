package exchange

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
)

// The discovery documents are fixed, so they are built once.
var (
	loginGroup    = apiGroup(loginv1alpha1.GroupName)
	identityGroup = apiGroup(identityv1alpha1.GroupName)

	groupList = &metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{*loginGroup, *identityGroup},
	}

	loginResources = &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: loginv1alpha1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{
			Name: "tokencredentialrequests", SingularName: "tokencredentialrequest",
			Kind: "TokenCredentialRequest", Verbs: metav1.Verbs{"create", "list"},
			Categories: []string{"pinniped"},
		}},
	}

	identityResources = &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: identityv1alpha1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{
			Name: "whoamirequests", SingularName: "whoamirequest",
			Kind: "WhoAmIRequest", Verbs: metav1.Verbs{"create", "list"},
			Categories: []string{"pinniped"},
		}},
	}
)

func apiGroup(name string) *metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: name + "/v1alpha1", Version: "v1alpha1"}
	return &metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             name,
		Versions:         []metav1.GroupVersionForDiscovery{gv},
		PreferredVersion: gv,
	}
}
