package gang

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// startupMessage is PreEnqueue's answer to a member met before the registry read its
// informers' initial lists.
const startupMessage = "waiting for the scheduler to read the PodGroups and their members (it is starting)"

// maxStartupWait bounds the hold, counted from the first member held (with
// DelayCacheUntilActive a standby's informers start only when it leads): a registry that
// never syncs (PodGroups not readable) must not keep members silent; they are then judged on
// what the registry has, as before.
const maxStartupWait = 2 * time.Minute

// startupGate holds the gang members PreEnqueue meets before the PodGroup registry has read
// its initial lists. kube-scheduler's queue and the registry read the same pods through
// different informer handlers, so after a restart the queue meets members of a complete gang
// that the registry has not counted yet: answering then would write a "waiting for members"
// condition and Event per member, only to clear them a moment later. Held members are
// activated together once the registry has synced.
type startupGate struct {
	open atomic.Bool
	mu   sync.Mutex
	held map[string]*v1.Pod
	// firstHeld is when the first member was held (zero before), by clock.
	firstHeld time.Time
	clock     clock.PassiveClock
}

// hold keeps the pod back if the gate is still closed.
func (s *startupGate) hold(pod *v1.Pod) bool {
	if s.open.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open.Load() {
		return false
	}
	if s.firstHeld.IsZero() {
		s.firstHeld = s.clock.Now()
	}
	s.held[pod.Namespace+"/"+pod.Name] = pod
	return true
}

// heldFor is how long the first held member has waited (0 while none is held).
func (s *startupGate) heldFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstHeld.IsZero() {
		return 0
	}
	return s.clock.Since(s.firstHeld)
}

// release opens the gate and returns the members it held.
func (s *startupGate) release() map[string]*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open.Store(true)
	held := s.held
	s.held = nil
	return held
}

// watchStartup installs a startup gate that opens when synced reports true, or once its first
// member has waited maxWait. A registry already synced needs none.
func (g *Gang) watchStartup(ctx context.Context, synced func() bool, maxWait time.Duration) {
	gate := &startupGate{held: map[string]*v1.Pod{}, clock: g.clock}
	g.startup = gate
	if synced() {
		gate.open.Store(true)
		return
	}
	go func() {
		logger := klog.FromContext(ctx)
		start := time.Now()
		timedOut := false
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
			timedOut = gate.heldFor() >= maxWait
			return synced() || timedOut, nil
		})
		if err != nil {
			return // the scheduler is stopping
		}
		if !synced() && timedOut {
			logger.Error(nil, "The PodGroup registry has not read its informers' lists; gang members are judged on what it has", "waited", maxWait)
		}
		held := gate.release()
		logger.V(2).Info("Gang members held while the PodGroup registry synced are activated", "members", len(held), "waited", time.Since(start))
		if len(held) > 0 {
			// PreEnqueue runs under the queue's lock, so every held member is in the queue's
			// unschedulable set by now and Activate finds it.
			g.handle.Activate(logger, held)
		}
	}()
}
