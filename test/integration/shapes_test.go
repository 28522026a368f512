package integration

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// shapedMember is one member of a gang whose members differ in shape.
type shapedMember struct {
	name     string
	requests v1.ResourceList
}

// shapedGang creates a PodGroup of minMember len(members) with the topology annotation and
// its members, each with its own requests.
func (e *topoEnv) shapedGang(name, annotation string, members ...shapedMember) []string {
	e.t.Helper()
	ctx := context.Background()
	pg := util.PodGroup(e.ns, name, int32(len(members)), map[string]string{podgroup.NetworkTopologyAnnotation: annotation})
	if err := util.CreatePodGroup(ctx, e.c.scheduling, pg); err != nil {
		e.t.Fatal(err)
	}
	var pods []*v1.Pod
	for _, m := range members {
		p := util.Pod(e.ns, m.name, plugins.SchedulerName, "", map[string]string{util.PodGroupLabel: name})
		p.Spec.Containers[0].Resources.Requests = m.requests
		p.Spec.Containers[0].Resources.Limits = m.requests
		pods = append(pods, p)
	}
	names, err := util.CreatePods(ctx, e.c.kube, pods...)
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

// usedBy binds a pod that uses requests directly to a node, without a scheduler.
func (e *topoEnv) usedBy(node string, requests v1.ResourceList) {
	e.t.Helper()
	e.boundPod("filler-"+node, node, requests, nil)
}

// boundPod creates a pod named name, bound to node without a scheduler, that requests (and is
// limited to) requests; edit, when set, changes the pod before it is created.
func (e *topoEnv) boundPod(name, node string, requests v1.ResourceList, edit func(*v1.Pod)) {
	e.t.Helper()
	pod := util.Pod(e.ns, name, "no-scheduler", "", nil)
	pod.Spec.Containers[0].Resources.Requests = requests
	pod.Spec.Containers[0].Resources.Limits = requests
	pod.Spec.NodeName = node
	if edit != nil {
		edit(pod)
	}
	if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
		e.t.Fatal(err)
	}
}

func cpuGPU(cpu, gpu string) v1.ResourceList {
	return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), "nvidia.com/gpu": resource.MustParse(gpu)}
}

// An MPI job: one 1-CPU launcher and two 8-GPU workers, hard at tier 1. Leaf s0 has free
// CPUs but no free GPU, s1..s3 are empty. Planned with one member's shape, the gang either
// took s0 (the launcher's view: the fullest leaf with room for three 1-CPU pods) and the
// workers never fitted, or found "s1 2/3" (a worker's view). Planned with both shapes, it
// lands in s1: a worker on each node, the launcher next to the first.
func TestMixedShapesMPILauncherAndWorkers(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"),
		v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}, seedHyperNodes(t)...)
	e.usedBy("node-0", cpuGPU("1", "8"))
	e.usedBy("node-1", cpuGPU("1", "8"))
	startScheduler(t, nil)
	names := e.shapedGang("mpi", `{"mode":"hard","highestTierAllowed":1}`,
		shapedMember{"mpi-launcher", cpuGPU("1", "0")},
		shapedMember{"mpi-worker-0", cpuGPU("4", "8")},
		shapedMember{"mpi-worker-1", cpuGPU("4", "8")})
	got := e.waitBound(names)
	want := map[string]string{"mpi-launcher": "node-2", "mpi-worker-0": "node-2", "mpi-worker-1": "node-3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want,+got):\n%s", diff)
	}
}

// Volcano's heterogeneous gang: a 2-CPU and a 4-CPU pod, hard at tier 1. s1 is partly used
// (node-2 has 2 CPUs free, node-3 4): the two fit there only together, on those nodes, and
// BinPack prefers that fuller leaf to the empty ones.
func TestMixedShapesHeterogeneousBinPack(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), nil, seedHyperNodes(t)...)
	e.filler("node-2", "6")
	e.filler("node-3", "4")
	startScheduler(t, nil)
	names := e.shapedGang("hetero", `{"mode":"hard","highestTierAllowed":1}`,
		shapedMember{"small", cpu("2")}, shapedMember{"large", cpu("4")})
	got := e.waitBound(names)
	want := map[string]string{"small": "node-2", "large": "node-3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want,+got):\n%s", diff)
	}
}

