package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gang"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

const boundTimeout = 30 * time.Second

// gangEnv is a namespace with the scheduler running and helpers for one gang test.
type gangEnv struct {
	t  *testing.T
	c  clients
	ns string
}

func newGangEnv(t *testing.T, nodes ...string) *gangEnv {
	t.Helper()
	c := newClients(t)
	ns := testNamespace(t, c)
	withNodes(t, c, nodes...)
	return &gangEnv{t: t, c: c, ns: ns}
}

func (e *gangEnv) podGroup(name string, minMember int32, timeoutSeconds int32) {
	e.t.Helper()
	pg := util.PodGroup(e.ns, name, minMember, nil)
	if timeoutSeconds > 0 {
		pg.Spec.ScheduleTimeoutSeconds = ptr.To(timeoutSeconds)
	}
	if err := util.CreatePodGroup(context.Background(), e.c.scheduling, pg); err != nil {
		e.t.Fatal(err)
	}
}

// members creates count members of group, each requesting cpu, named <group>-<i>.
func (e *gangEnv) members(group, cpu string, count int, mutate ...func(*v1.Pod)) []string {
	e.t.Helper()
	pods := util.GangPods(e.ns, group, plugins.SchedulerName, cpu, count)
	for _, p := range pods {
		for _, m := range mutate {
			m(p)
		}
	}
	names, err := util.CreatePods(context.Background(), e.c.kube, pods...)
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

func (e *gangEnv) bound() map[string]string {
	e.t.Helper()
	b, err := util.BoundPods(context.Background(), e.c.kube, e.ns)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *gangEnv) waitBound(names []string) map[string]string {
	e.t.Helper()
	got, err := util.WaitForPodsBound(context.Background(), e.c.kube, e.ns, names, boundTimeout)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// waitCondition waits until a pod's PodScheduled condition is False with the given reason (""
// for any) and a message containing want, and returns the message.
func (e *gangEnv) waitCondition(pod, reason, want string) string {
	e.t.Helper()
	_, last := e.waitConditionOnAny([]string{pod}, reason, want)
	return last
}

// waitConditionOnAny waits until one of the pods, none of them bound, has PodScheduled false
// with the reason ("" for any) and a message containing want; it returns that pod and the
// condition.
func (e *gangEnv) waitConditionOnAny(pods []string, reason, want string) (pod, condition string) {
	e.t.Helper()
	last := map[string]string{}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, boundTimeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range pods {
			p, err := e.c.kube.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" {
				return false, fmt.Errorf("pod %s was bound to %s", name, p.Spec.NodeName)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled {
					last[name] = c.Reason + ": " + c.Message
					if c.Status == v1.ConditionFalse && (reason == "" || c.Reason == reason) && strings.Contains(c.Message, want) {
						pod = name
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		var lasts []string
		for _, name := range pods {
			lasts = append(lasts, fmt.Sprintf("%s: %q", name, last[name]))
		}
		if len(pods) == 1 {
			e.t.Fatalf("pod %s: PodScheduled never became %s with %q (last %q): %v", pods[0], reason, want, last[pods[0]], err)
		}
		e.t.Fatalf("none of %v: PodScheduled became %s with %q (last: %s): %v", pods, reason, want, strings.Join(lasts, "; "), err)
	}
	return pod, last[pod]
}

// priorityClass creates a PriorityClass for the test (cluster-scoped: deleted when it ends).
func (e *gangEnv) priorityClass(name string, value int32, policy ...v1.PreemptionPolicy) {
	e.t.Helper()
	ctx := context.Background()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if len(policy) > 0 {
		pc.PreemptionPolicy = &policy[0]
	}
	if _, err := e.c.kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.c.kube.SchedulingV1().PriorityClasses().Delete(ctx, name, metav1.DeleteOptions{}) })
}

func (e *gangEnv) expectNoneBound() {
	e.t.Helper()
	if b := e.bound(); len(b) != 0 {
		e.t.Fatalf("pods bound although the gang is incomplete: %v", b)
	}
}

func nodeNames(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// Test 1: a gang of 3 on room for 2 binds nothing and says why; a new node lets it bind.
func TestGangWaitsForRoomThenBindsAll(t *testing.T) {
	e := newGangEnv(t, "node-0") // 4 CPUs: room for two 2-CPU pods
	startScheduler(t, nil)
	e.podGroup("train", 3, 0)
	names := e.members("train", "2", 3)
	msg := e.waitCondition("train-2", v1.PodReasonUnschedulable, "gang "+e.ns+"/train")
	for _, n := range names[:2] {
		e.waitCondition(n, v1.PodReasonUnschedulable, "gang "+e.ns+"/train")
	}
	e.expectNoneBound()
	t.Logf("pending message: %s", msg)

	if err := util.CreateNodes(context.Background(), e.c.kube, util.Node("node-1", "4", "16Gi", nil)); err != nil {
		t.Fatal(err)
	}
	// The node is created tainted not-ready and untainted just after: the gang may try on the
	// tainted node first, then again after a back-off.
	got, err := util.WaitForPodsBound(context.Background(), e.c.kube, e.ns, names, 2*boundTimeout)
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for _, n := range got {
		perNode[n]++
	}
	if len(got) != 3 || perNode["node-0"]+perNode["node-1"] != 3 || perNode["node-0"] > 2 || perNode["node-1"] > 2 {
		t.Errorf("placements %v", got)
	}
}

// Test 2: members created one by one: nothing binds until the third exists.
func TestGangMembersArriveOneByOne(t *testing.T) {
	e := newGangEnv(t, nodeNames("node", 3)...)
	startScheduler(t, nil)
	e.podGroup("train", 3, 0)
	for i := range 2 {
		pod := util.GangPods(e.ns, "train", plugins.SchedulerName, "1", 3)[i]
		if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
			t.Fatal(err)
		}
		// The scheduler has looked at the member and holds it back: a full cycle has passed.
		e.waitCondition(pod.Name, "SchedulingGated", fmt.Sprintf("waiting for PodGroup %s/train to have 3 members (minMember)", e.ns))
		e.expectNoneBound()
	}
	last := util.GangPods(e.ns, "train", plugins.SchedulerName, "1", 3)[2]
	if _, err := util.CreatePods(context.Background(), e.c.kube, last); err != nil {
		t.Fatal(err)
	}
	e.waitBound([]string{"train-0", "train-1", "train-2"})
}

// Test 3: two gangs of 4 compete for room for exactly 4: one binds fully, the other stays
// fully pending, no deadlock; deleting the first lets the second bind.
func TestTwoGangsNoDeadlock(t *testing.T) {
	e := newGangEnv(t, nodeNames("node", 2)...) // 2 nodes x 4 CPUs, 2-CPU pods: room for 4
	startScheduler(t, nil)
	const timeoutSeconds = 5
	e.podGroup("a", 4, timeoutSeconds)
	e.podGroup("b", 4, timeoutSeconds)
	// Interleave the creations so both gangs reserve at the same time.
	var a, b []string
	for i := range 4 {
		for _, g := range []string{"a", "b"} {
			pod := util.GangPods(e.ns, g, plugins.SchedulerName, "2", 4)[i]
			if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
				t.Fatal(err)
			}
			if g == "a" {
				a = append(a, pod.Name)
			} else {
				b = append(b, pod.Name)
			}
		}
	}
	var winner, loser []string
	// A deadlock never ends; a slow machine may need a round or two more (each a timeout and
	// a back-off), so the deadline is generous.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*boundTimeout, true, func(ctx context.Context) (bool, error) {
		bound := e.bound()
		countA, countB := 0, 0
		for _, n := range a {
			if _, ok := bound[n]; ok {
				countA++
			}
		}
		for _, n := range b {
			if _, ok := bound[n]; ok {
				countB++
			}
		}
		switch {
		case countA == 4 && countB == 0:
			winner, loser = a, b
			return true, nil
		case countB == 4 && countA == 0:
			winner, loser = b, a
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no gang completed within %v (bound: %v): %v", 2*boundTimeout, e.bound(), err)
	}
	// The loser stays entirely pending.
	for _, n := range loser {
		e.waitCondition(n, v1.PodReasonUnschedulable, "")
	}
	if b := e.bound(); len(b) != 4 {
		t.Fatalf("bound %v, want exactly the 4 members of the winner", b)
	}
	for _, n := range winner {
		if err := e.c.kube.CoreV1().Pods(e.ns).Delete(context.Background(), n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitBound(loser)
}

// Test 4: minMember 2 of 3 pods with room for 2: two bind, the third stays pending.
func TestGangMinMemberBelowSize(t *testing.T) {
	e := newGangEnv(t, "node-0") // room for two 2-CPU pods
	startScheduler(t, nil)
	e.podGroup("train", 2, 0)
	names := e.members("train", "2", 3)
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, boundTimeout, true, func(context.Context) (bool, error) {
		return len(e.bound()) == 2, nil
	})
	if err != nil {
		t.Fatalf("bound %v, want 2 members: %v", e.bound(), err)
	}
	bound := e.bound()
	for _, n := range names {
		if _, ok := bound[n]; !ok {
			e.waitCondition(n, v1.PodReasonUnschedulable, "")
		}
	}
	if got := len(e.bound()); got != 2 {
		t.Errorf("%d bound, want 2", got)
	}
}

// Test 5: a member that can never fit does not leave its siblings holding resources: another
// pod can use them right away (well before the gang's timeout).
func TestGangMemberThatNeverFitsReleasesSiblings(t *testing.T) {
	e := newGangEnv(t, "node-0") // 4 CPUs
	startScheduler(t, nil)
	e.podGroup("train", 3, 600) // a timeout far beyond the test's patience
	e.members("train", "1", 2)
	impossible := util.GangPods(e.ns, "train", plugins.SchedulerName, "1", 3)[2]
	impossible.Spec.NodeSelector = map[string]string{"no-such-label": "true"}
	if _, err := util.CreatePods(context.Background(), e.c.kube, impossible); err != nil {
		t.Fatal(err)
	}
	msg := e.waitCondition(impossible.Name, v1.PodReasonUnschedulable, "gang "+e.ns+"/train: this member cannot be placed, so no member binds")
	if want := "1 node(s) didn't match Pod's node affinity/selector"; !strings.Contains(msg, want) {
		t.Errorf("the condition %q lacks the Filter reason %q", msg, want)
	}
	// 4 CPUs: only free if the two siblings hold nothing.
	other := util.Pod(e.ns, "other", plugins.SchedulerName, "4", nil)
	if _, err := util.CreatePods(context.Background(), e.c.kube, other); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"other": "node-0"}, e.waitBound([]string{"other"})); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"other": "node-0"}, e.bound()); diff != "" {
		t.Errorf("gang members bound (-want,+got):\n%s", diff)
	}
}

