package networktopology

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// yieldLowerGangs is the topology gangs' side of gang precedence (Gang's PostFilter is the
// plain gangs'): when the gang cannot be planned, but could be if the members of
// lower-precedence gangs waiting in Permit gave their room back, those gangs yield: their
// waiting members in the domain the gang would get are rejected (Gang's Unreserve then ends
// their rounds and releases their reservations). Without it, a higher gang would wait out the
// lower gang's timeout: the planner sees the room as taken and no PostFilter rule applies to a
// PreFilter failure. simulate fills a request's capacities from a list of nodes. It returns
// the plan the gang gets in the room released, the request it was planned from, and the gangs
// that yielded; a nil plan when yielding cannot help.
func (p *NetworkTopologyAware) yieldLowerGangs(ctx context.Context, v *gangstate.View, nodes []fwk.NodeInfo, req placement.Request, simulate func([]fwk.NodeInfo, *placement.Request)) (*placement.Plan, placement.Request, []string) {
	key, mine := v.Key, v.Precedence
	byNode := map[string][]fwk.WaitingPod{}
	// Collected first, judged after: the walk holds the waiting pods' lock, which the
	// binding goroutines take while they hold the gangs' lock.
	var waiting []fwk.WaitingPod
	p.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) { waiting = append(waiting, wp) })
	for _, wp := range waiting {
		w := wp.GetPod()
		k, ok := podgroup.KeyOf(w)
		if !ok || k == key || w.Spec.NodeName == "" {
			continue
		}
		if mine.Before(podgroup.PrecedenceOf(w, k, p.registry.Info(k).PodGroup)) {
			byNode[w.Spec.NodeName] = append(byNode[w.Spec.NodeName], wp)
		}
	}
	if len(byNode) == 0 {
		return nil, req, nil
	}
	logger := klog.FromContext(ctx)
	// The cluster as it would be without them.
	trial := make([]fwk.NodeInfo, len(nodes))
	for i, ni := range nodes {
		trial[i] = ni
		if ni.Node() == nil || len(byNode[ni.Node().Name]) == 0 {
			continue
		}
		copied := ni.Snapshot()
		for _, wp := range byNode[ni.Node().Name] {
			if err := copied.RemovePod(logger, wp.GetPod()); err != nil {
				logger.V(4).Info("Could not simulate a waiting pod's departure", "pod", klog.KObj(wp.GetPod()), "err", err)
			}
		}
		trial[i] = copied
	}
	simulate(trial, &req)
	plan, err := placement.Make(req)
	if err != nil {
		return nil, req, nil
	}
	// Only the gangs waiting inside the domain the gang would get yield.
	var domain sets.Set[string]
	if plan.Domain == hypernode.VirtualRootName {
		domain = sets.KeySet(req.Nodes)
	} else {
		domain = sets.New(req.Tree.Nodes(plan.Domain)...)
	}
	yield := map[podgroup.Key][]fwk.WaitingPod{}
	for node, wps := range byNode {
		if !domain.Has(node) {
			continue
		}
		for _, wp := range wps {
			k, _ := podgroup.KeyOf(wp.GetPod())
			yield[k] = append(yield[k], wp)
		}
	}
	var names []string
	for k, wps := range yield {
		msg := fmt.Sprintf("gang %s rejected: it yields its reserved resources in %s to gang %s, which takes precedence", k, plan.Domain, key)
		for _, wp := range wps {
			wp.Reject(Name, msg)
		}
		if pg := p.registry.Info(k).PodGroup; pg != nil {
			p.events.Record(pg, v1.EventTypeWarning, "GangRejected", fmt.Sprintf("gang %s: yielded its room in %s to gang %s, which takes precedence (priority, then age)", k, plan.Domain, key))
		}
		names = append(names, k.String())
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, req, nil
	}
	return plan, req, names
}
