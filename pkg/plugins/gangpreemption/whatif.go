package gangpreemption

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// WholeCluster is the Domain of a WhatIf whose gang may use the whole cluster.
const WholeCluster = wholeCluster

// WhatIf is what the plugin would do for a gang whose member failed a cycle, decided by the
// code PostFilter runs (decide), with nothing evicted or nominated: kubectl hypernode plan
// runs it on a copy of the cluster.
type WhatIf struct {
	// Domain is the chosen domain (WholeCluster, or a HyperNode of Tier); "" when preemption
	// cannot help, and then Refusal says why in the members' words.
	Domain  string
	Tier    int
	Victims []Victim
	// Assign is the node of each needed member, by pod name.
	Assign map[string]string
	// NotChosen are the other domains' costs, and those too small even with every pod of
	// lower priority evicted.
	NotChosen []string
	Refusal   string
}

// Victim is one pod the choice evicts.
type Victim struct {
	Pod  *v1.Pod
	Node string
	// Gang is the victim's PodGroup (namespace/name; "" for a pod in none): a gang is
	// evicted whole. PDBViolated is true when a PodDisruptionBudget does not allow its
	// eviction (the choice is the one with the fewest such victims).
	Gang        string
	Priority    int32
	PDBViolated bool
}

// WhatIf decides preemption for pod's gang as PostFilter would after pod failed its cycle in
// state (after PreFilter).
func (pl *GangPreemption) WhatIf(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (WhatIf, error) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return WhatIf{}, fmt.Errorf("pod %s/%s is not in a PodGroup", pod.Namespace, pod.Name)
	}
	d, status := pl.decide(ctx, state, pod, key)
	if status != nil {
		return WhatIf{Refusal: status.Message()}, nil
	}
	if d.best == nil {
		return WhatIf{Refusal: d.refusal}, nil
	}
	out := WhatIf{Domain: d.best.domain.name, Tier: d.best.domain.tier, Assign: d.best.assign, NotChosen: d.notChosen}
	violating := d.sim.violating(d.best.victims)
	for _, u := range d.best.victims {
		gang := ""
		if k, ok := strings.CutPrefix(u.key, "gang "); ok {
			gang = k
		}
		for _, p := range u.pods {
			out.Victims = append(out.Victims, Victim{Pod: p.pod, Node: p.node, Gang: gang,
				Priority: corev1helpers.PodPriority(p.pod), PDBViolated: violating.Has(u.key)})
		}
	}
	sort.Slice(out.Victims, func(i, j int) bool {
		a, b := out.Victims[i].Pod, out.Victims[j].Pod
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return out, nil
}

// WaitForSync waits until the HyperNode tree and the PodGroup registry the plugin decides
// from have read their informers (kube-scheduler waits for its own before scheduling).
func (pl *GangPreemption) WaitForSync(ctx context.Context) error {
	if err := pl.cache.WaitForSync(ctx); err != nil {
		return err
	}
	return pl.registry.WaitForSync(ctx)
}
