package podstatus

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestWriter(t *testing.T) {
	pending := st.MakePod().Namespace("ns").Name("pending").Obj()
	already := st.MakePod().Namespace("ns").Name("already").NominatedNodeName("node-1").Obj()
	bound := st.MakePod().Namespace("ns").Name("bound").Node("node-2").Obj()
	tests := []struct {
		name   string
		pod    *v1.Pod
		wishes []string
		cancel bool
		// want is the nominated node the API has afterwards; writes counts the UpdateStatus calls.
		want   string
		writes int
	}{
		{name: "a wish is written", pod: pending, wishes: []string{"node-1"}, want: "node-1", writes: 1},
		{name: "the last wish wins", pod: pending, wishes: []string{"node-1", "node-3"}, want: "node-3", writes: 1},
		{name: "nothing to write", pod: already, wishes: []string{"node-1"}, want: "node-1"},
		{name: "a bound pod is left alone", pod: bound, wishes: []string{"node-1"}},
		{name: "a cancelled wish is not written", pod: pending, wishes: []string{"node-1"}, cancel: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := fake.NewClientset(tt.pod)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if err := indexer.Add(tt.pod); err != nil {
				t.Fatal(err)
			}
			w := NewWriter("test", client, corelisters.NewPodLister(indexer), SetNominatedNode)
			for _, wish := range tt.wishes {
				w.Set(tt.pod, wish)
			}
			if tt.cancel {
				w.Cancel(tt.pod)
			}
			client.ClearActions()
			// The queue holds the pod once however many wishes came.
			if !w.next(ctx) {
				t.Fatal("queue shut down")
			}
			if w.queue.Len() != 0 {
				t.Errorf("queue length %d after one write, want 0", w.queue.Len())
			}
			writes := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "update" && a.GetSubresource() == "status" {
					writes++
				}
			}
			if writes != tt.writes {
				t.Errorf("status writes = %d, want %d", writes, tt.writes)
			}
			got, err := client.CoreV1().Pods("ns").Get(ctx, tt.pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Status.NominatedNodeName); diff != "" {
				t.Errorf("nominated node (-want,+got):\n%s", diff)
			}
			if wish, ok := w.Pending("ns", tt.pod.Name); ok {
				t.Errorf("wish %q still pending after its write", wish)
			}
		})
	}
}

// TestSetNominatedNode: it sets and clears status.nominatedNodeName, and asks for no write
// when the field already holds the wish.
func TestSetNominatedNode(t *testing.T) {
	tests := []struct {
		name, nominated, wish string
		want                  *v1.PodStatus
	}{
		{name: "set", wish: "node-1", want: &v1.PodStatus{NominatedNodeName: "node-1"}},
		{name: "clear", nominated: "node-1", want: &v1.PodStatus{}},
		{name: "move", nominated: "node-1", wish: "node-2", want: &v1.PodStatus{NominatedNodeName: "node-2"}},
		{name: "unchanged", nominated: "node-1", wish: "node-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Status: v1.PodStatus{NominatedNodeName: tc.nominated}}
			if diff := cmp.Diff(tc.want, SetNominatedNode(pod, tc.wish)); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
			if pod.Status.NominatedNodeName != tc.nominated {
				t.Errorf("the pod itself changed to %q", pod.Status.NominatedNodeName)
			}
		})
	}
}
