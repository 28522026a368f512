package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	schedulerconfig "github.com/hypernode-dev/hypernode-scheduler/manifests/scheduler"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/simulate"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// PlanCase is one job kubectl hypernode plan answered for.
type PlanCase struct {
	Name       string  `json:"name"`
	Pods       int     `json:"pods"`
	Placed     bool    `json:"placed"`
	Domain     string  `json:"domain,omitempty"`
	Leaves     int     `json:"leaves,omitempty"`
	MinLeaves  int     `json:"minLeaves,omitempty"`
	PlanSecond float64 `json:"planSeconds"`
	// PlanAllocMiB is what the plan allocated (Go's total allocations during it).
	PlanAllocMiB float64 `json:"planAllocMiB"`
	// PreemptionSeconds is GangPreemption's decision on a copy of the cluster (0: not asked).
	PreemptionSeconds float64 `json:"preemptionSeconds,omitempty"`
	Victims           int     `json:"victims,omitempty"`
}

// PlanResult is TestPlanCommand: kubectl hypernode plan's read of the cluster and its plans.
type PlanResult struct {
	Topology Topology `json:"topology"`
	// Running counts the pods bound before the plans (one 8-GPU pod on every other node).
	Running     int        `json:"running"`
	ReadSeconds float64    `json:"readSeconds"`
	ReadHeapMiB float64    `json:"readHeapMiB"`
	Cases       []PlanCase `json:"cases"`
}

// TestPlanCommand times what kubectl hypernode plan does, read and planning apart (in
// process, with the command's own reads and calls), on 10,000 nodes of which every other one
// runs a pod of 8 GPUs: a job of 5,000 8-GPU pods (soft) placed across the cluster's 5,000
// free nodes; and a job of 1,000 that must fit in a spine of 1,600 nodes (800 free), so it
// waits for 200 pods to finish, and at a higher priority GangPreemption, on a copy of the
// cluster, picks the 200 it would evict.
func TestPlanCommand(t *testing.T) {
	tp := Topology{Name: "plan", Nodes: 400, LeafSize: 20, LeavesPerSpine: 4}
	if full() {
		tp = Topology{Name: "plan", Nodes: 10000, LeafSize: 100, LeavesPerSpine: 16}
	}
	// Every other node is free: the soft job takes them all; the hard one a quarter more
	// than a spine has free.
	jobPods, spineFree := tp.Nodes/2, tp.LeafSize*tp.LeavesPerSpine/2
	spineJob := spineFree + spineFree/4
	c := newClients(t)
	tp.create(t, c)
	ctx := context.Background()
	ns, err := util.CreateNamespace(ctx, c.kube, "plan")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := deletePods(context.Background(), c, ns); err != nil {
			t.Errorf("deleting pods: %v", err)
		}
	})
	running := tp.Nodes / 2
	err = parallel(running, func(i int) error {
		p := gpuPod(ns, fmt.Sprintf("running-%05d", i), plugins.SchedulerName, nodeGPUs, "")
		p.Spec.NodeName = tp.nodeName(2 * i)
		_, err := c.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	res := &PlanResult{Topology: tp, Running: running}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	cluster, err := inspect.LoadWith(ctx, inspect.Clients{Kube: c.kube, Topology: c.topology, Scheduling: c.scheduling},
		inspect.LoadOptions{SkipEvents: true, PriorityClasses: true, PodDisruptionBudgets: true})
	if err != nil {
		t.Fatal(err)
	}
	res.ReadSeconds = time.Since(start).Seconds()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	res.ReadHeapMiB = float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc)) / (1 << 20)

	prof, err := simulate.Profile(schedulerconfig.Config, plugins.SchedulerName)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		pods       int
		constraint string
		preempt    bool
	}{
		{name: "soft, fits across the cluster", pods: jobPods, constraint: `{"mode":"soft","highestTierAllowed":1}`},
		{name: "hard in a spine, waits; preemption at a higher priority", pods: spineJob, constraint: `{"mode":"hard","highestTierAllowed":2}`, preempt: true},
	} {
		job := planJob(ns, tc.pods, tc.constraint)
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		var priority *int32
		if tc.preempt {
			priority = ptr.To[int32](1000)
		}
		report, err := cluster.Plan(job, inspect.PlanOptions{Priority: priority, SchedulerName: plugins.SchedulerName})
		if err != nil {
			t.Fatal(err)
		}
		pc := PlanCase{Name: tc.name, Pods: tc.pods, Placed: report.Placed, PlanSecond: time.Since(start).Seconds()}
		runtime.ReadMemStats(&m1)
		pc.PlanAllocMiB = float64(m1.TotalAlloc-m0.TotalAlloc) / (1 << 20)
		if report.Placement != nil {
			pc.Domain, pc.Leaves, pc.MinLeaves = report.Placement.Domain, report.Placement.Leaves, report.Placement.MinLeaves
		}
		if tc.preempt {
			if report.Placed {
				t.Fatalf("%s: placed in %s; the scenario wants it to wait", tc.name, pc.Domain)
			}
			admitted, _, err := cluster.Admit(job, priority)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			w, err := simulate.Preemption(ctx, cluster, admitted, prof)
			if err != nil {
				t.Fatal(err)
			}
			pc.PreemptionSeconds, pc.Victims = time.Since(start).Seconds(), len(w.Victims)
			if w.Domain == "" {
				t.Errorf("%s: preemption would not help: %s", tc.name, w.Refusal)
			}
			// The fewest pods: as many as the job lacks in the chosen spine.
			if want := spineJob - spineFree; len(w.Victims) != want {
				t.Errorf("%s: %d victims, want %d", tc.name, len(w.Victims), want)
			}
			if report.WaitsFor == nil || len(report.WaitsFor.Occupants) != spineJob-spineFree {
				t.Errorf("%s: waits for %+v, want %d pods", tc.name, report.WaitsFor, spineJob-spineFree)
			}
		} else if !report.Placed {
			t.Fatalf("%s: not placed: %s", tc.name, report.Search.Verdict)
		}
		t.Logf("plan %s: %d pods on %d nodes (%d running): placed %v %s (%d leaves, fewest %d) in %.3fs, %.0f MiB allocated; preemption %.2fs, %d victims; the read took %.2fs",
			tc.name, tc.pods, tp.Nodes, running, pc.Placed, pc.Domain, pc.Leaves, pc.MinLeaves, pc.PlanSecond, pc.PlanAllocMiB, pc.PreemptionSeconds, pc.Victims, res.ReadSeconds)
		res.Cases = append(res.Cases, pc)
	}
	results.Plan = res
}

