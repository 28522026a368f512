package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podstatus"
)

// ReasonWaitingForGang is the PodScheduled condition reason of members that the Gang plugin
// holds back before scheduling (their PodGroup is missing or has too few members). Like
// SchedulingGated, it tells cluster autoscalers that more nodes would not help.
const ReasonWaitingForGang = "SchedulingGated"

// conditionWriter writes the PodScheduled condition of members held back in PreEnqueue.
// kube-scheduler writes that condition only for pods that went through a scheduling cycle;
// a pod gated by a PreEnqueue plugin would otherwise show nothing. Writes are asynchronous
// (PreEnqueue must not call the API) and skipped when the pod already says the same. A
// member that passes PreEnqueue cancels its wish, so that the write can never overwrite the
// condition the scheduler writes afterwards (a conflict retries, and by then the wish is gone).
type conditionWriter struct {
	*podstatus.Writer
}

func newConditionWriter(client clientset.Interface, pods corelisters.PodLister) *conditionWriter {
	return &conditionWriter{podstatus.NewWriter("gang-pod-conditions", client, pods, conditionUpdate)}
}

// set asks for the pod's PodScheduled condition to carry message.
func (w *conditionWriter) set(pod *v1.Pod, message string) {
	if hasCondition(pod, message) {
		return
	}
	w.Set(pod, message)
}

// clear cancels a pending write: the member passed PreEnqueue, and from now on the scheduler
// owns its PodScheduled condition.
func (w *conditionWriter) clear(pod *v1.Pod) { w.Cancel(pod) }

func hasCondition(pod *v1.Pod, message string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled {
			return c.Status == v1.ConditionFalse && c.Reason == ReasonWaitingForGang && c.Message == message
		}
	}
	return false
}

// conditionUpdate sets the PodScheduled condition of a held-back member.
func conditionUpdate(pod *v1.Pod, message string) *v1.PodStatus {
	if hasCondition(pod, message) {
		return nil
	}
	status := pod.Status.DeepCopy()
	condition := v1.PodCondition{
		Type:               v1.PodScheduled,
		Status:             v1.ConditionFalse,
		Reason:             ReasonWaitingForGang,
		Message:            message,
		LastTransitionTime: metav1.NewTime(time.Now()),
	}
	for i := range status.Conditions {
		if status.Conditions[i].Type == v1.PodScheduled {
			status.Conditions[i] = condition
			return status
		}
	}
	status.Conditions = append(status.Conditions, condition)
	return status
}
