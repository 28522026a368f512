package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side-apply field manager of everything this package applies.
const FieldManager = "hypernode-local"

// Applier server-side applies YAML documents of any kind, like `kubectl apply --server-side`.
type Applier struct {
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
}

// NewApplier returns an Applier acting as the identity of cfg.
func NewApplier(cfg *restclient.Config) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dynamic: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Decode splits a multi-document YAML stream into objects, skipping empty documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, fmt.Errorf("document %d has no apiVersion or kind", len(objs)+1)
		}
		objs = append(objs, obj)
	}
}

// ApplyFile applies every document of a YAML file; namespaced objects without a namespace go
// to defaultNamespace.
func (a *Applier) ApplyFile(ctx context.Context, path, defaultNamespace string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a.Apply(ctx, objs, defaultNamespace, false)
}

// Apply server-side applies objs in order. With dryRun the apiserver validates and admits
// them without storing anything.
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured, defaultNamespace string, dryRun bool) ([]*unstructured.Unstructured, error) {
	var applied []*unstructured.Unstructured
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		var mapping *meta.RESTMapping
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			var err error
			mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				// A CRD applied a moment ago that discovery does not serve yet.
				a.mapper.Reset()
				return false, nil
			}
			return err == nil, err
		})
		if err != nil {
			return applied, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var resource dynamic.ResourceInterface = a.dynamic.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(defaultNamespace)
			}
			resource = a.dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		out, err := resource.Apply(ctx, obj.GetName(), obj, opts)
		if err != nil {
			return applied, fmt.Errorf("applying %s %s: %w", gvk.Kind, qualifiedName(obj), err)
		}
		applied = append(applied, out)
	}
	return applied, nil
}

func qualifiedName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
