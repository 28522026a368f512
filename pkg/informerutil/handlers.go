// Package informerutil adapts typed callbacks to client-go informer event handlers.
package informerutil

import "k8s.io/client-go/tools/cache"

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
