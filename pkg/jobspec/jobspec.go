// Package jobspec derives, from the objects a user would submit, the gang the scheduler will
// see: the scheduler-plugins PodGroup and the member pods, named and labelled as the job's
// controller creates them (the batch Job controller, Kubeflow's training-operator and
// mpi-operator, KubeRay). kubectl hypernode plan reads a file through it and plans the gang
// without creating anything.
package jobspec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/yaml"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// Job is a gang derived from a submission.
type Job struct {
	// Kind is the submitted job's kind (PodGroup for a PodGroup with its pods), Namespace and
	// Name its own.
	Kind      string
	Namespace string
	Name      string
	// PodGroup is the PodGroup the scheduler will read: from the file, from the cluster, or
	// built as the job's controller builds it (PodGroupFrom says which).
	PodGroup     *schedulingv1alpha1.PodGroup
	PodGroupFrom string
	// Members are the pods the controller creates at once, named as it names them (a batch
	// Job's pods, whose names end in a random suffix, are named job-INDEX or job-N).
	Members []*v1.Pod
	// Native: the gang is Kubernetes' own pod group; PodGroup is then its view
	// (podgroup.Native.View) and Members are in the view's PodGroup (native.go).
	Native bool
}

// AnnotatePodGroup sets an annotation on the job's PodGroup (a copy: the PodGroup may be the
// cluster's), as its user would once the PodGroup exists.
func (j *Job) AnnotatePodGroup(key, value string) {
	pg := j.PodGroup.DeepCopy()
	if pg.Annotations == nil {
		pg.Annotations = map[string]string{}
	}
	pg.Annotations[key] = value
	j.PodGroup = pg
}

// Where a Job's PodGroup comes from.
const (
	FromFile       = "file"
	FromCluster    = "cluster"
	FromController = "controller"
)

// Known lists the kinds Derive knows, as its errors name them.
const Known = "PodGroup (scheduling.x-k8s.io/v1alpha1) with its Pods or a PodTemplate, PodGroup (scheduling.k8s.io/v1beta1) with its Pods, " +
	"Job (batch/v1) with a PodGroup or spec.scheduling, " +
	"PyTorchJob (kubeflow.org/v1), MPIJob (kubeflow.org/v2beta1), RayCluster (ray.io/v1)"

// ErrUnknownKind is wrapped by the errors for objects of a kind Derive does not know.
var ErrUnknownKind = errors.New("unknown kind")

// Object is one decoded document.
type Object = unstructured.Unstructured

// LookupError is a failure to read the cluster while deriving (not a problem of the input).
type LookupError struct{ Err error }

func (e *LookupError) Error() string { return e.Err.Error() }
func (e *LookupError) Unwrap() error { return e.Err }

// PodGroupLookup returns the PodGroup namespace/name of the cluster (nil, nil when there is
// none).
type PodGroupLookup func(namespace, name string) (*schedulingv1alpha1.PodGroup, error)

// inert are the kinds (group/Kind) a job's file often carries that create no pod: they are
// left alone.
var inert = map[string]bool{"/Service": true, "/ConfigMap": true, "/Secret": true, "/ServiceAccount": true,
	"/PersistentVolumeClaim": true, "/Namespace": true, "scheduling.k8s.io/PriorityClass": true,
	"policy/PodDisruptionBudget": true, "resource.k8s.io/ResourceClaimTemplate": true, "resource.k8s.io/ResourceClaim": true,
	"networking.k8s.io/NetworkPolicy": true, "rbac.authorization.k8s.io/Role": true, "rbac.authorization.k8s.io/RoleBinding": true}

// Read decodes the YAML or JSON documents of r (a List's items count as documents), in order.
func Read(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(raw) == 0 {
			continue // an empty document between two "---"
		}
		u := &unstructured.Unstructured{Object: raw}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("document %d: an object needs apiVersion and kind", doc)
		}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, errors.New("no object in the input")
	}
	return out, nil
}

// ReadBytes is Read of a byte slice.
func ReadBytes(data []byte) ([]*unstructured.Unstructured, error) {
	return Read(bytes.NewReader(data))
}

