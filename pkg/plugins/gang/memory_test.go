package gang

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// TestStateIsBoundedByLiveGangs: 1,000 gangs are created, scheduled (half bind, half are
// rejected) and deleted; nothing the plugin or the registry keeps per pod or per gang is left.
func TestStateIsBoundedByLiveGangs(t *testing.T) {
	e := newEnv(t, 60)
	for i := range 1000 {
		group := fmt.Sprintf("g-%d", i)
		e.podGroup(group, 2, nil)
		a, b := member(group+"-a", group), member(group+"-b", group)
		e.registry.SetPod(nil, a)
		e.registry.SetPod(nil, b)
		if s := e.reserveAndPermit(t, a); s.Code() != fwk.Wait {
			t.Fatalf("Permit(%s) = %v", a.Name, s)
		}
		if i%2 == 0 {
			if s := e.reserveAndPermit(t, b); !s.IsSuccess() {
				t.Fatalf("Permit(%s) = %v", b.Name, s)
			}
			if s := e.fw.WaitOnPermit(e.ctx, a); !s.IsSuccess() {
				t.Fatalf("%s: %v", a.Name, s)
			}
			done := make(chan *fwk.Status)
			go func() { done <- e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), a, "node-1") }()
			if s := e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), b, "node-1"); !s.IsSuccess() {
				t.Fatal(s)
			}
			if s := <-done; !s.IsSuccess() {
				t.Fatal(s)
			}
			for _, p := range []*v1.Pod{a, b} {
				e.fw.RunPostBindPlugins(e.ctx, framework.NewCycleState(), p, "node-1")
				bound := p.DeepCopy()
				bound.Spec.NodeName = "node-1"
				e.registry.SetPod(p, bound)
			}
		} else {
			// b fails after Reserve: the round is rejected, a is released.
			if s := e.fw.RunReservePluginsReserve(e.ctx, framework.NewCycleState(), b, "node-1"); !s.IsSuccess() {
				t.Fatal(s)
			}
			e.unreserve(b)
			if s := e.fw.WaitOnPermit(e.ctx, a); s.IsSuccess() {
				t.Fatalf("%s allowed after its round was rejected", a.Name)
			}
			e.unreserve(a)
		}
		e.registry.DeletePod(a)
		e.registry.DeletePod(b)
		e.registry.DeletePodGroup(ns, group)
		drain(e.recorder.Events) // the fake recorder blocks when its channel is full
	}
	if batches, memberRounds, rounds, _ := e.gangs.RoundsLeft(); rounds+memberRounds+batches != 0 {
		t.Errorf("left: %d rounds, %d member rounds, %d batches", rounds, memberRounds, batches)
	}
	if n := e.plugin.events.Len(); n != 0 {
		t.Errorf("the Event log remembers %d deleted gangs", n)
	}
	if n := e.registry.Len(); n != 0 {
		t.Errorf("the registry keeps %d deleted gangs", n)
	}
}
