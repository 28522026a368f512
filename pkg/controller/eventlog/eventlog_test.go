package eventlog

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// TestEventf: identical Events within the window are recorded once, different notes each
// (the newest note is never folded into an older one), and cluster-scoped objects' Events go
// to the default namespace.
func TestEventf(t *testing.T) {
	kube := kubefake.NewClientset()
	r := New(kube.EventsV1(), "hypernode.dev/hypernode-controller", "test")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { now = now.Add(time.Second); return now }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	cm := &v1.ObjectReference{Kind: "ConfigMap", Namespace: "ns", Name: "cm"}
	hn := &v1.ObjectReference{Kind: "HyperNode", Name: "leaf-0"}
	r.Eventf(cm, v1.EventTypeWarning, "UFMCertificateRejected", "Discover", "x509: unknown authority")
	r.Eventf(cm, v1.EventTypeWarning, "UFMCertificateRejected", "Discover", "x509: unknown authority") // suppressed
	r.Eventf(cm, v1.EventTypeWarning, "UFMCertificateRejected", "Discover", "x509: wrong host")
	r.Eventf(hn, v1.EventTypeWarning, "HyperNodeConflict", "Discover", "taken")
	now = now.Add(Window)
	r.Eventf(cm, v1.EventTypeWarning, "UFMCertificateRejected", "Discover", "x509: unknown authority") // again after the window

	var got []string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		got = nil
		for _, ns := range []string{"ns", metav1.NamespaceDefault} {
			list, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, ev := range list.Items {
				got = append(got, ns+" "+ev.Regarding.Name+" "+ev.Reason+": "+ev.Note)
			}
		}
		return len(got) >= 4, nil
	})
	if err != nil {
		t.Fatalf("Events %v", got)
	}
	want := []string{
		"ns cm UFMCertificateRejected: x509: unknown authority",
		"ns cm UFMCertificateRejected: x509: unknown authority",
		"ns cm UFMCertificateRejected: x509: wrong host",
		"default leaf-0 HyperNodeConflict: taken",
	}
	if diff := cmp.Diff(want, got, cmpSort()); diff != "" {
		t.Errorf("Events (-want,+got):\n%s", diff)
	}
}

func cmpSort() cmp.Option {
	return cmpopts.SortSlices(func(a, b string) bool { return a < b })
}
