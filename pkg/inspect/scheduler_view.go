package inspect

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// schedulerView collects the pending members' PodScheduled conditions and the latest Events
// on the PodGroup and its members.
func (c *Cluster) schedulerView(namespace, name string, gang podgroup.Gang) SchedulerReport {
	var out SchedulerReport
	type condKey struct{ reason, message string }
	byCond := map[condKey][]string{}
	var condOrder []condKey
	// The UIDs tell the Events of these objects from those of earlier ones of the same names
	// (a PodGroup deleted and created again, the pods of an Indexed Job).
	memberUIDs := map[string]types.UID{}
	for _, m := range gang.Placed {
		memberUIDs[m.Pod.Name] = m.Pod.UID
	}
	for _, m := range gang.Pending {
		memberUIDs[m.Pod.Name] = m.Pod.UID
		for _, cond := range m.Pod.Status.Conditions {
			if cond.Type != v1.PodScheduled || cond.Status != v1.ConditionFalse {
				continue
			}
			k := condKey{cond.Reason, cond.Message}
			if _, seen := byCond[k]; !seen {
				condOrder = append(condOrder, k)
			}
			byCond[k] = append(byCond[k], m.Pod.Name)
		}
	}
	for _, k := range condOrder {
		out.Conditions = append(out.Conditions, ConditionReport{Pods: byCond[k], Reason: k.reason, Message: k.message})
	}

	for _, ev := range c.Events {
		obj := ev.InvolvedObject
		if obj.Namespace != namespace {
			continue
		}
		var uid types.UID
		switch {
		case obj.Kind == "PodGroup" && obj.Name == name && gang.Info.PodGroup != nil:
			uid = gang.Info.PodGroup.UID
		case obj.Kind == "Pod":
			var member bool
			if uid, member = memberUIDs[obj.Name]; !member {
				continue
			}
		default:
			continue
		}
		if obj.UID != "" && uid != "" && obj.UID != uid {
			continue
		}
		if obj.Kind == "Pod" && ev.Reason == "Scheduled" {
			// One per bound member, and the placement tree already shows where each went.
			continue
		}
		count := ev.Count
		if ev.Series != nil {
			count = max(count, ev.Series.Count)
		}
		last := eventTime(ev)
		out.Events = append(out.Events, EventReport{Object: obj.Kind + "/" + obj.Name, Type: ev.Type, Reason: ev.Reason,
			Message: ev.Message, Count: count, LastSeen: last, Age: duration.HumanDuration(c.Now.Sub(last))})
	}
	sort.SliceStable(out.Events, func(i, j int) bool {
		if !out.Events[i].LastSeen.Equal(out.Events[j].LastSeen) {
			return out.Events[i].LastSeen.After(out.Events[j].LastSeen)
		}
		return out.Events[i].Object < out.Events[j].Object
	})
	if len(out.Events) > eventsShown {
		out.Events = out.Events[:eventsShown]
	}
	return out
}

// eventTime is when an Event was last seen, whichever API wrote it: core/v1 recorders set
// lastTimestamp, events.k8s.io/v1 recorders set eventTime and series.
func eventTime(e *v1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if t.IsZero() {
		t = e.FirstTimestamp.Time
	}
	if t.IsZero() {
		t = e.CreationTimestamp.Time
	}
	return t.UTC()
}
