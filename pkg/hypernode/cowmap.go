package hypernode

import (
	"hash/maphash"
	"reflect"
)

// cowShards is the number of shards of a cowMap. A write copies only the shards it touches, so
// publishing a change to a few keys of a 10,000-key map copies a few dozen entries, not all;
// the price is copying the shard table (2 kB) once per published change.
const cowShards = 256

var cowSeed = maphash.MakeSeed()

// cowMap is a persistent (copy-on-write) string-keyed map: a value is never modified once
// published, so readers share it without locks; writers derive a new map that shares every
// untouched shard with the old one.
type cowMap[V any] struct {
	shards *[cowShards]map[string]V
	size   int
}

func newCowMap[V any]() cowMap[V] {
	return cowMap[V]{shards: &[cowShards]map[string]V{}}
}

func shardOf(key string) int {
	return int(maphash.String(cowSeed, key) % cowShards)
}

// Get returns the value stored for key.
func (m cowMap[V]) Get(key string) (V, bool) {
	v, ok := m.shards[shardOf(key)][key]
	return v, ok
}

// Len returns the number of keys.
func (m cowMap[V]) Len() int { return m.size }

// Range calls f for every key and value until f returns false; the order is unspecified.
func (m cowMap[V]) Range(f func(key string, value V) bool) {
	for _, shard := range m.shards {
		for k, v := range shard {
			if !f(k, v) {
				return
			}
		}
	}
}

// cowWriter batches changes to a cowMap and produces a new map; the original is unchanged.
type cowWriter[V any] struct {
	base   cowMap[V]
	shards [cowShards]map[string]V
	copied [cowShards]bool
	size   int
}

func (m cowMap[V]) writer() *cowWriter[V] {
	w := &cowWriter[V]{base: m, size: m.size}
	w.shards = *m.shards
	return w
}

func (w *cowWriter[V]) own(i int) map[string]V {
	if !w.copied[i] {
		old := w.shards[i]
		fresh := make(map[string]V, len(old)+1)
		for k, v := range old {
			fresh[k] = v
		}
		w.shards[i] = fresh
		w.copied[i] = true
	}
	return w.shards[i]
}

// Set stores value for key.
func (w *cowWriter[V]) Set(key string, value V) {
	shard := w.own(shardOf(key))
	if _, exists := shard[key]; !exists {
		w.size++
	}
	shard[key] = value
}

// Delete removes key.
func (w *cowWriter[V]) Delete(key string) {
	i := shardOf(key)
	if _, exists := w.shards[i][key]; !exists {
		return
	}
	delete(w.own(i), key)
	w.size--
}

// Get reads through the pending changes.
func (w *cowWriter[V]) Get(key string) (V, bool) {
	v, ok := w.shards[shardOf(key)][key]
	return v, ok
}

// Map publishes the changes as a new map. The writer must not be used afterwards.
func (w *cowWriter[V]) Map() cowMap[V] {
	for i, copied := range w.copied {
		if !copied {
			continue
		}
		if len(w.shards[i]) == 0 {
			w.shards[i] = nil
		}
	}
	shards := w.shards
	return cowMap[V]{shards: &shards, size: w.size}
}

// sameShard reports whether two shards are the same map: a writer replaces every shard it
// touches with a copy, so an untouched shard is shared by identity between maps.
func sameShard[V any](a, b map[string]V) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
