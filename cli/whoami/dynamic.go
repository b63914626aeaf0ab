package whoami

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

type dynamicCreator struct{ dyn dynamic.Interface }

func (d dynamicCreator) create(ctx context.Context, gvr schema.GroupVersionResource, obj map[string]any) (map[string]any, error) {
	u, err := d.dyn.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}