// Derive returns the gang the objects make. Objects without a namespace are in namespace.
// A Job's PodGroup, when the file has none, is looked up in the cluster.
func Derive(objs []*unstructured.Unstructured, namespace string, lookup PodGroupLookup) (*Job, error) {
	in := &input{namespace: namespace, lookup: lookup, podGroups: map[string]*schedulingv1alpha1.PodGroup{}}
	var job *unstructured.Unstructured
	for _, u := range objs {
		if u.GetNamespace() == "" {
			u.SetNamespace(namespace)
		}
		gv := u.GroupVersionKind().GroupVersion().String()
		switch kindOf(u) {
		case "scheduling.x-k8s.io/PodGroup":
			if gv != schedulingv1alpha1.SchemeGroupVersion.String() {
				return nil, fmt.Errorf("PodGroup %s: apiVersion %s; the scheduler reads %s", u.GetName(), gv, schedulingv1alpha1.SchemeGroupVersion)
			}
			pg := &schedulingv1alpha1.PodGroup{}
			if err := convert(u, pg); err != nil {
				return nil, err
			}
			in.podGroups[pg.Namespace+"/"+pg.Name] = pg
			in.podGroupOrder = append(in.podGroupOrder, pg)
		case "scheduling.k8s.io/PodGroup":
			if gv != schedulingv1beta1.SchemeGroupVersion.String() {
				return nil, fmt.Errorf("PodGroup %s: apiVersion %s; the scheduler reads %s", u.GetName(), gv, schedulingv1beta1.SchemeGroupVersion)
			}
			pg := &schedulingv1beta1.PodGroup{}
			if err := convert(u, pg); err != nil {
				return nil, err
			}
			in.natives = append(in.natives, pg)
		case "scheduling.k8s.io/Workload":
			// The PodGroups the scheduler reads are made from it; the file gives them.
			if err := convert(u, &schedulingv1beta1.Workload{}); err != nil {
				return nil, err
			}
		case "/Pod":
			p := &v1.Pod{}
			if err := convert(u, p); err != nil {
				return nil, err
			}
			in.pods = append(in.pods, p)
		case "/PodTemplate":
			t := &v1.PodTemplate{}
			if err := convert(u, t); err != nil {
				return nil, err
			}
			in.templates = append(in.templates, t)
		case "batch/Job", "kubeflow.org/PyTorchJob", "kubeflow.org/MPIJob", "ray.io/RayCluster":
			if want := jobVersions[kindOf(u)]; gv != want {
				return nil, fmt.Errorf("%w %s (%s) of %q: plan knows %s as %s", ErrUnknownKind, u.GetKind(), gv, u.GetName(), u.GetKind(), want)
			}
			if u.GetName() == "" {
				return nil, fmt.Errorf("a %s needs metadata.name: its controller names its pods and PodGroup after it", u.GetKind())
			}
			if job != nil {
				return nil, fmt.Errorf("the input has two jobs (%s %s and %s %s): plan one at a time", job.GetKind(), job.GetName(), u.GetKind(), u.GetName())
			}
			job = u
		default:
			if inert[kindOf(u)] {
				continue
			}
			return nil, fmt.Errorf("%w %s (%s) of %q: plan knows %s", ErrUnknownKind, u.GetKind(), u.GetAPIVersion(), u.GetName(), Known)
		}
	}
	var out *Job
	var err error
	switch {
	case job == nil && len(in.natives) > 0 && len(in.podGroupOrder) == 0:
		out, err = in.nativeGroupWithPods()
	case job == nil && len(in.natives) > 0:
		return nil, fmt.Errorf("the input has a PodGroup of each API (%s and %s): plan one group at a time", in.podGroupOrder[0].Name, in.natives[0].Name)
	case job == nil:
		out, err = in.podGroupWithPods()
	case len(in.pods) > 0:
		return nil, fmt.Errorf("the input has Pods next to %s %s: its controller makes its own pods", job.GetKind(), job.GetName())
	default:
		switch kindOf(job) {
		case "batch/Job":
			out, err = in.batchJob(job)
		case "kubeflow.org/PyTorchJob":
			out, err = in.pyTorchJob(job)
		case "kubeflow.org/MPIJob":
			out, err = in.mpiJob(job)
		case "ray.io/RayCluster":
			out, err = in.rayCluster(job)
		}
	}
	if err != nil {
		return nil, err
	}
	for _, p := range out.Members {
		if p.Labels[schedulingv1alpha1.PodGroupLabel] != out.PodGroup.Name {
			return nil, fmt.Errorf("%s %s: pod %s is not in PodGroup %s", out.Kind, out.Name, p.Name, out.PodGroup.Name)
		}
	}
	return out, nil
}

