package gang

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

const ns = "team"

type activatorMock struct {
	mu        sync.Mutex
	activated []string
}

func (a *activatorMock) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name := range pods {
		a.activated = append(a.activated, name)
	}
}

type env struct {
	ctx       context.Context
	fw        framework.Framework
	plugin    *Gang
	registry  *podgroup.Registry
	activator *activatorMock
	recorder  *events.FakeRecorder
}

// newEnv builds a framework whose profile runs the Gang plugin at every extension point it
// implements, around a registry the test feeds directly.
func newEnv(t *testing.T, defaultTimeout int64) *env {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	e := &env{ctx: klog.NewContext(ctx, logger), registry: podgroup.New(), activator: &activatorMock{}, recorder: &events.FakeRecorder{Events: make(chan string, 100)}}
	registry := frameworkruntime.Registry{
		Name: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			e.plugin = newPlugin(ctx, *obj.(*config.GangArgs), h, e.registry)
			return e.plugin, nil
		},
	}
	enabled := schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: Name}}}
	profile := &schedconfig.KubeSchedulerProfile{
		SchedulerName: "hypernode-scheduler",
		Plugins: &schedconfig.Plugins{
			QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: "PrioritySort"}}},
			Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: "DefaultBinder"}}},
			Reserve:   enabled,
			Permit:    enabled,
		},
		PluginConfig: []schedconfig.PluginConfig{{Name: Name, Args: &config.GangArgs{DefaultScheduleTimeoutSeconds: defaultTimeout}}},
	}
	registry.Merge(frameworkruntimeInTree())
	client := fake.NewClientset()
	fw, err := frameworkruntime.NewFramework(e.ctx, registry, profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)),
		frameworkruntime.WithEventRecorder(e.recorder),
		frameworkruntime.WithPodActivator(e.activator),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewEmptySnapshot()),
	)
	if err != nil {
		t.Fatal(err)
	}
	e.fw = fw
	return e
}

func (e *env) podGroup(name string, minMember int32, timeout *int32) {
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, ScheduleTimeoutSeconds: timeout},
	})
}

func member(name, group string) *v1.Pod {
	return st.MakePod().Namespace(ns).Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, group).Obj()
}

// reserveAndPermit runs a member through Reserve and Permit as the scheduling cycle does.
func (e *env) reserveAndPermit(t *testing.T, pod *v1.Pod) *fwk.Status {
	t.Helper()
	state := framework.NewCycleState()
	if s := e.fw.RunReservePluginsReserve(e.ctx, state, pod, "node-1"); !s.IsSuccess() {
		t.Fatalf("Reserve(%s): %v", pod.Name, s)
	}
	waits, s := e.fw.RunPermitPlugins(e.ctx, state, pod, "node-1")
	if s.IsWait() {
		// As the scheduler does, before it waits on the pod in its binding cycle.
		e.fw.AddWaitingPod(pod, waits)
	}
	return s
}