// Workers that take a whole node leave no room for the launcher in their leaf: tier 1 cannot
// hold the job, and the explanation counts its real members and shapes. Nothing binds.
func TestMixedShapesExplanation(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"),
		v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}, seedHyperNodes(t)...)
	startScheduler(t, nil)
	names := e.shapedGang("mpi", `{"mode":"hard","highestTierAllowed":1}`,
		shapedMember{"mpi-launcher", cpuGPU("1", "0")},
		shapedMember{"mpi-worker-0", cpuGPU("8", "8")},
		shapedMember{"mpi-worker-1", cpuGPU("8", "8")})
	e.waitCondition(names[0], v1.PodReasonUnschedulable,
		"hard topology (tier<=1): no HyperNode can host 3 pods (2 x cpu=8,nvidia.com/gpu=8, 1 x cpu=1); tier 1: s0 2/3, s1 2/3 (+2 more)")
	e.expectNoneBound()
}

// An elastic gang: minMember 2 of 3 one-CPU pods, hard at tier 1. In leaves of two 1-CPU
// nodes, two members run in one leaf and the third waits, saying why; where a leaf has room
// for all three (2-CPU nodes), all three run in one leaf.
func TestElasticGang(t *testing.T) {
	leafOf := map[string]string{"node-0": "s0", "node-1": "s0", "node-2": "s1", "node-3": "s1", "node-4": "s2", "node-5": "s2", "node-6": "s3", "node-7": "s3"}
	nodes := []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"}
	t.Run("two of three fit a leaf", func(t *testing.T) {
		e := newTopoEnv(t, nodesWithCPU("1", nodes...), nil, seedHyperNodes(t)...)
		startScheduler(t, nil)
		names := e.elasticGang("train", 2, 3)
		got := e.waitBound(names[:2])
		if leafOf[got["train-0"]] != leafOf[got["train-1"]] {
			t.Errorf("the two members are not in one leaf: %v", got)
		}
		leaf := leafOf[got["train-0"]]
		e.waitCondition("train-2", v1.PodReasonUnschedulable,
			"hard topology (tier<=1): no HyperNode can host 1 pods together with the 2 placed members (in "+leaf+"); tier 1: "+leaf+" 0/1")
		if bound := e.bound(); len(bound) != 2 {
			t.Errorf("bound %v, want exactly train-0 and train-1", bound)
		}
	})
	t.Run("room for all three", func(t *testing.T) {
		e := newTopoEnv(t, nodesWithCPU("2", nodes...), nil, seedHyperNodes(t)...)
		startScheduler(t, nil)
		got := e.waitBound(e.elasticGang("train", 2, 3))
		leaves := map[string]bool{}
		for _, n := range got {
			leaves[leafOf[n]] = true
		}
		if len(got) != 3 || len(leaves) != 1 {
			t.Errorf("placements %v: want all three in one leaf", got)
		}
	})
}

// elasticGang creates a PodGroup of minMember hard at tier 1 and size one-CPU members.
func (e *topoEnv) elasticGang(name string, minMember, size int) []string {
	e.t.Helper()
	pg := util.PodGroup(e.ns, name, int32(minMember), map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`})
	if err := util.CreatePodGroup(context.Background(), e.c.scheduling, pg); err != nil {
		e.t.Fatal(err)
	}
	names, err := util.CreatePods(context.Background(), e.c.kube, util.GangPods(e.ns, name, plugins.SchedulerName, "1", size)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

// Two gangs of different shapes on one 8-GPU node: four 1-GPU pods and one 4-GPU pod, both
// hard at tier 1, pending before the scheduler starts. The plan made first holds its GPUs as
// nominations in real requests, so the other gang plans onto the same node next to it: both
// bind there, 8 GPUs in all, and neither gang is ever refused or rejected on the way (with
// promises counted in slots of the first gang's shape, the node looked full to the second).
func TestGangsOfTwoShapesShareANode(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", "node-0"), v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
		hntesting.MakeHyperNode("leaf").Tier(1).Nodes("node-0").Obj())
	gpus := func(n string) v1.ResourceList { return v1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)} }
	small := e.shapedGang("small", `{"mode":"hard","highestTierAllowed":1}`,
		shapedMember{"small-0", gpus("1")}, shapedMember{"small-1", gpus("1")}, shapedMember{"small-2", gpus("1")}, shapedMember{"small-3", gpus("1")})
	big := e.shapedGang("big", `{"mode":"hard","highestTierAllowed":1}`, shapedMember{"big-0", gpus("4")})
	startScheduler(t, nil)
	got := e.waitBound(append(small, big...))
	if nodes := nodeSet(got); !cmp.Equal(nodes, []string{"node-0"}) {
		t.Errorf("placements %v: want every pod on node-0", got)
	}
	events, err := e.c.kube.EventsV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Reason == "TopologyUnsatisfiable" || ev.Reason == "GangRejected" {
			t.Errorf("%s %s: %s: %s", ev.Regarding.Kind, ev.Regarding.Name, ev.Reason, ev.Note)
		}
	}
}
