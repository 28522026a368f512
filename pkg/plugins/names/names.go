// Package names names this project's scheduler plugins: the plugin packages register under
// these names, and the composition check (package composition) finds them in a profile.
package names

const (
	Gang                 = "Gang"
	GangQueueSort        = "GangQueueSort"
	GangRetryGate        = "GangRetryGate"
	GangPreemption       = "GangPreemption"
	NetworkTopologyAware = "NetworkTopologyAware"
	// DefaultPreemption is kube-scheduler's per-pod preemption, which GangPreemption replaces.
	DefaultPreemption = "DefaultPreemption"
)