func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestPreEnqueue(t *testing.T) {
	tests := []struct {
		name      string
		podGroup  bool
		minMember int32
		members   int
		pod       *v1.Pod
		want      *fwk.Status
	}{
		{name: "not a member", pod: st.MakePod().Namespace(ns).Name("solo").Obj()},
		{
			name: "PodGroup missing",
			pod:  member("p0", "train"),
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for PodGroup team/train (named by label scheduling.x-k8s.io/pod-group): it does not exist"),
		},
		{
			name: "too few members", podGroup: true, minMember: 3, members: 2,
			pod:  member("p0", "train"),
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for PodGroup team/train to have 3 members (minMember)"),
		},
		{name: "enough members", podGroup: true, minMember: 3, members: 3, pod: member("p0", "train")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 60)
			if tc.podGroup {
				e.podGroup("train", tc.minMember, nil)
			}
			for i := range tc.members {
				e.registry.SetPod(nil, member([]string{"p0", "p1", "p2", "p3"}[i], "train"))
			}
			got := e.plugin.PreEnqueue(e.ctx, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PreEnqueue (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPermitAllOrNothing: members wait until minMember are reserved, then all are allowed at
// once; the pending members are activated when the first one waits.
func TestPermitAllOrNothing(t *testing.T) {
	e := newEnv(t, 60)
	e.podGroup("train", 3, nil)
	pods := []*v1.Pod{member("p0", "train"), member("p1", "train"), member("p2", "train")}
	for _, p := range pods {
		e.registry.SetPod(nil, p)
	}
	// The third member made the group ready: the registry's listener activated them all.
	e.activator.mu.Lock()
	if diff := cmp.Diff([]string{"team/p0", "team/p1", "team/p2"}, sorted(e.activator.activated)); diff != "" {
		t.Errorf("activated when the group became ready (-want,+got):\n%s", diff)
	}
	e.activator.activated = nil
	e.activator.mu.Unlock()
	for _, p := range pods[:2] {
		if s := e.reserveAndPermit(t, p); s.Code() != fwk.Wait {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
		}
	}
	e.activator.mu.Lock()
	// The first waiting member activates the other two, once for the round.
	if diff := cmp.Diff([]string{"team/p1", "team/p2"}, sorted(e.activator.activated)); diff != "" {
		t.Errorf("activated pods (-want,+got):\n%s", diff)
	}
	e.activator.mu.Unlock()
	if s := e.reserveAndPermit(t, pods[2]); !s.IsSuccess() {
		t.Fatalf("Permit of the last member = %v, want Success", s)
	}
	for _, p := range pods[:2] {
		if s := e.fw.WaitOnPermit(e.ctx, p); !s.IsSuccess() {
			t.Errorf("waiting member %s: %v, want allowed", p.Name, s)
		}
	}
	if diff := cmp.Diff([]string{
		"Normal GangWaiting gang team/train: members are reserved and wait in Permit for the rest of the gang (minMember 3, timeout 1m0s)",
		"Normal GangScheduled gang team/train: 3 of 3 (minMember) members reserved or bound; 2 waiting members allowed to bind",
	}, drain(e.recorder.Events)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

// TestUnreserveRejectsWaitingSiblings: one member's Unreserve rejects every waiting sibling at
// once, with a message that names the gang and the member.
func TestUnreserveRejectsWaitingSiblings(t *testing.T) {
	e := newEnv(t, 60)
	e.podGroup("train", 3, nil)
	pods := []*v1.Pod{member("p0", "train"), member("p1", "train"), member("p2", "train")}
	for _, p := range pods {
		e.registry.SetPod(nil, p)
	}
	for _, p := range pods[:2] {
		e.reserveAndPermit(t, p)
	}
	if got := e.registry.Info(podgroup.Key{Namespace: ns, Name: "train"}).Scheduled; got != 2 {
		t.Fatalf("scheduled = %d, want 2", got)
	}
	state := framework.NewCycleState()
	e.fw.RunReservePluginsReserve(e.ctx, state, pods[2], "node-1")
	e.fw.RunReservePluginsUnreserve(e.ctx, state, pods[2], "node-1")
	for _, p := range pods[:2] {
		s := e.fw.WaitOnPermit(e.ctx, p)
		if s.Code() != fwk.Unschedulable || s.Message() != "gang team/train rejected: member p2 was unreserved" {
			t.Errorf("waiting member %s: %v", p.Name, s)
		}
		// The framework unreserves rejected members.
		e.fw.RunReservePluginsUnreserve(e.ctx, framework.NewCycleState(), p, "node-1")
	}
	if got := e.registry.Info(podgroup.Key{Namespace: ns, Name: "train"}).Scheduled; got != 0 {
		t.Errorf("scheduled after the rejection = %d, want 0", got)
	}
	events := drain(e.recorder.Events)
	if want := "Warning GangRejected gang team/train: member p2 was unreserved; 2 waiting members rejected and their resources released"; !contains(events, want) {
		t.Errorf("events %q do not contain %q", events, want)
	}
}

// TestPermitTimeout: the wait is bounded by the PodGroup's scheduleTimeoutSeconds (else the
// default arg); when it expires the members are rejected and the gang reports the timeout.
func TestPermitTimeout(t *testing.T) {
	e := newEnv(t, 60)
	key := podgroup.Key{Namespace: ns, Name: "train"}
	e.podGroup("train", 2, nil)
	if got := e.plugin.timeout(e.registry.Info(key)); got != time.Minute {
		t.Errorf("default timeout = %v, want 1m", got)
	}
	e.podGroup("train", 2, ptr.To[int32](1))
	if got := e.plugin.timeout(e.registry.Info(key)); got != time.Second {
		t.Errorf("PodGroup timeout = %v, want 1s", got)
	}
	p0 := member("p0", "train")
	e.registry.SetPod(nil, p0)
	e.registry.SetPod(nil, member("p1", "train"))
	if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
		t.Fatalf("Permit = %v, want Wait", s)
	}
	s := e.fw.WaitOnPermit(e.ctx, p0)
	if s.Code() != fwk.Unschedulable {
		t.Fatalf("after the timeout: %v, want Unschedulable", s)
	}
	e.fw.RunReservePluginsUnreserve(e.ctx, framework.NewCycleState(), p0, "node-1")
	events := drain(e.recorder.Events)
	if want := "Warning GangTimedOut gang team/train: timed out after 1s waiting for 2 members (minMember); 1 were reserved or bound; 0 waiting members rejected and their resources released"; !contains(events, want) {
		t.Errorf("events %q do not contain %q", events, want)
	}
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func TestQueueingHints(t *testing.T) {
	e := newEnv(t, 60)
	pg := func(namespace, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace(namespace)
		u.SetName(name)
		return u
	}
	waiting := member("p0", "train")
	solo := st.MakePod().Namespace(ns).Name("solo").Obj()
	tests := []struct {
		name string
		fn   fwk.QueueingHintFn
		pod  *v1.Pod
		obj  any
		want fwk.QueueingHint
	}{
		{"member of the same gang added", e.plugin.isSchedulableAfterMemberAdded, waiting, member("p1", "train"), fwk.Queue},
		{"member of another gang added", e.plugin.isSchedulableAfterMemberAdded, waiting, member("q1", "other"), fwk.QueueSkip},
		{"same name in another namespace", e.plugin.isSchedulableAfterMemberAdded, waiting, st.MakePod().Namespace("elsewhere").Name("p1").Label(schedulingv1alpha1.PodGroupLabel, "train").Obj(), fwk.QueueSkip},
		{"pod outside any gang added", e.plugin.isSchedulableAfterMemberAdded, waiting, solo, fwk.QueueSkip},
		{"the gang's PodGroup changed", e.plugin.isSchedulableAfterPodGroupChange, waiting, pg(ns, "train"), fwk.Queue},
		{"another PodGroup changed", e.plugin.isSchedulableAfterPodGroupChange, waiting, pg(ns, "other"), fwk.QueueSkip},
		{"PodGroup change for a pod outside any gang", e.plugin.isSchedulableAfterPodGroupChange, solo, pg(ns, "train"), fwk.QueueSkip},
		{"capacity freed for a member", e.plugin.isSchedulableAfterCapacityChange, waiting, nil, fwk.Queue},
		{"capacity freed for a pod outside any gang", e.plugin.isSchedulableAfterCapacityChange, solo, nil, fwk.QueueSkip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.fn(klog.Background(), tc.pod, nil, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("hint = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMinResources: a group whose minResources exceed what the whole cluster can allocate is
// refused in PreFilter with the shortfall; otherwise the check is skipped.
func TestMinResources(t *testing.T) {
	e := newEnv(t, 60)
	e.registry.SetNode(st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", "nvidia.com/gpu": "8"}).Obj())
	e.registry.SetNode(st.MakeNode().Name("n2").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", "nvidia.com/gpu": "8"}).Obj())
	set := func(min v1.ResourceList) {
		e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", UID: "uid-train"},
			Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 1, MinResources: min},
		})
	}
	pod := member("p0", "train")
	set(v1.ResourceList{"nvidia.com/gpu": resource.MustParse("24"), v1.ResourceCPU: resource.MustParse("4")})
	_, got := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), pod, nil)
	want := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "PodGroup team/train needs minResources the whole cluster cannot allocate: nvidia.com/gpu 24 (cluster allocatable 16)")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PreFilter (-want,+got):\n%s", diff)
	}
	set(v1.ResourceList{"nvidia.com/gpu": resource.MustParse("16")})
	if _, got := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), pod, nil); got.Code() != fwk.Skip {
		t.Errorf("PreFilter with satisfiable minResources = %v, want Skip", got)
	}
}

// TestPermitTwoLevels: a job of minMember 4 with partitions of 2 (minSubGroups 2 of 3). The
// job is released when 4 members of 2 complete partitions are reserved; a member of the third
// partition then waits for its own partition only, and its failure rejects only its partition.
func TestPermitTwoLevels(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.partitionedJob(`[{"name":"tp","subGroupSize":2,"minSubGroups":2,"matchLabelKeys":["partition"]}]`, 4, 6, 2)
	for _, i := range []int{0, 2, 1} {
		if s := e.reserveAndPermit(t, pods[i]); s.Code() != fwk.Wait {
			t.Fatalf("Permit(p%d) = %v, want Wait", i, s)
		}
	}
	if s := e.reserveAndPermit(t, pods[3]); !s.IsSuccess() {
		t.Fatalf("Permit of the member completing 2 partitions = %v, want Success", s)
	}
	for _, i := range []int{0, 1, 2} {
		if s := e.fw.WaitOnPermit(e.ctx, pods[i]); !s.IsSuccess() {
			t.Errorf("p%d: %v, want allowed", i, s)
		}
	}
	// The job is complete; p4 waits for its own partition.
	if s := e.reserveAndPermit(t, pods[4]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p4) = %v, want Wait for partition tp-2", s)
	}
	// p5 fails: only partition tp-2's waiting member is rejected.
	state := framework.NewCycleState()
	_, status := e.plugin.PostFilter(e.ctx, state, pods[5], framework.NewDefaultNodeToStatus())
	if want := "gang team/job: sub-group tp-2: this member cannot be placed, so no member of the sub-group binds; 1 waiting members released"; status.Message() != want {
		t.Errorf("PostFilter message %q, want %q", status.Message(), want)
	}
	if s := e.fw.WaitOnPermit(e.ctx, pods[4]); s.Code() != fwk.Unschedulable || s.Message() != "gang team/job rejected: sub-group tp-2: member p5 cannot be placed" {
		t.Errorf("p4: %v", s)
	}
}

// TestPermitCountsOnlyBindableMembers: members of incomplete sub-groups cannot bind, so they do
// not count toward minMember: with 4 members of a complete partition and 2 + 2 of incomplete
// ones, a job of minMember 8 is not complete.
func TestPermitCountsOnlyBindableMembers(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.partitionedJob(`[{"name":"tp","subGroupSize":4,"minSubGroups":1,"matchLabelKeys":["partition"]}]`, 8, 12, 4)
	for _, i := range []int{0, 1, 2, 3, 4, 5, 8, 9} {
		if s := e.reserveAndPermit(t, pods[i]); s.Code() != fwk.Wait {
			t.Fatalf("Permit(p%d) = %v, want Wait: only 4 members can bind", i, s)
		}
	}
}

// partitionedJob creates the PodGroup "job" with the given sub-group policy and minMember, and
// size members p0.. labelled partition=i/perPartition.
func (e *env) partitionedJob(policy string, minMember, size, perPartition int) []*v1.Pod {
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "uid-job", Annotations: map[string]string{
			podgroup.SubGroupPolicyAnnotation: policy}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: int32(minMember)},
	})
	var pods []*v1.Pod
	for i := range size {
		p := member(fmt.Sprintf("p%d", i), "job")
		p.Labels["partition"] = fmt.Sprint(i / perPartition)
		e.registry.SetPod(nil, p)
		pods = append(pods, p)
	}
	return pods
}
