// Package shared keeps one instance of a process-wide component per scheduler.
//
// kube-scheduler builds one framework per profile, and each plugin of each profile gets its
// own New call, but all of them share the scheduler's informer factory. Components that
// must exist once per scheduler (the HyperNode tree, the PodGroup registry) are keyed by that
// factory and released when the scheduler's context ends, so schedulers started one after
// another in one process (tests) never share state.
package shared

import (
	"context"
	"sync"

	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

type key struct {
	kind  string
	owner any
}

var (
	mu        sync.Mutex
	instances = map[key]any{}
)

// Get returns the instance of kind owned by owner, creating it with create on first use.
// The instance is forgotten when ctx (the context of the first caller) ends.
func Get[T any](ctx context.Context, kind string, owner any, create func() (T, error)) (T, error) {
	mu.Lock()
	defer mu.Unlock()
	k := key{kind: kind, owner: owner}
	if v, ok := instances[k]; ok {
		return v.(T), nil
	}
	v, err := create()
	if err != nil {
		var zero T
		return zero, err
	}
	instances[k] = v
	go func() {
		<-ctx.Done()
		mu.Lock()
		delete(instances, k)
		mu.Unlock()
	}()
	return v, nil
}

// Tombstoned returns the object of an informer delete notification, unwrapping the final
// state of an object deleted while the watch was down.
func Tombstoned[T any](obj any) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		t, ok := d.Obj.(T)
		return t, ok
	}
	var zero T
	return zero, false
}

// Handlers returns informer event handlers for objects of type T: set receives adds and
// updates (old is the zero value for an add), del receives deletes, tombstones unwrapped.
func Handlers[T any](set func(old, obj T), del func(obj T)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if t, ok := obj.(T); ok {
				var zero T
				set(zero, t)
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			old, _ := oldObj.(T)
			if t, ok := obj.(T); ok {
				set(old, t)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := Tombstoned[T](obj); ok {
				del(t)
			}
		},
	}
}

// JSONConfig returns a copy of config for clients of custom resources, which the apiserver
// serves as JSON only.
func JSONConfig(config *restclient.Config) *restclient.Config {
	jsonConfig := restclient.CopyConfig(config)
	jsonConfig.ContentType = "application/json"
	jsonConfig.AcceptContentTypes = "application/json"
	return jsonConfig
}
