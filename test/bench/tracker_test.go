package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// podState is what the tracker knows about one pod.
type podState struct {
	node          string
	boundAt       time.Time // when the tracker first saw the pod with a node
	unschedulable string    // the PodScheduled=False/Unschedulable message, if any
}

// tracker watches the pods of one namespace (one watch, so that measuring costs the
// apiserver as little as possible) and records when each pod is first seen bound. A wait
// that makes no progress for relistAfter lists the namespace (relist), again after each
// such stretch: CI once saw a vanilla run bind all 48 pods while none of their updates
// reached the watch in 5 minutes, an API server stalled under load; the reflector would
// only have re-watched after its 5-10 minute watch timeout.
type tracker struct {
	mu     sync.Mutex
	pods   map[string]*podState
	cancel context.CancelFunc
	list   func(context.Context) (*v1.PodList, error)
}

const relistAfter = 15 * time.Second

func newTracker(t testing.TB, c clients, namespace string) *tracker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr := &tracker{pods: map[string]*podState{}, cancel: cancel, list: func(ctx context.Context) (*v1.PodList, error) {
		return c.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	}}
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.observe(obj.(*v1.Pod)) },
		UpdateFunc: func(_, obj any) { tr.observe(obj.(*v1.Pod)) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				tr.mu.Lock()
				delete(tr.pods, pod.Name)
				tr.mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	// The registration's HasSynced: the handler (not only the store) has seen the initial list.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("pod tracker did not sync")
	}
	t.Cleanup(cancel)
	return tr
}

// relist observes every pod of the namespace from one List and forgets the pods it no
// longer has. A pod the watch missed is seen bound at the time of the List (later than it
// was: a slower figure, never a faster one).
func (tr *tracker) relist() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := tr.list(ctx)
	if err != nil {
		return // the next relist tries again; the watch may still deliver
	}
	listed := make(map[string]bool, len(pods.Items))
	for i := range pods.Items {
		listed[pods.Items[i].Name] = true
		tr.observe(&pods.Items[i])
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for name := range tr.pods {
		if !listed[name] {
			delete(tr.pods, name)
		}
	}
}

// poll runs done until it reports true, the timeout passes or it fails, relisting when
// nothing changed for relistAfter (see tracker).
func (tr *tracker) poll(interval, timeout time.Duration, done func() (bool, error)) error {
	last, lastState := time.Now(), ""
	return wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		ok, err := done()
		if ok || err != nil {
			return ok, err
		}
		if state := tr.state(); state != lastState {
			last, lastState = time.Now(), state
		} else if time.Since(last) > relistAfter {
			tr.relist()
			last = time.Now()
			return done()
		}
		return false, nil
	})
}

// state summarises what the tracker knows, to tell whether anything changed.
func (tr *tracker) state() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	bound, refused := 0, 0
	for _, st := range tr.pods {
		if st.node != "" {
			bound++
		}
		if st.unschedulable != "" {
			refused++
		}
	}
	return fmt.Sprintf("%d/%d/%d", len(tr.pods), bound, refused)
}

func (tr *tracker) observe(pod *v1.Pod) {
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	st := tr.pods[pod.Name]
	if st == nil {
		st = &podState{}
		tr.pods[pod.Name] = st
	}
	if pod.Spec.NodeName != "" && st.node == "" {
		st.node, st.boundAt = pod.Spec.NodeName, now
	}
	st.unschedulable = ""
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			st.unschedulable = c.Message
		}
	}
}

// count returns the number of pods and of bound pods.
func (tr *tracker) count() (pods, bound int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, st := range tr.pods {
		if st.node != "" {
			bound++
		}
	}
	return len(tr.pods), bound
}

// waitCount waits until the tracker has seen exactly `pods` pods of which `bound` are bound;
// alive is checked on every poll, so a crashed scheduler fails at once.
func (tr *tracker) waitCount(pods, bound int, timeout time.Duration, alive func() error) error {
	err := tr.poll(20*time.Millisecond, timeout, func() (bool, error) {
		if alive != nil {
			if err := alive(); err != nil {
				return false, err
			}
		}
		p, b := tr.count()
		return p == pods && b == bound, nil
	})
	if err != nil {
		p, b := tr.count()
		return fmt.Errorf("waiting for %d pods with %d bound (have %d, %d bound; %s): %w", pods, bound, p, b, tr.sample(), err)
	}
	return nil
}

// sample describes a few unbound pods, for failure messages.
func (tr *tracker) sample() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for name, st := range tr.pods {
		if st.node == "" {
			out = append(out, fmt.Sprintf("%s: %q", name, st.unschedulable))
		}
	}
	sort.Strings(out)
	if len(out) > 3 {
		out = append(out[:3], fmt.Sprintf("+%d more", len(out)-3))
	}
	return strings.Join(out, "; ")
}

// snapshot returns a copy of the pods' states.
func (tr *tracker) snapshot(names []string) map[string]podState {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make(map[string]podState, len(names))
	for _, n := range names {
		if st, ok := tr.pods[n]; ok {
			out[n] = *st
		}
	}
	return out
}

// bindWindow returns the first and the last bind time among all pods.
func (tr *tracker) bindWindow() (first, last time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, st := range tr.pods {
		if st.node == "" {
			continue
		}
		if first.IsZero() || st.boundAt.Before(first) {
			first = st.boundAt
		}
		if st.boundAt.After(last) {
			last = st.boundAt
		}
	}
	return first, last
}

// placements returns pod -> node of the bound pods.
func (tr *tracker) placements() map[string]string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string]string{}
	for name, st := range tr.pods {
		if st.node != "" {
			out[name] = st.node
		}
	}
	return out
}
