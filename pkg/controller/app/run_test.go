package app

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// leaseTest is a replica's Lease lock on a fake API, with short leader-election timings.
func leaseTest(t *testing.T) (context.Context, *kubefake.Clientset, *resourcelock.LeaseLock, *Options) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancel)
	kube := kubefake.NewClientset()
	o := NewOptions()
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Second, time.Second, 100*time.Millisecond
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: LeaseName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "replica-a"},
	}
	return ctx, kube, lock, o
}

func holder(ctx context.Context, kube *kubefake.Clientset, namespace string) (string, error) {
	lease, err := kube.CoordinationV1().Leases(namespace).Get(ctx, LeaseName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// TestControllersThatStopReleaseTheLease: controllers that stop while this replica leads,
// with an error or without one, end lead with that error and leave the Lease released, so a
// standby takes over at once instead of waiting behind a leader that does nothing.
func TestControllersThatStopReleaseTheLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runErr  error
		wantErr string
	}{
		{"an error", errors.New("informers failed"), "the controllers stopped while leading; the Lease is released: informers failed"},
		{"no error", nil, "the controllers stopped while leading; the Lease is released: they returned without an error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, kube, lock, o := leaseTest(t)
			ran := 0
			err := lead(ctx, o, lock, nil, func(ctx context.Context) error {
				ran++
				// Not t.Fatal: this runs in the leader elector's goroutine.
				if h, err := holder(ctx, kube, o.Namespace); err != nil || h != "replica-a" {
					t.Errorf("running the controllers while the Lease is held by %q (%v)", h, err)
				}
				return tc.runErr
			})
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("lead: %v, want %q", err, tc.wantErr)
			}
			if ran != 1 {
				t.Errorf("the controllers ran %d times, want 1", ran)
			}
			if h, err := holder(ctx, kube, o.Namespace); err != nil || h != "" {
				t.Errorf("Lease held by %q (%v) after the controllers stopped, want it released", h, err)
			}
		})
	}
}

// TestLostLeaseEndsLead: a Lease taken over by another replica stops the controllers and
// ends lead with ErrLeadershipLost (the process exits and restarts as a standby).
func TestLostLeaseEndsLead(t *testing.T) {
	ctx, kube, lock, o := leaseTest(t)
	// The fake API does not check resourceVersions: once replica-b holds the Lease, replica-a's
	// writes conflict, as its stale resourceVersion would on a real API server.
	kube.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		lease := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		current, err := kube.Tracker().Get(action.GetResource(), lease.Namespace, lease.Name)
		if err == nil && ptr.Deref(current.(*coordinationv1.Lease).Spec.HolderIdentity, "") == "replica-b" &&
			ptr.Deref(lease.Spec.HolderIdentity, "") != "replica-b" {
			return true, nil, apierrors.NewConflict(action.GetResource().GroupResource(), lease.Name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	err := lead(ctx, o, lock, nil, func(ctx context.Context) error {
		lease, err := kube.CoordinationV1().Leases(o.Namespace).Get(ctx, LeaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// Another replica writes itself into the Lease, renewed for an hour.
		lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-b"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}
		if _, err := kube.CoordinationV1().Leases(o.Namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			return err
		}
		<-ctx.Done() // the controllers run until leading stops
		return nil
	})
	if !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("lead: %v, want %v", err, ErrLeadershipLost)
	}
	if h, err := holder(ctx, kube, o.Namespace); err != nil || h != "replica-b" {
		t.Errorf("Lease held by %q (%v), want replica-b's to stay", h, err)
	}
}
