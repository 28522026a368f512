package gang

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	_ "github.com/hypernode-dev/hypernode-scheduler/apis/config/scheme"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/plugintesting"
)

// precedenceEnv: one 2-CPU node holding a waiting member of gang "waiter" (2 CPUs), and a
// member of gang "failer" (2 CPUs) that fits only if the waiter yields. The default profile
// plus Gang runs, so the fit check uses the real Filter plugins.
func precedenceEnv(t *testing.T, waiterOlder bool) (context.Context, framework.Framework, *Gang, *v1.Pod, *v1.Pod) {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	ctx = klog.NewContext(ctx, logger)
	profile := plugintesting.LoadProfiles(t, `profiles:
- schedulerName: hypernode-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Gang
      disabled:
      - name: DynamicResources
`)[0]
	gangs := gangstate.New()
	registry := gangs.Registry()
	now := time.Now()
	for name, created := range map[string]time.Time{"waiter": now, "failer": now.Add(time.Minute)} {
		if name == "waiter" && !waiterOlder {
			created = now.Add(2 * time.Minute)
		}
		registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID("pg-" + name),
			CreationTimestamp: metav1.NewTime(created)}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
	}
	pod := func(name, group string) *v1.Pod {
		p := member(name, group)
		p.Spec.Containers = []v1.Container{{Name: "main", Image: "x", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}}
		return p
	}
	waiter := pod("waiter-0", "waiter")
	waiter.Spec.NodeName = "node-1"
	failer := pod("failer-0", "failer")
	node := st.MakeNode().Name("node-1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "4Gi", v1.ResourcePods: "10"}).Obj()
	reg := plugins.NewInTreeRegistry()
	var g *Gang
	reg[Name] = func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		g = newPlugin(ctx, *obj.(*config.GangArgs), h, gangs)
		return g, nil
	}
	client := fake.NewClientset()
	fw, err := frameworkruntime.NewFramework(ctx, reg, &profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot([]*v1.Pod{waiter}, []*v1.Node{node})),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodNominator(plugintesting.NoNominations{}),
		frameworkruntime.WithPodActivator(&activatorMock{}),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The waiter goes through Reserve and Permit, as the scheduling cycle takes it there.
	// (Only Gang's Reserve: the other plugins' Reserve needs their PreFilter state.)
	if s := g.Reserve(ctx, framework.NewCycleState(), waiter, "node-1"); !s.IsSuccess() {
		t.Fatalf("Reserve(waiter): %v", s)
	}
	waits, s := fw.RunPermitPlugins(ctx, framework.NewCycleState(), waiter, "node-1")
	if s.Code() != fwk.Wait {
		t.Fatalf("Permit(waiter) = %v, want Wait", s)
	}
	fw.AddWaitingPod(waiter, waits)
	return ctx, fw, g, waiter, failer
}

// TestPostFilterPrecedence: a failing member of an older gang makes a younger gang's waiting
// member yield when that frees room for it; a younger gang's member never evicts an older
// gang; and a member refused without a resolvable Filter failure evicts nobody.
func TestPostFilterPrecedence(t *testing.T) {
	tests := []struct {
		name        string
		waiterOlder bool
		status      *fwk.Status
		wantYield   bool
	}{
		{name: "older gang fails on resources: the younger waiting gang yields", waiterOlder: false, status: fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"), wantYield: true},
		{name: "younger gang fails: the older waiting gang keeps its reservation", waiterOlder: true, status: fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu")},
		{name: "refused by an unresolvable reason: nobody yields", waiterOlder: false, status: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "topology unsatisfiable")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, fw, g, waiter, failer := precedenceEnv(t, tc.waiterOlder)
			state := framework.NewCycleState()
			if _, s, _ := fw.RunPreFilterPlugins(ctx, state, failer); !s.IsSuccess() {
				t.Fatalf("PreFilter: %v", s)
			}
			statuses := framework.NewDefaultNodeToStatus()
			statuses.Set("node-1", tc.status)
			_, status := g.PostFilter(ctx, state, failer, statuses)
			if status.Code() != fwk.Unschedulable {
				t.Errorf("PostFilter = %v, want Unschedulable", status)
			}
			wp := fw.GetWaitingPod(waiter.UID)
			if tc.wantYield {
				got := fw.WaitOnPermit(ctx, waiter)
				want := "gang team/waiter rejected: it yields its reserved resources to gang team/failer, which takes precedence"
				if got.Code() != fwk.Unschedulable || got.Message() != want {
					t.Errorf("waiting member: %v, want rejected with %q", got, want)
				}
				return
			}
			if wp == nil {
				t.Fatal("the waiting member is gone")
			}
			// Still waiting: allow it and check it was not rejected before.
			wp.Allow(Name)
			if got := fw.WaitOnPermit(ctx, waiter); !got.IsSuccess() {
				t.Errorf("the waiting member was rejected: %v", got)
			}
		})
	}
}
