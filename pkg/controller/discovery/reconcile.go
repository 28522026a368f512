package discovery

import (
	"context"
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	topologylisters "github.com/hypernode-dev/hypernode-scheduler/pkg/client/listers/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/eventlog"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/metrics"
)

// ReasonConflict is the Event reason of a discovered HyperNode whose name is taken by a
// HyperNode the source does not own.
const ReasonConflict = "HyperNodeConflict"

// Reconciler makes the HyperNodes a source owns equal to the ones it wants: it creates,
// updates and deletes only HyperNodes that carry the source's label, and never touches a
// HyperNode that does not, even one with a wanted name (a reported conflict).
type Reconciler struct {
	client topologyclient.Interface
	lister topologylisters.HyperNodeLister
	events *eventlog.Recorder
}

// Summary counts what one reconcile did.
type Summary struct {
	Created, Updated, Deleted, Unchanged int
	// Conflicts are wanted names taken by HyperNodes the source does not own.
	Conflicts []string
}

// Changed reports whether the reconcile wrote anything.
func (s Summary) Changed() bool { return s.Created+s.Updated+s.Deleted > 0 }

func (s Summary) String() string {
	return fmt.Sprintf("%d created, %d updated, %d deleted, %d unchanged", s.Created, s.Updated, s.Deleted, s.Unchanged)
}

// Reconcile applies a source's wanted HyperNodes. Parents are created after their children
// and deleted before them, so the scheduler sees as few missing members as possible. API
// errors are returned joined after every other HyperNode was handled.
func (r *Reconciler) Reconcile(ctx context.Context, sourceName string, wanted []*topologyv1alpha1.HyperNode) (Summary, error) {
	logger := klog.FromContext(ctx)
	var sum Summary
	var errs []error
	defer func() {
		metrics.HyperNodeWrites.WithLabelValues(sourceName, metrics.OperationCreate).Add(float64(sum.Created))
		metrics.HyperNodeWrites.WithLabelValues(sourceName, metrics.OperationUpdate).Add(float64(sum.Updated))
		metrics.HyperNodeWrites.WithLabelValues(sourceName, metrics.OperationDelete).Add(float64(sum.Deleted))
	}()
	if dup := duplicateName(wanted); dup != "" {
		// Two HyperNodes of one name would overwrite each other on every pass.
		return sum, fmt.Errorf("discovery source %s wants two HyperNodes named %s; nothing was written", sourceName, dup)
	}
	owned, err := r.lister.List(labels.SelectorFromSet(labels.Set{source.Label: sourceName}))
	if err != nil {
		return sum, err
	}
	ownedByName := make(map[string]*topologyv1alpha1.HyperNode, len(owned))
	for _, hn := range owned {
		ownedByName[hn.Name] = hn
	}
	wantedNames := map[string]bool{}
	ordered := append([]*topologyv1alpha1.HyperNode(nil), wanted...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Spec.Tier < ordered[j].Spec.Tier })
	// taken are the wanted names held by HyperNodes the source does not own, and the parents
	// left without members: no wanted parent may list them (children come first).
	taken := map[string]bool{}
	for _, want := range ordered {
		if want = withoutTaken(want, taken); want == nil {
			continue
		}
		wantedNames[want.Name] = true
		want = want.DeepCopy()
		if want.Labels == nil {
			want.Labels = map[string]string{}
		}
		want.Labels[source.Label] = sourceName
		current := ownedByName[want.Name]
		if current == nil {
			// Not owned: free, or taken by a HyperNode of somebody else. The lister may lag
			// behind our own create of a moment ago, so a taken name is read from the API.
			other, err := r.lister.Get(want.Name)
			if apierrors.IsNotFound(err) {
				_, err = r.client.TopologyV1alpha1().HyperNodes().Create(ctx, want, metav1.CreateOptions{})
				if err == nil {
					sum.Created++
					logger.V(2).Info("Created HyperNode", "hyperNode", want.Name, "tier", want.Spec.Tier)
					continue
				}
				if !apierrors.IsAlreadyExists(err) {
					errs = append(errs, fmt.Errorf("creating HyperNode %s: %w", want.Name, err))
					continue
				}
				other, err = r.client.TopologyV1alpha1().HyperNodes().Get(ctx, want.Name, metav1.GetOptions{})
			}
			if err != nil {
				taken[want.Name] = true // whose it is is unknown: no parent may claim it
				errs = append(errs, fmt.Errorf("reading HyperNode %s: %w", want.Name, err))
				continue
			}
			if other.Labels[source.Label] != sourceName {
				taken[want.Name] = true
				sum.Conflicts = append(sum.Conflicts, want.Name)
				r.reportConflict(other, sourceName, want)
				continue
			}
			current = other
		}
		if !needsUpdate(current, want) {
			sum.Unchanged++
			continue
		}
		update := current.DeepCopy()
		update.Spec = want.Spec
		if update.Labels == nil {
			update.Labels = map[string]string{}
		}
		update.Labels[source.Label] = sourceName
		if update.Annotations == nil {
			update.Annotations = map[string]string{}
		}
		update.Annotations[source.PathAnnotation] = want.Annotations[source.PathAnnotation]
		if _, err := r.client.TopologyV1alpha1().HyperNodes().Update(ctx, update, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("updating HyperNode %s: %w", want.Name, err))
			continue
		}
		sum.Updated++
		logger.V(2).Info("Updated HyperNode", "hyperNode", want.Name)
	}
	sort.SliceStable(owned, func(i, j int) bool { return owned[i].Spec.Tier > owned[j].Spec.Tier })
	for _, hn := range owned {
		if wantedNames[hn.Name] {
			continue
		}
		uid := hn.UID
		err := r.client.TopologyV1alpha1().HyperNodes().Delete(ctx, hn.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			sum.Deleted++
			logger.V(2).Info("Deleted HyperNode", "hyperNode", hn.Name)
		case apierrors.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("deleting HyperNode %s: %w", hn.Name, err))
		}
	}
	return sum, errors.Join(errs...)
}

