package podgroup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestParseHoldAfter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		value   *string
		want    HoldAfter
		wantErr string
	}{
		{name: "absent: the scheduler's default"},
		{name: "a duration", value: ptr.To("90s"), want: HoldAfter{Set: true, Wait: 90 * time.Second}},
		{name: "at once", value: ptr.To("0s"), want: HoldAfter{Set: true}},
		{name: "never", value: ptr.To("never"), want: HoldAfter{Set: true, Never: true}},
		{name: "no unit", value: ptr.To("90"), wantErr: `metadata.annotations[hypernode.dev/hold-after]: Invalid value: "90": must be a duration of 0s or more, such as "90s" or "5m", or "never"`},
		{name: "negative", value: ptr.To("-1m"), wantErr: `metadata.annotations[hypernode.dev/hold-after]: Invalid value: "-1m": must be a duration of 0s or more, such as "90s" or "5m", or "never"`},
		{name: "a word", value: ptr.To("soon"), wantErr: `metadata.annotations[hypernode.dev/hold-after]: Invalid value: "soon": must be a duration of 0s or more, such as "90s" or "5m", or "never"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			annotations := map[string]string{}
			if tc.value != nil {
				annotations[HoldAfterAnnotation] = *tc.value
			}
			got, err := ParseHoldAfter(annotations)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsed (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestHoldRecordRoundTrip: a record reads back as written; an unreadable or empty one is an
// error, never a hold of nothing.
func TestHoldRecordRoundTrip(t *testing.T) {
	since := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	r := &HoldRecord{Domain: "spine-1", Tier: 2, Nodes: []string{"n-1", "n-2"}, Priority: 10, Since: since}
	got, err := ParseHoldRecord(map[string]string{HoldAnnotation: r.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("round trip (-want,+got):\n%s", diff)
	}
	if got, err := ParseHoldRecord(nil); got != nil || err != nil {
		t.Errorf("no annotation: %v, %v; want nil, nil", got, err)
	}
	for value, want := range map[string]string{
		`{`: "annotation hypernode.dev/hold: unexpected end of JSON input",
		`{"nodes":[],"since":"2026-12-06T09:00:00Z"}`: "annotation hypernode.dev/hold: a hold names its nodes and when it began",
		`{"nodes":["n-1"]}`:                           "annotation hypernode.dev/hold: a hold names its nodes and when it began",
	} {
		if _, err := ParseHoldRecord(map[string]string{HoldAnnotation: value}); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", value, err, want)
		}
	}
}