// jobVersions are the API versions of the job kinds plan knows (those whose controllers it
// follows: mpi-operator's MPIJob, not training-operator's kubeflow.org/v1 one).
var jobVersions = map[string]string{"batch/Job": "batch/v1", "kubeflow.org/PyTorchJob": "kubeflow.org/v1",
	"kubeflow.org/MPIJob": "kubeflow.org/v2beta1", "ray.io/RayCluster": "ray.io/v1"}

// input is what Derive collected from the objects.
type input struct {
	namespace     string
	lookup        PodGroupLookup
	podGroups     map[string]*schedulingv1alpha1.PodGroup
	podGroupOrder []*schedulingv1alpha1.PodGroup
	natives       []*schedulingv1beta1.PodGroup
	pods          []*v1.Pod
	templates     []*v1.PodTemplate
}

// kindOf is group/Kind.
func kindOf(u *unstructured.Unstructured) string {
	return u.GroupVersionKind().Group + "/" + u.GetKind()
}

// convert reads an object into its typed form, strictly: a field of the wrong type is an
// error naming the object (the API server would refuse it too).
func convert(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, false); err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return checkName(u)
}

// checkName refuses an object without a valid name, as the API server would.
func checkName(u *unstructured.Unstructured) error {
	if problems := validation.IsDNS1123Subdomain(u.GetName()); len(problems) > 0 && u.GetName() != "" {
		return fmt.Errorf("%s %q: the name is not valid: %s", u.GetKind(), u.GetName(), strings.Join(problems, "; "))
	}
	if u.GetName() == "" && u.GetGenerateName() == "" {
		return fmt.Errorf("a %s has no name", u.GetKind())
	}
	return nil
}

// podGroup returns the PodGroup namespace/name of the file, else of the cluster; nil when
// neither has it.
func (in *input) podGroup(namespace, name string) (*schedulingv1alpha1.PodGroup, string, error) {
	if pg := in.podGroups[namespace+"/"+name]; pg != nil {
		return pg, FromFile, nil
	}
	if in.lookup == nil {
		return nil, "", nil
	}
	pg, err := in.lookup(namespace, name)
	if err != nil {
		return nil, "", &LookupError{fmt.Errorf("reading PodGroup %s/%s: %w", namespace, name, err)}
	}
	if pg == nil {
		return nil, "", nil
	}
	return pg, FromCluster, nil
}

// memberOf makes a member pod from a template, as a controller creates it.
func memberOf(t v1.PodTemplateSpec, namespace, name, podGroup string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
	p.Name, p.Namespace, p.UID = name, namespace, types.UID("plan-"+namespace+"-"+name)
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	if podGroup != "" {
		p.Labels[schedulingv1alpha1.PodGroupLabel] = podGroup
	}
	p.Status.Phase = v1.PodPending
	defaultRequests(p)
	return p
}

// defaultRequests does what the API server's defaulting does to a pod's resources: a
// container (or init container) that limits a resource and does not request it requests
// its limit.
func defaultRequests(p *v1.Pod) {
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; ok {
					continue
				}
				if r.Requests == nil {
					r.Requests = v1.ResourceList{}
				}
				r.Requests[name] = q.DeepCopy()
			}
		}
	}
}

// PodOf returns the one Pod (or PodTemplate's pod) of the objects: a pod shape.
func PodOf(objs []*Object) (*v1.Pod, error) {
	if len(objs) != 1 {
		return nil, fmt.Errorf("the input has %d objects; give one Pod or PodTemplate", len(objs))
	}
	u := objs[0]
	switch kindOf(u) {
	case "/Pod":
		p := &v1.Pod{}
		if err := convert(u, p); err != nil {
			return nil, err
		}
		defaultRequests(p)
		return p, nil
	case "/PodTemplate":
		t := &v1.PodTemplate{}
		if err := convert(u, t); err != nil {
			return nil, err
		}
		return memberOf(t.Template, t.Namespace, t.Name, ""), nil
	}
	return nil, fmt.Errorf("%w %s (%s) of %q: a pod shape is a Pod or a PodTemplate", ErrUnknownKind, u.GetKind(), u.GetAPIVersion(), u.GetName())
}
