package inspect

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// now is the fixed time the test cluster is read at.
var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// gpuNode is a node with 8 GPUs, 32 CPUs, 128Gi memory and room for 110 pods.
func gpuNode(name string, modify ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{
				"nvidia.com/gpu":  resource.MustParse("8"),
				v1.ResourceCPU:    resource.MustParse("32"),
				v1.ResourceMemory: resource.MustParse("128Gi"),
				v1.ResourcePods:   resource.MustParse("110"),
			},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
	for _, m := range modify {
		m(n)
	}
	return n
}

// notReady is a node whose kubelet stopped reporting, with the taint the node lifecycle
// controller then puts on it.
func notReady(n *v1.Node) {
	n.Status.Conditions[0].Status = v1.ConditionFalse
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule})
}

func cordoned(n *v1.Node) { n.Spec.Unschedulable = true }

// member is a gang member requesting 4 GPUs, 8 CPUs and 32Gi, bound to node ("" pending).
func memberPod(namespace, name, group, node string, labels map[string]string) *v1.Pod {
	l := map[string]string{schedulingv1alpha1.PodGroupLabel: group}
	for k, v := range labels {
		l[k] = v
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: l},
		Spec: v1.PodSpec{
			NodeName:      node,
			SchedulerName: "hypernode-scheduler",
			Containers: []v1.Container{{Name: "trainer", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{
					"nvidia.com/gpu":  resource.MustParse("4"),
					v1.ResourceCPU:    resource.MustParse("8"),
					v1.ResourceMemory: resource.MustParse("32Gi"),
				},
				Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")},
			}}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	if node != "" {
		p.Status.Phase = v1.PodRunning
	}
	return p
}

// unschedulable gives a pending pod the scheduler's PodScheduled=False condition.
func unschedulable(p *v1.Pod, message string) *v1.Pod {
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse,
		Reason: v1.PodReasonUnschedulable, Message: message}}
	return p
}

func podGroup(namespace, name string, minMember int32, annotations map[string]string) *schedulingv1alpha1.PodGroup {
	return &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember},
		Status:     schedulingv1alpha1.PodGroupStatus{Phase: schedulingv1alpha1.PodGroupPending},
	}
}

func event(namespace, name, kind, object, eventType, reason, message string, ago time.Duration, count int32) *v1.Event {
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: namespace, Name: name},
		InvolvedObject: v1.ObjectReference{Kind: kind, Namespace: namespace, Name: object},
		Type:           eventType, Reason: reason, Message: message, Count: count,
		LastTimestamp: metav1.NewTime(now.Add(-ago)),
	}
}

// The test cluster: the seed 001 tree (leaves s0..s3 of two 8-GPU nodes, spines s4 = s0+s1
// and s5 = s2+s3, core s6), plus an invalid leaf "bad" listed by s5 (its regular expression
// does not compile) that selects the node bad-n0, and a node loose-0 in no HyperNode.
//
// GPU use (4 GPUs per member): team-a/trained holds s0-n0 (2 pods), s0-n1 (1) and s1-n0 (1);
// s3-n0 is cordoned and loose-0 is not ready. Free GPUs per leaf: s0 4, s1 12, s2 16, s3 8.
const mergedMessage = "hard topology (tier<=1): no HyperNode can host 5 pods; tier 1: s2 4/5, s1 3/5 (+2 more)"

