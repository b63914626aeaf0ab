// Package kubeclient makes the agent's Kubernetes client with only the API
// groups the agent calls. kubernetes.NewForConfig builds a client for every
// API group Kubernetes has, and linking all of them (with their apply
// configurations) made a good part of the agent's binary, which an idle
// agent keeps resident. The agent's packages and the k8s.io/apiserver
// controllers it runs take a kubernetes.Interface, so that is still what
// this returns.
package kubeclient

import (
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// Clientset serves the groups below. Any other group is a programming
// error: its method is the embedded nil interface's and panics, which the
// unit and e2e tests of every caller would show at once.
type Clientset struct {
	kubernetes.Interface

	core           corev1.CoreV1Interface
	apps           appsv1.AppsV1Interface
	authentication authenticationv1.AuthenticationV1Interface
	authorization  authorizationv1.AuthorizationV1Interface
	certificates   certificatesv1.CertificatesV1Interface
	coordination   coordinationv1.CoordinationV1Interface
}

// New returns a client for cfg, all groups sharing one HTTP client (and so
// its connections), as kubernetes.NewForConfig does.
func New(cfg *rest.Config) (*Clientset, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	c := &Clientset{}
	var errs [6]error
	c.core, errs[0] = corev1.NewForConfigAndClient(cfg, httpClient)
	c.apps, errs[1] = appsv1.NewForConfigAndClient(cfg, httpClient)
	c.authentication, errs[2] = authenticationv1.NewForConfigAndClient(cfg, httpClient)
	c.authorization, errs[3] = authorizationv1.NewForConfigAndClient(cfg, httpClient)
	c.certificates, errs[4] = certificatesv1.NewForConfigAndClient(cfg, httpClient)
	c.coordination, errs[5] = coordinationv1.NewForConfigAndClient(cfg, httpClient)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

func (c *Clientset) CoreV1() corev1.CoreV1Interface { return c.core }
func (c *Clientset) AppsV1() appsv1.AppsV1Interface { return c.apps }
func (c *Clientset) AuthenticationV1() authenticationv1.AuthenticationV1Interface {
	return c.authentication
}
func (c *Clientset) AuthorizationV1() authorizationv1.AuthorizationV1Interface {
	return c.authorization
}
func (c *Clientset) CertificatesV1() certificatesv1.CertificatesV1Interface { return c.certificates }
func (c *Clientset) CoordinationV1() coordinationv1.CoordinationV1Interface { return c.coordination }
