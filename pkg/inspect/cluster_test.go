package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
)

// notServed makes a fake clientset answer lists of a resource as an apiserver without the CRD.
func notServed(resource string) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, "")
	}
}

func TestLoadWithoutCRDs(t *testing.T) {
	kube, topology, _ := testObjects()
	noHyperNodes := topologyfake.NewSimpleClientset(topology...)
	noHyperNodes.PrependReactor("list", "hypernodes", notServed("hypernodes"))
	_, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...), Topology: noHyperNodes, Scheduling: schedfake.NewSimpleClientset()})
	if !errors.Is(err, ErrHyperNodeCRDMissing) {
		t.Errorf("Load without the HyperNode CRD: err = %v, want ErrHyperNodeCRDMissing", err)
	}

	// Without the PodGroup CRD the tree still works; explain says why it finds nothing.
	noPodGroups := schedfake.NewSimpleClientset()
	noPodGroups.PrependReactor("list", "podgroups", notServed("podgroups"))
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...), Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: noPodGroups})
	if err != nil {
		t.Fatalf("Load without the PodGroup CRD: %v", err)
	}
	if diff := cmp.Diff([]string{"the PodGroup CRD (podgroups.scheduling.x-k8s.io) is not installed"}, c.Tree("").Warnings); diff != "" {
		t.Errorf("tree warnings (-want,+got):\n%s", diff)
	}
	_, err = c.Explain("team-a", "big", "")
	if diff := cmp.Diff("PodGroup not found: team-a/big (the PodGroup CRD (podgroups.scheduling.x-k8s.io) is not installed)", err.Error()); diff != "" {
		t.Errorf("explain error (-want,+got):\n%s", diff)
	}
}

// TestLoadReadsInPages: every list is read in pages (a large cluster is not one response),
// each item kept without its managed fields; a user who may not list PodGroups still gets the
// tree, with a warning.
func TestLoadReadsInPages(t *testing.T) {
	kube, topology, scheduling := testObjects()
	for i := range 1200 {
		p := memberPod("team-e", fmt.Sprintf("plain-%04d", i), "", "", nil)
		delete(p.Labels, schedulingv1alpha1.PodGroupLabel)
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		kube = append(kube, p)
	}
	kubeClient := kubefake.NewClientset(kube...)
	var limits []int64
	// The fake API ignores Limit and Continue: serve the pods in pages as an apiserver does.
	kubeClient.PrependReactor("list", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		opts := action.(k8stesting.ListActionImpl).ListOptions
		limits = append(limits, opts.Limit)
		all, err := kubeClient.Tracker().List(v1.SchemeGroupVersion.WithResource("pods"), v1.SchemeGroupVersion.WithKind("Pod"), "")
		if err != nil {
			return true, nil, err
		}
		items := all.(*v1.PodList).Items
		sort.Slice(items, func(i, j int) bool {
			return items[i].Namespace+"/"+items[i].Name < items[j].Namespace+"/"+items[j].Name
		})
		start := 0
		if opts.Continue != "" {
			start, _ = strconv.Atoi(opts.Continue)
		}
		end := min(start+int(opts.Limit), len(items))
		page := &v1.PodList{Items: items[start:end]}
		if end < len(items) {
			page.Continue = strconv.Itoa(end)
		}
		return true, page, nil
	})
	forbidden := schedfake.NewSimpleClientset(scheduling...)
	forbidden.PrependReactor("list", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.x-k8s.io", Resource: "podgroups"}, "", errors.New("RBAC: access denied"))
	})
	c, err := Load(context.Background(), Clients{Kube: kubeClient, Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: forbidden})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff([]int64{500, 500, 500}, limits); diff != "" {
		t.Errorf("pod list pages' limits (-want,+got):\n%s", diff)
	}
	pods := 0
	for _, o := range kube {
		if _, ok := o.(*v1.Pod); ok {
			pods++
		}
	}
	if len(c.Pods) != pods {
		t.Errorf("%d pods loaded, want %d", len(c.Pods), pods)
	}
	for _, p := range c.Pods {
		if p.ManagedFields != nil {
			t.Fatalf("pod %s kept its managed fields", p.Name)
		}
	}
	want := []string{`PodGroups could not be read: podgroups.scheduling.x-k8s.io is forbidden: RBAC: access denied`}
	if diff := cmp.Diff(want, c.Warnings); diff != "" {
		t.Errorf("warnings (-want,+got):\n%s", diff)
	}
}

