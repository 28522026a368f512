package gang

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices/devicestest"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
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
	gangs     *gangstate.Tracker
	activator *activatorMock
	recorder  *events.FakeRecorder
}

// newEnv builds a framework whose profile runs the Gang plugin at every extension point it
// implements, around a registry the test feeds directly.
func newEnv(t *testing.T, defaultTimeout int64) *env {
	t.Helper()
	return newEnvOn(t, defaultTimeout, internalcache.NewEmptySnapshot())
}

// newEnvOn is newEnv with the cluster the framework's snapshot shows.
func newEnvOn(t *testing.T, defaultTimeout int64, snapshot fwk.SharedLister) *env {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	gangs := gangstate.New()
	e := &env{ctx: klog.NewContext(ctx, logger), registry: gangs.Registry(), gangs: gangs, activator: &activatorMock{}, recorder: &events.FakeRecorder{Events: make(chan string, 100)}}
	registry := frameworkruntime.Registry{
		Name: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			e.plugin = newPlugin(ctx, *obj.(*config.GangArgs), h, e.gangs)
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
			PreBind:   enabled,
			PostBind:  enabled,
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
		frameworkruntime.WithSnapshotSharedLister(snapshot),
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

// gangOf creates the gang "train" with minMember and its members p0 to p<size-1>.
func (e *env) gangOf(minMember int32, size int) []*v1.Pod {
	e.podGroup("train", minMember, nil)
	pods := make([]*v1.Pod, size)
	for i := range pods {
		pods[i] = member(fmt.Sprintf("p%d", i), "train")
		e.registry.SetPod(nil, pods[i])
	}
	return pods
}

// attempted adds the pods to the registry as members that went through a scheduling cycle
// (only those are held), and returns them.
func (e *env) attempted(pods ...*v1.Pod) []*v1.Pod {
	for _, p := range pods {
		e.registry.SetPod(nil, p)
		e.gangs.MarkAttempted(p)
	}
	return pods
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
		// awaitingClaims of the members request a claim from a template not created yet.
		awaitingClaims int
		policy         string
		pod            *v1.Pod
		want           *fwk.Status
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
		{
			name: "member also in a native pod group", podGroup: true, minMember: 1, members: 1,
			pod: func() *v1.Pod {
				p := member("p0", "train")
				p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("train-native")}
				return p
			}(),
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, `pod p0 is in PodGroup team/train (label scheduling.x-k8s.io/pod-group) and in the native pod group "train-native" (spec.schedulingGroup): a pod is scheduled with one gang; remove the label or the schedulingGroup`),
		},
		{
			name: "member without the label its sub-group policy needs", podGroup: true, minMember: 3, members: 3,
			policy: `[{"name":"tp","subGroupSize":2,"labelSelector":{"matchLabels":{"role":"worker"}},"matchLabelKeys":["partition"]}]`,
			pod:    st.MakePod().Namespace(ns).Name("p0").UID("p0").Label(schedulingv1alpha1.PodGroupLabel, "train").Label("role", "worker").Obj(),
			want:   fwk.NewStatus(fwk.UnschedulableAndUnresolvable, `PodGroup team/train: member p0: sub-group policy "tp" needs its label(s) partition, which it does not have`),
		},
		{
			name: "member without the rank its sub-group policy needs", podGroup: true, minMember: 3, members: 3,
			policy: `[{"name":"tp","subGroupSize":2,"partitionSize":2}]`,
			pod:    member("p0", "train"),
			want:   fwk.NewStatus(fwk.UnschedulableAndUnresolvable, `PodGroup team/train: member p0: sub-group policy "tp" needs its rank (label batch.kubernetes.io/job-completion-index or annotation hypernode.dev/rank), which it does not have`),
		},
		{
			name: "a member's claim from a template not created yet", podGroup: true, minMember: 3, members: 3, awaitingClaims: 1,
			pod:  member("p0", "train"),
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for the ResourceClaims that members of PodGroup team/train request through ResourceClaimTemplates to be created: the gang is planned with every member's devices"),
		},
		{
			name: "too few members, one awaiting its claim: the count comes first", podGroup: true, minMember: 3, members: 2, awaitingClaims: 1,
			pod:  member("p0", "train"),
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for PodGroup team/train to have 3 members (minMember)"),
		},
		{
			name: "member that no policy selects stays in the default group", podGroup: true, minMember: 3, members: 3,
			policy: `[{"name":"tp","subGroupSize":2,"labelSelector":{"matchLabels":{"role":"worker"}},"matchLabelKeys":["partition"]}]`,
			pod:    member("p0", "train"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 60)
			if tc.podGroup {
				e.podGroup("train", tc.minMember, nil)
			}
			if tc.policy != "" {
				e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", UID: "uid-train", Annotations: map[string]string{podgroup.SubGroupPolicyAnnotation: tc.policy}},
					Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: tc.minMember},
				})
			}
			for i := range tc.members {
				p := member([]string{"p0", "p1", "p2", "p3"}[i], "train")
				if i >= tc.members-tc.awaitingClaims {
					devicestest.FromTemplate(p)
				}
				e.registry.SetPod(nil, p)
			}
			got := e.plugin.PreEnqueue(e.ctx, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PreEnqueue (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestHeldBackMembersLookAgainWhenTheLastClaimIsCreated: a gang whose members request
// claims from templates is held back until the registry sees every pending member's claim
// named; then every pending member is activated and let in. The queue may have seen the
// claims first: the members it let through were refused, and only this activation brings
// the gang back.
func TestHeldBackMembersLookAgainWhenTheLastClaimIsCreated(t *testing.T) {
	e := newEnv(t, 60)
	activated := func() []string { return sorted(activatedNow(e)) }
	e.podGroup("mpi", 3, nil)
	launcher := member("launcher", "mpi")
	w1, w2 := devicestest.FromTemplate(member("w1", "mpi")), devicestest.FromTemplate(member("w2", "mpi"))
	for _, p := range []*v1.Pod{launcher, w1, w2} {
		e.registry.SetPod(nil, p)
	}
	activated() // the third member made minMember
	const waiting = "waiting for the ResourceClaims that members of PodGroup team/mpi request through ResourceClaimTemplates to be created: the gang is planned with every member's devices"
	for _, p := range []*v1.Pod{launcher, w1, w2} {
		if s := e.plugin.PreEnqueue(e.ctx, p); s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != waiting {
			t.Errorf("PreEnqueue(%s) before the claims exist = %v", p.Name, s)
		}
	}
	e.registry.SetPod(w1, devicestest.ClaimCreated(w1))
	if got := activated(); len(got) != 0 {
		t.Errorf("activated while w2's claim does not exist: %v", got)
	}
	if s := e.plugin.PreEnqueue(e.ctx, launcher); s.Message() != waiting {
		t.Errorf("PreEnqueue(launcher) with w2's claim missing = %v", s)
	}
	e.registry.SetPod(w2, devicestest.ClaimCreated(w2))
	if diff := cmp.Diff([]string{"team/launcher", "team/w1", "team/w2"}, activated()); diff != "" {
		t.Errorf("activated when the last claim was named (-want,+got):\n%s", diff)
	}
	for _, p := range []*v1.Pod{launcher, devicestest.ClaimCreated(w1), devicestest.ClaimCreated(w2)} {
		if s := e.plugin.PreEnqueue(e.ctx, p); !s.IsSuccess() {
			t.Errorf("PreEnqueue(%s) once every claim exists = %v", p.Name, s)
		}
	}
	wantEvent := "Normal WaitingForResourceClaims waiting for the ResourceClaims of PodGroup team/mpi's members: 2 pending members have claims from ResourceClaimTemplates not created yet"
	if got := drain(e.recorder.Events); !contains(got, wantEvent) {
		t.Errorf("events = %q, want one %q", got, wantEvent)
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

// TestHeldBackMembersLookAgainWhenThePodGroupAppears: kube-scheduler's queue may see the
// PodGroup before the registry does, so its own requeue finds the PodGroup still missing.
// The registry's listener then runs PreEnqueue again for every held-back member, even below
// minMember, so that no member keeps saying "it does not exist"; a member joining below
// minMember activates nobody.
func TestHeldBackMembersLookAgainWhenThePodGroupAppears(t *testing.T) {
	e := newEnv(t, 60)
	activated := func() []string { return sorted(activatedNow(e)) }
	e.registry.SetPod(nil, member("p0", "train"))
	if got := activated(); len(got) != 0 {
		t.Errorf("activated before the PodGroup exists: %v", got)
	}
	e.podGroup("train", 3, nil)
	if diff := cmp.Diff([]string{"team/p0"}, activated()); diff != "" {
		t.Errorf("activated when the PodGroup appeared (-want,+got):\n%s", diff)
	}
	if s := e.plugin.PreEnqueue(e.ctx, member("p0", "train")); s.Message() != "waiting for PodGroup team/train to have 3 members (minMember)" {
		t.Errorf("PreEnqueue after the PodGroup appeared = %q", s.Message())
	}
	e.registry.SetPod(nil, member("p1", "train"))
	if got := activated(); len(got) != 0 {
		t.Errorf("activated by a member below minMember: %v", got)
	}
	e.podGroup("train", 3, nil) // the same PodGroup again (a resync): nothing to look at
	if got := activated(); len(got) != 0 {
		t.Errorf("activated by an unchanged PodGroup: %v", got)
	}
	e.registry.SetPod(nil, member("p2", "train"))
	if diff := cmp.Diff([]string{"team/p0", "team/p1", "team/p2"}, activated()); diff != "" {
		t.Errorf("activated when the third member made the group ready (-want,+got):\n%s", diff)
	}
}