// planJob is a PodGroup of n 8-GPU members with a constraint, as plan derives it.
func planJob(ns string, n int, constraint string) *jobspec.Job {
	pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big",
		Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: constraint}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: int32(n)}}
	job := &jobspec.Job{Kind: "PodGroup", Namespace: ns, Name: "big", PodGroup: pg, PodGroupFrom: jobspec.FromFile}
	for i := range n {
		p := gpuPod(ns, fmt.Sprintf("big-%05d", i), plugins.SchedulerName, nodeGPUs, "big")
		p.UID = types.UID("plan-" + p.Name)
		p.Annotations = map[string]string{podgroup.RankAnnotation: fmt.Sprint(i)}
		job.Members = append(job.Members, p)
	}
	return job
}

// planSummary writes TestPlanCommand's table.
func planSummary(b *strings.Builder, r *PlanResult) {
	if r == nil {
		return
	}
	fmt.Fprintf(b, "## kubectl hypernode plan: %d nodes, %d running 8-GPU pods; the read %.2f s (%.0f MiB heap)\n\n", r.Topology.Nodes, r.Running, r.ReadSeconds, r.ReadHeapMiB)
	b.WriteString("| job | pods | placed | domain (leaves / fewest) | plan s | plan alloc MiB | preemption s (victims) |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range r.Cases {
		where, preempt := "-", "-"
		if c.Placed {
			where = fmt.Sprintf("%s (%d / %d)", c.Domain, c.Leaves, c.MinLeaves)
		}
		if c.PreemptionSeconds > 0 {
			preempt = fmt.Sprintf("%.2f (%d)", c.PreemptionSeconds, c.Victims)
		}
		fmt.Fprintf(b, "| %s | %d | %v | %s | %.3f | %.0f | %s |\n", c.Name, c.Pods, c.Placed, where, c.PlanSecond, c.PlanAllocMiB, preempt)
	}
	b.WriteString("\n")
}