// TestExplainReadsOnlyItsPodGroup: explain gets its one PodGroup (a user who may read one
// namespace's PodGroups can explain theirs), tree reads none; a missing PodGroup and a missing
// CRD are told apart.
func TestExplainReadsOnlyItsPodGroup(t *testing.T) {
	kube, topology, scheduling := testObjects()
	for _, tc := range []struct {
		name      string
		opts      LoadOptions
		crd       bool   // the PodGroup CRD is served
		forbid    string // the verb on PodGroups the user may not use
		wantCalls []string
		wantErr   string // Explain's of team-a/big
	}{
		{name: "explain's PodGroup", crd: true, opts: LoadOptions{PodGroup: &types.NamespacedName{Namespace: "team-a", Name: "big"}},
			wantCalls: []string{"get team-a"}},
		{name: "a missing PodGroup", crd: true, opts: LoadOptions{PodGroup: &types.NamespacedName{Namespace: "team-a", Name: "nope"}},
			wantCalls: []string{"get team-a", "list team-a"}, wantErr: "PodGroup not found: team-a/big"},
		{name: "the CRD missing", opts: LoadOptions{PodGroup: &types.NamespacedName{Namespace: "team-a", Name: "big"}},
			wantCalls: []string{"get team-a", "list team-a"},
			wantErr:   "PodGroup not found: team-a/big (the PodGroup CRD (podgroups.scheduling.x-k8s.io) is not installed)"},
		// May get, may not list: a PodGroup not found is not a permission problem.
		{name: "a missing PodGroup, list forbidden", crd: true, forbid: "list", opts: LoadOptions{PodGroup: &types.NamespacedName{Namespace: "team-a", Name: "nope"}},
			wantCalls: []string{"get team-a", "list team-a"}, wantErr: "PodGroup not found: team-a/big"},
		{name: "get forbidden", crd: true, forbid: "get", opts: LoadOptions{PodGroup: &types.NamespacedName{Namespace: "team-a", Name: "big"}},
			wantCalls: []string{"get team-a"},
			wantErr:   `PodGroup not found: team-a/big (PodGroups could not be read: podgroups.scheduling.x-k8s.io "big" is forbidden: RBAC)`},
		{name: "tree", crd: true, opts: LoadOptions{SkipPodGroups: true}, wantErr: "PodGroup not found: team-a/big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := schedfake.NewSimpleClientset(scheduling...)
			var calls []string
			client.PrependReactor("*", "podgroups", func(action k8stesting.Action) (bool, runtime.Object, error) {
				calls = append(calls, action.GetVerb()+" "+action.GetNamespace())
				switch {
				case !tc.crd:
					return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "podgroups"}, "")
				case action.GetVerb() == tc.forbid:
					name := ""
					if get, ok := action.(k8stesting.GetAction); ok {
						name = get.GetName()
					}
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.x-k8s.io", Resource: "podgroups"}, name, errors.New("RBAC"))
				}
				return false, nil, nil
			})
			c, err := LoadWith(context.Background(), Clients{Kube: kubefake.NewClientset(kube...),
				Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: client}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantCalls, calls); diff != "" {
				t.Errorf("PodGroup calls (-want,+got):\n%s", diff)
			}
			_, err = c.Explain("team-a", "big", "")
			if got := fmt.Sprint(err); (tc.wantErr == "" && err != nil) || (tc.wantErr != "" && got != tc.wantErr) {
				t.Errorf("Explain(team-a/big): %v, want %q", err, tc.wantErr)
			}
		})
	}
}