// Test 6: a member of a PodGroup that does not exist waits with that reason; creating the
// PodGroup lets the gang schedule.
func TestGangMissingPodGroup(t *testing.T) {
	e := newGangEnv(t, "node-0")
	startScheduler(t, nil)
	names := e.members("late", "1", 2)
	for _, n := range names {
		e.waitCondition(n, "SchedulingGated", fmt.Sprintf("waiting for PodGroup %s/late (named by label %s): it does not exist", e.ns, schedulingv1alpha1.PodGroupLabel))
	}
	e.expectNoneBound()
	e.podGroup("late", 2, 0)
	e.waitBound(names)
}

// Test 7: a gang waiting in Permit when the scheduler stops is scheduled again by a new
// scheduler and ends fully bound; nothing is bound in between.
func TestGangSurvivesSchedulerRestart(t *testing.T) {
	e := newGangEnv(t, nodeNames("node", 3)...)
	config, err := util.SchedulerConfig(controlPlane, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := util.StartScheduler(context.Background(), config)
	if err != nil {
		t.Fatal(err)
	}
	e.podGroup("train", 3, 600)
	// The third member is held by a scheduling gate: the first two reach Permit and wait.
	names := e.members("train", "1", 3, func(p *v1.Pod) {
		if p.Name == "train-2" {
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/hold"}}
		}
	})
	// The scheduler reports the round on the PodGroup when the first member waits in Permit.
	pg, err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).Get(context.Background(), "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForObjectEvent(t, e.c, e.ns, "PodGroup", pg.UID, gang.EventGangWaiting, plugins.SchedulerName, "wait in Permit")
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	e.expectNoneBound()

	second, err := util.StartScheduler(context.Background(), config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	// The new scheduler may write the gated pod's status meanwhile: retry on conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := e.c.kube.CoreV1().Pods(e.ns).Get(context.Background(), "train-2", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Spec.SchedulingGates = nil
		_, err = e.c.kube.CoreV1().Pods(e.ns).Update(context.Background(), pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.waitBound(names)
}