func testObjects() (kube, topology, scheduling []runtime.Object) {
	kube = []runtime.Object{
		gpuNode("s0-n0"), gpuNode("s0-n1"), gpuNode("s1-n0"), gpuNode("s1-n1"),
		gpuNode("s2-n0"), gpuNode("s2-n1"), gpuNode("s3-n0", cordoned), gpuNode("s3-n1"),
		gpuNode("bad-n0"), gpuNode("loose-0", notReady),

		memberPod("team-a", "trained-0", "trained", "s0-n0", nil),
		memberPod("team-a", "trained-1", "trained", "s0-n0", nil),
		memberPod("team-a", "trained-2", "trained", "s0-n1", nil),
		memberPod("team-a", "trained-3", "trained", "s1-n0", nil),
	}
	for i := range 5 {
		kube = append(kube, unschedulable(
			memberPod("team-a", "big-"+string(rune('0'+i)), "big", "", map[string]string{podgroup.RankAnnotation: string(rune('0' + i))}),
			mergedMessage))
	}
	kube = append(kube,
		event("team-a", "big.1", "PodGroup", "big", v1.EventTypeWarning, "TopologyUnsatisfiable", mergedMessage, 2*time.Minute, 7),
		event("team-a", "big.2", "PodGroup", "big", v1.EventTypeNormal, "GangWaiting", "waiting for 5 members", 10*time.Minute, 1),
		event("team-a", "big-0.1", "Pod", "big-0", v1.EventTypeWarning, "FailedScheduling", mergedMessage, 90*time.Second, 3),
		event("team-a", "other.1", "PodGroup", "other", v1.EventTypeNormal, "Ignored", "an event of another group", time.Minute, 1),
		// A bound member's Scheduled Event: explain leaves it out (the placement shows it).
		event("team-a", "trained-0.1", "Pod", "trained-0", v1.EventTypeNormal, "Scheduled", "Successfully assigned team-a/trained-0 to s0-n0", time.Minute, 1),
	)
	// Sub-groups: 2 sub-groups of 3 members, each inside one leaf, the job inside one spine.
	for i := range 6 {
		kube = append(kube, memberPod("team-b", "tp-"+string(rune('0'+i)), "tp", "",
			map[string]string{"partition": string(rune('0' + i/3))}))
	}
	// An MPI job: a 1-CPU launcher and two 8-GPU workers, members of two shapes.
	launcher := memberPod("team-c", "mpi-launcher", "mpi", "", nil)
	launcher.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
	kube = append(kube, launcher)
	for i := range 2 {
		w := memberPod("team-c", "mpi-worker-"+string(rune('0'+i)), "mpi", "", map[string]string{podgroup.RankAnnotation: string(rune('0' + i))})
		w.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("8")
		kube = append(kube, w)
	}
	topology = []runtime.Object{
		// hypernode-controller wrote the status of s0.
		withStatus(hntesting.MakeHyperNode("s0").Tier(1).TierName("leaf").Nodes("s0-n0", "s0-n1").Obj(), 2, metav1.ConditionTrue, "Valid"),
		hntesting.MakeHyperNode("s1").Tier(1).TierName("leaf").Nodes("s1-n0", "s1-n1").Obj(),
		hntesting.MakeHyperNode("s2").Tier(1).TierName("leaf").Nodes("s2-n0", "s2-n1").Label(source.Label, "ufm").Obj(),
		hntesting.MakeHyperNode("s3").Tier(1).TierName("leaf").Nodes("s3-n0", "s3-n1").Label(source.Label, "ufm").Obj(),
		hntesting.MakeHyperNode("bad").Tier(1).TierName("leaf").Nodes("bad-n0").NodeRegex("([").Obj(),
		hntesting.MakeHyperNode("s4").Tier(2).TierName("spine").Children("s0", "s1").Obj(),
		hntesting.MakeHyperNode("s5").Tier(2).TierName("spine").Children("s2", "s3", "bad").Label(source.Label, "ufm").Obj(),
		hntesting.MakeHyperNode("s6").Tier(3).TierName("core").Children("s4", "s5").Obj(),
	}
	scheduling = []runtime.Object{
		podGroup("team-a", "trained", 4, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`}),
		podGroup("team-a", "big", 5, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}),
		podGroup("team-a", "broken", 2, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard"}`}),
		podGroup("team-c", "mpi", 3, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}),
		podGroup("team-b", "tp", 6, map[string]string{
			podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierName":"spine"}`,
			podgroup.SubGroupPolicyAnnotation:  `[{"name":"tp","subGroupSize":3,"minSubGroups":2,"matchLabelKeys":["partition"],"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`,
		}),
	}
	return kube, topology, scheduling
}

// withStatus gives a HyperNode the status hypernode-controller writes.
func withStatus(hn *topologyv1alpha1.HyperNode, nodeCount int64, valid metav1.ConditionStatus, reason string) *topologyv1alpha1.HyperNode {
	hn.Status.NodeCount = nodeCount
	hn.Status.Conditions = []metav1.Condition{{Type: "Valid", Status: valid, Reason: reason, Message: "m", LastTransitionTime: metav1.NewTime(now)}}
	return hn
}

// testClients returns fake clientsets holding the test cluster.
func testClients() Clients {
	kube, topology, scheduling := testObjects()
	return Clients{
		Kube:       kubefake.NewClientset(kube...),
		Topology:   topologyfake.NewSimpleClientset(topology...),
		Scheduling: schedfake.NewSimpleClientset(scheduling...),
	}
}

// loadTestCluster loads the test cluster through the fake clients, read at the fixed time.
func loadTestCluster(t *testing.T) *Cluster {
	t.Helper()
	c, err := Load(context.Background(), testClients())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	c.Now = now
	return c
}

// loadObjects loads a cluster of the given objects through fake clients, read at the fixed
// time.
func loadObjects(t *testing.T, kube, topology, scheduling []runtime.Object) *Cluster {
	t.Helper()
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...),
		Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: schedfake.NewSimpleClientset(scheduling...)})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	c.Now = now
	return c
}