// withoutTaken returns want without the HyperNode members whose names are taken (a
// parent must not claim somebody else's HyperNode: it would get two parents and be
// excluded, or be grafted into the discovered tree), or nil when that leaves a parent
// without members, which is then taken too.
func withoutTaken(want *topologyv1alpha1.HyperNode, taken map[string]bool) *topologyv1alpha1.HyperNode {
	kept := want.Spec.Members[:0:0]
	for _, m := range want.Spec.Members {
		if m.Type == topologyv1alpha1.MemberTypeHyperNode && m.Selector.ExactMatch != nil && taken[m.Selector.ExactMatch.Name] {
			continue
		}
		kept = append(kept, m)
	}
	switch {
	case len(kept) == len(want.Spec.Members):
		return want
	case len(kept) == 0:
		taken[want.Name] = true
		return nil
	}
	want = want.DeepCopy()
	want.Spec.Members = kept
	return want
}

// duplicateName returns a name that two wanted HyperNodes share, or "".
func duplicateName(wanted []*topologyv1alpha1.HyperNode) string {
	seen := make(map[string]bool, len(wanted))
	for _, hn := range wanted {
		if seen[hn.Name] {
			return hn.Name
		}
		seen[hn.Name] = true
	}
	return ""
}

// needsUpdate reports whether an owned HyperNode differs from the wanted one in what the
// source decides: the spec, the source label and the path annotation.
func needsUpdate(current, want *topologyv1alpha1.HyperNode) bool {
	return !equality.Semantic.DeepEqual(current.Spec, want.Spec) ||
		current.Labels[source.Label] != want.Labels[source.Label] ||
		current.Annotations[source.PathAnnotation] != want.Annotations[source.PathAnnotation]
}

// reportConflict records an Event on the HyperNode that holds a wanted name.
func (r *Reconciler) reportConflict(other *topologyv1alpha1.HyperNode, sourceName string, want *topologyv1alpha1.HyperNode) {
	owner := "it was not made by a discovery source"
	if o := other.Labels[source.Label]; o != "" {
		owner = fmt.Sprintf("it belongs to the source %s", o)
	}
	r.events.Eventf(hyperNodeRef(other), v1.EventTypeWarning, ReasonConflict, "Discover",
		"the discovery source %s wants a HyperNode of this name (%s), but %s (no label %s=%s), so it is left alone; delete or rename it to let the source create its own",
		sourceName, want.Annotations[source.PathAnnotation], owner, source.Label, sourceName)
}

func hyperNodeRef(hn *topologyv1alpha1.HyperNode) *v1.ObjectReference {
	return &v1.ObjectReference{
		APIVersion: topologyv1alpha1.SchemeGroupVersion.String(),
		Kind:       "HyperNode",
		Name:       hn.Name,
		UID:        hn.UID,
	}
}
