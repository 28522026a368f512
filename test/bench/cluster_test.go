package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// GPU is the extended resource of every benchmark node and pod.
const GPU v1.ResourceName = "nvidia.com/gpu"

// Node shape: 8 GPUs, 64 CPUs, 512 GiB. A pod of g GPUs asks for 7g CPUs and 60g GiB, so GPUs
// are always the binding resource (and a 10m readiness probe never takes a GPU slot).
const (
	nodeGPUs   = 8
	cpuPerGPU  = 7
	memPerGPU  = 60 // GiB
	workers    = 16 // parallel API writers when creating objects
	gpuPerNode = nodeGPUs
)

type clients struct {
	kube       clientset.Interface
	topology   topologyclient.Interface
	scheduling schedclientset.Interface
}

func newClients(t testing.TB) clients {
	t.Helper()
	c, err := util.NewClients(controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	return clients{kube: c.Kube, topology: c.Topology, scheduling: c.Scheduling}
}

// Topology is a 3-tier tree: leaves (tier 1) of LeafSize nodes, spines (tier 2) of
// LeavesPerSpine leaves, one core (tier 3). The last leaf and spine may be smaller.
type Topology struct {
	Name           string `json:"name"`
	Nodes          int    `json:"nodes"`
	LeafSize       int    `json:"leafSize"`
	LeavesPerSpine int    `json:"leavesPerSpine"`
}

func (tp Topology) nodeName(i int) string {
	return fmt.Sprintf("%s-l%04d-n%03d", tp.Name, i/tp.LeafSize, i%tp.LeafSize)
}
func (tp Topology) leaves() int         { return (tp.Nodes + tp.LeafSize - 1) / tp.LeafSize }
func (tp Topology) spines() int         { return (tp.leaves() + tp.LeavesPerSpine - 1) / tp.LeavesPerSpine }
func (tp Topology) leafOf(node int) int { return node / tp.LeafSize }
func (tp Topology) spineOf(leaf int) int {
	return leaf / tp.LeavesPerSpine
}
func (tp Topology) leafName(l int) string  { return fmt.Sprintf("%s-leaf-%04d", tp.Name, l) }
func (tp Topology) spineName(s int) string { return fmt.Sprintf("%s-spine-%02d", tp.Name, s) }

// nodeIndex maps node names back to their index.
func (tp Topology) nodeIndex() map[string]int {
	out := make(map[string]int, tp.Nodes)
	for i := range tp.Nodes {
		out[tp.nodeName(i)] = i
	}
	return out
}

// tierOf returns the tier of the lowest common HyperNode of the nodes (by index).
func (tp Topology) tierOf(nodes []int) int {
	if len(nodes) == 0 {
		return 0
	}
	leaf, spine := tp.leafOf(nodes[0]), tp.spineOf(tp.leafOf(nodes[0]))
	tier := 1
	for _, n := range nodes[1:] {
		if tp.leafOf(n) != leaf {
			tier = max(tier, 2)
		}
		if tp.spineOf(tp.leafOf(n)) != spine {
			tier = 3
		}
	}
	return tier
}

// leafCount returns how many distinct leaves hold the nodes.
func (tp Topology) leafCount(nodes []int) int {
	seen := map[int]bool{}
	for _, n := range nodes {
		seen[tp.leafOf(n)] = true
	}
	return len(seen)
}

// hyperNodes returns the tree: one anchored regexMatch per leaf (as discovery tools write
// them), exactMatch members above.
func (tp Topology) hyperNodes() []*topologyv1alpha1.HyperNode {
	var out []*topologyv1alpha1.HyperNode
	spineMembers := make([][]topologyv1alpha1.MemberSpec, tp.spines())
	for l := range tp.leaves() {
		hn := hntesting.MakeHyperNode(tp.leafName(l)).Tier(1).Members(topologyv1alpha1.MemberSpec{
			Type: topologyv1alpha1.MemberTypeNode,
			Selector: topologyv1alpha1.MemberSelector{RegexMatch: &topologyv1alpha1.RegexMatch{
				Pattern: fmt.Sprintf("^%s-l%04d-", tp.Name, l),
			}},
		}).Obj()
		hn.Spec.TierName = "leaf"
		out = append(out, hn)
		s := tp.spineOf(l)
		spineMembers[s] = append(spineMembers[s], hntesting.ChildMember(tp.leafName(l)))
	}
	var coreMembers []topologyv1alpha1.MemberSpec
	for s := range tp.spines() {
		hn := hntesting.MakeHyperNode(tp.spineName(s)).Tier(2).Members(spineMembers[s]...).Obj()
		hn.Spec.TierName = "spine"
		out = append(out, hn)
		coreMembers = append(coreMembers, hntesting.ChildMember(tp.spineName(s)))
	}
	core := hntesting.MakeHyperNode(tp.Name + "-core").Tier(3).Members(coreMembers...).Obj()
	core.Spec.TierName = "core"
	return append(out, core)
}

// create creates the nodes and the HyperNodes; cleanup removes every node and HyperNode.
func (tp Topology) create(t testing.TB, c clients) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	t.Cleanup(func() { deleteCluster(t, c) })
	err := parallel(tp.Nodes, func(i int) error {
		// The tier labels are those hypernode-controller publishes (nodeLabels): upstream's
		// TopologyPlacementGenerator places native pod groups by one of them.
		leaf := tp.leafOf(i)
		n := util.Node(tp.nodeName(i), "64", "512Gi", map[string]string{"bench.hypernode.dev/leaf": tp.leafName(leaf),
			"hypernode.dev/tier-1": tp.leafName(leaf), "hypernode.dev/tier-2": tp.spineName(tp.spineOf(leaf)), "hypernode.dev/tier-3": tp.Name + "-core"},
			v1.ResourceList{GPU: resource.MustParse(fmt.Sprint(nodeGPUs))})
		// The node status is kept on create; no admission plugin taints it (see TestMain).
		_, err := c.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating nodes: %v", err)
	}
	hns := tp.hyperNodes()
	err = parallel(len(hns), func(i int) error {
		_, err := c.topology.TopologyV1alpha1().HyperNodes().Create(ctx, hns[i], metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating HyperNodes: %v", err)
	}
	t.Logf("cluster %s: %d nodes, %d leaves, %d spines, 1 core created in %v", tp.Name, tp.Nodes, tp.leaves(), tp.spines(), time.Since(start).Round(time.Millisecond))
}

func deleteCluster(t testing.TB, c clients) {
	ctx := context.Background()
	if err := c.topology.TopologyV1alpha1().HyperNodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting HyperNodes: %v", err)
	}
	if err := util.DeleteAllNodes(ctx, c.kube); err != nil {
		t.Errorf("deleting nodes: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err
		}
		return len(nodes.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("nodes not deleted: %v", err)
	}
}

// parallel runs f(0..n-1) on `workers` goroutines and returns the first error.
func parallel(n int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// gpuPod returns a pod asking for gpus GPUs (and proportional cpu and memory), scheduled by
// schedulerName, a member of group when group is not empty.
func gpuPod(namespace, name, schedulerName string, gpus int, group string) *v1.Pod {
	var labels map[string]string
	if group != "" {
		labels = map[string]string{util.PodGroupLabel: group}
	}
	pod := util.Pod(namespace, name, schedulerName, "", labels)
	res := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(fmt.Sprint(cpuPerGPU * gpus)),
		v1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", memPerGPU*gpus)),
		GPU:               resource.MustParse(fmt.Sprint(gpus)),
	}
	pod.Spec.Containers[0].Resources.Requests = res
	pod.Spec.Containers[0].Resources.Limits = res.DeepCopy()
	return pod
}

// deletePods deletes the namespace's pods (no grace period: no kubelet runs) and PodGroups.
func deletePods(ctx context.Context, c clients, namespace string) error {
	if err := util.DeletePodsNow(ctx, c.kube, namespace); err != nil {
		return err
	}
	return c.scheduling.SchedulingV1alpha1().PodGroups(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// deletePodsNamed deletes the named pods without a grace period.
func deletePodsNamed(ctx context.Context, c clients, namespace string, names []string) error {
	return parallel(len(names), func(i int) error {
		return c.kube.CoreV1().Pods(namespace).Delete(ctx, names[i], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
}
