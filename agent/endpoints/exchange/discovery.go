package exchange

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
)

// api is everything of the served API that depends on the group suffix:
// paths, apiVersions and the discovery documents. It is fixed for the
// life of a Handler, so it is built once.
type api struct {
	loginVersion, identityVersion string // group/version
	authGroup                     string // spec.authenticator.apiGroup a TokenCredentialRequest must name

	loginGroupPath, identityGroupPath string // /apis/<group>
	loginPath, identityPath           string // /apis/<group>/<version>
	tcrPath, whoAmIPath               string

	groupList                        *metav1.APIGroupList
	loginGroup, identityGroup        *metav1.APIGroup
	loginResources, identityResource *metav1.APIResourceList
	tcrList                          *loginv1alpha1.TokenCredentialRequestList
	whoAmIList                       *identityv1alpha1.WhoAmIRequestList
}

func newAPI(suffix string) *api {
	login, identity := groupsuffix.Group(groupsuffix.Login, suffix), groupsuffix.Group(groupsuffix.Identity, suffix)
	a := &api{
		loginVersion:    groupsuffix.GroupVersion(groupsuffix.Login, suffix),
		identityVersion: groupsuffix.GroupVersion(groupsuffix.Identity, suffix),
		authGroup:       groupsuffix.Group(groupsuffix.Authentication, suffix),
		loginGroup:      apiGroup(login),
		identityGroup:   apiGroup(identity),
	}
	a.loginGroupPath, a.identityGroupPath = "/apis/"+login, "/apis/"+identity
	a.loginPath, a.identityPath = "/apis/"+a.loginVersion, "/apis/"+a.identityVersion
	a.tcrPath, a.whoAmIPath = TokenCredentialRequestPath(suffix), a.identityPath+"/whoamirequests"
	a.groupList = &metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{*a.loginGroup, *a.identityGroup},
	}
	a.loginResources = &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: a.loginVersion,
		APIResources: []metav1.APIResource{{
			Name: "tokencredentialrequests", SingularName: "tokencredentialrequest",
			Kind: "TokenCredentialRequest", Verbs: metav1.Verbs{"create", "list"},
			Categories: []string{"pinniped"},
		}},
	}
	a.identityResource = &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: a.identityVersion,
		APIResources: []metav1.APIResource{{
			Name: "whoamirequests", SingularName: "whoamirequest",
			Kind: "WhoAmIRequest", Verbs: metav1.Verbs{"create", "list"},
			Categories: []string{"pinniped"},
		}},
	}
	a.tcrList = &loginv1alpha1.TokenCredentialRequestList{
		TypeMeta: metav1.TypeMeta{Kind: "TokenCredentialRequestList", APIVersion: a.loginVersion}, Items: []loginv1alpha1.TokenCredentialRequest{}}
	a.whoAmIList = &identityv1alpha1.WhoAmIRequestList{
		TypeMeta: metav1.TypeMeta{Kind: "WhoAmIRequestList", APIVersion: a.identityVersion}, Items: []identityv1alpha1.WhoAmIRequest{}}
	return a
}

// TokenCredentialRequestPath is where TokenCredentialRequests are created
// under suffix ("" means the default): the one path the impersonation proxy
// answers itself.
func TokenCredentialRequestPath(suffix string) string {
	return "/apis/" + groupsuffix.GroupVersion(groupsuffix.Login, suffix) + "/tokencredentialrequests"
}

func apiGroup(name string) *metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + groupsuffix.Version, Version: groupsuffix.Version}
	return &metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             name,
		Versions:         []metav1.GroupVersionForDiscovery{gv},
		PreferredVersion: gv,
	}
}
