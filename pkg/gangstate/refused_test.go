package gangstate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRefusedPlanReplannedAtOnceOnlyOnce: a plan refused at a member's planned place is
// replanned at once; the plan made then, if refused too, waits for hints and back-off; a
// failed plan in between, or a plan made later, starts the count again.
func TestRefusedPlanReplannedAtOnceOnlyOnce(t *testing.T) {
	type step struct {
		do        string // "plan", "refuse", "fail"
		wantAgain bool   // for "refuse": whether the gang plans again at once
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{name: "a refused plan is made again at once", steps: []step{{do: "plan"}, {do: "refuse", wantAgain: true}}},
		{name: "the plan made at once is not", steps: []step{{do: "plan"}, {do: "refuse", wantAgain: true}, {do: "plan"}, {do: "refuse"}}},
		{name: "after that, the next plan is", steps: []step{
			{do: "plan"}, {do: "refuse", wantAgain: true}, {do: "plan"}, {do: "refuse"}, {do: "plan"}, {do: "refuse", wantAgain: true}}},
		{name: "a failed plan in between starts again", steps: []step{
			{do: "plan"}, {do: "refuse", wantAgain: true}, {do: "fail"}, {do: "plan"}, {do: "refuse", wantAgain: true}}},
		{name: "no plan: nothing to refuse", steps: []step{{do: "refuse"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newGangEnv(t)
			var got, want []bool
			for _, s := range tc.steps {
				e.locked(func() {
					switch s.do {
					case "plan":
						e.tr.SetPlanLocked(e.key, plan("a", "b", "c"))
					case "fail":
						e.tr.RecordPlanFailureLocked(e.key, e.pods["a"], &PlanFailure{})
					case "refuse":
						_, again := e.tr.DropRefusedPlanLocked(e.key)
						if e.tr.PlanLocked(e.key) != nil {
							t.Error("the refused plan is still the gang's")
						}
						got, want = append(got, again), append(want, s.wantAgain)
					}
				})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plans again at once, per refusal (-want +got):\n%s", diff)
			}
		})
	}
}
