package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// seed001Config is the ConfigMap text of seed 001 ("HyperNode自动发现"), Volcano's example.
const seed001Config = `
networkTopologyDiscovery:
  - source: ufm
    enabled: true
    interval: 10m
    credentials:
      secretRef:
        name: ufm-credentials
        namespace: volcano-system
    config:
      endpoint: https://ufm-server:8080
      insecureSkipVerify: true
  - source: roce
    enabled: false
    interval: 15m
    config:
      endpoint: https://roce-server:9090
  - source: label
    enabled: false
    config: {}
`

func TestParseVolcanoConfig(t *testing.T) {
	parsed, err := Parse(seed001Config, "hypernode-system")
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Source   string
		Enabled  bool
		Interval time.Duration
		Secret   string
		Config   string
		Errs     []string
	}
	var got []entry
	for _, e := range parsed.Entries {
		g := entry{Source: e.Source, Enabled: e.Enabled, Interval: e.Interval.Duration, Config: string(e.Config)}
		if e.Credentials != nil && e.Credentials.SecretRef != nil {
			g.Secret = e.Credentials.SecretRef.String()
		}
		for _, err := range e.Errs {
			g.Errs = append(g.Errs, err.Error())
		}
		got = append(got, g)
	}
	want := []entry{
		{Source: "ufm", Enabled: true, Interval: 10 * time.Minute, Secret: "volcano-system/ufm-credentials",
			Config: `{"endpoint":"https://ufm-server:8080","insecureSkipVerify":true}`},
		{Source: "roce", Interval: 15 * time.Minute, Config: `{"endpoint":"https://roce-server:9090"}`},
		{Source: "label", Interval: DefaultInterval, Config: `{}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want,+got):\n%s", diff)
	}
	if len(parsed.Warnings) > 0 {
		t.Errorf("warnings %v, want none", parsed.Warnings)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		// wantErr is a whole-document error; wantEntryErrs the errors of each entry.
		wantErr       string
		wantEntryErrs [][]string
		wantWarnings  []string
	}{
		{
			name:    "not YAML",
			text:    "networkTopologyDiscovery: [\n  - source: ufm",
			wantErr: "hypernode-controller.conf is not valid YAML",
		},
		{
			name:    "not a list",
			text:    "networkTopologyDiscovery:\n  source: ufm\n",
			wantErr: "networkTopologyDiscovery must be a list of sources",
		},
		{
			name: "a typo in one entry does not stop the next",
			text: "networkTopologyDiscovery:\n- source: ufm\n  enable: true\n- source: label\n  enabled: true\n",
			wantEntryErrs: [][]string{
				{"networkTopologyDiscovery[0].enable: Forbidden: unknown field"},
				nil,
			},
		},
		{
			name: "a quoted bool is not a bool",
			text: "networkTopologyDiscovery:\n- source: label\n  enabled: \"true\"\n",
			wantEntryErrs: [][]string{
				{`networkTopologyDiscovery[0].enabled: Invalid value: "string": must be a YAML bool (true or false, unquoted)`},
			},
		},
		{
			// Only an absent interval is the default: 0s is as short as 1s, not "unset".
			name: "intervals are duration strings, not too short",
			text: "networkTopologyDiscovery:\n- source: ufm\n  interval: 600\n- source: label\n  interval: 1s\n- source: label\n  interval: soon\n" +
				"- source: label\n  interval: 0s\n- source: label\n  interval: -5m\n- source: label\n  interval: 10s\n",
			wantEntryErrs: [][]string{
				{`networkTopologyDiscovery[0]: Invalid value: interval: 600 is not a duration; write it as a string such as 10m or 1h`},
				{`networkTopologyDiscovery[1].interval: Invalid value: "1s": must be at least 10s`},
				{`networkTopologyDiscovery[2]: Invalid value: interval: "soon" is not a duration (such as 10m or 1h): time: invalid duration "soon"`},
				{`networkTopologyDiscovery[3].interval: Invalid value: "0s": must be at least 10s`},
				{`networkTopologyDiscovery[4].interval: Invalid value: "-5m0s": must be at least 10s`},
				nil,
			},
		},
		{
			name: "source and secret names",
			text: "networkTopologyDiscovery:\n- enabled: true\n- source: ufm\n  credentials:\n    secretRef:\n      name: Bad_Name\n- source: ufm\n  credentials: {}\n",
			wantEntryErrs: [][]string{
				{"networkTopologyDiscovery[0].source: Required value: name the source, e.g. label or ufm"},
				{`networkTopologyDiscovery[1].credentials.secretRef.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
				{"networkTopologyDiscovery[2].credentials.secretRef: Required value: credentials need a secretRef"},
			},
		},
		{
			name:          "other keys of a Volcano controller config are ignored with a warning",
			text:          "networkTopologyDiscovery: []\nsomethingElse: 1\n",
			wantEntryErrs: nil,
			wantWarnings:  []string{`hypernode-controller.conf: the key "somethingElse" is not read by the HyperNode controller and is ignored`},
		},
		{
			name: "an empty document configures nothing",
			text: "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parsed, err := Parse(tc.text, "hypernode-system")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, e := range parsed.Entries {
				var errs []string
				for _, err := range e.Errs {
					errs = append(errs, err.Error())
				}
				got = append(got, errs)
			}
			if diff := cmp.Diff(tc.wantEntryErrs, got); diff != "" {
				t.Errorf("entry errors (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, parsed.Warnings); diff != "" {
				t.Errorf("warnings (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseNodeLabels(t *testing.T) {
	type result struct {
		Enabled bool
		Rate    float64
		Errs    []string
	}
	for _, tc := range []struct {
		name, text string
		want       result
	}{
		{name: "absent: off", text: "networkTopologyDiscovery: []\n", want: result{Rate: 50}},
		{name: "null: off", text: "nodeLabels:\n", want: result{Rate: 50}},
		{name: "on, default rate", text: "nodeLabels:\n  enabled: true\n", want: result{Enabled: true, Rate: 50}},
		{name: "on, a rate", text: "nodeLabels:\n  enabled: true\n  writesPerSecond: 2.5\n", want: result{Enabled: true, Rate: 2.5}},
		{name: "zero rate", text: "nodeLabels:\n  enabled: true\n  writesPerSecond: 0\n",
			want: result{Enabled: true, Errs: []string{"nodeLabels.writesPerSecond: Invalid value: 0: must be a positive number of node writes per second"}}},
		{name: "negative rate", text: "nodeLabels:\n  writesPerSecond: -3\n",
			want: result{Rate: -3, Errs: []string{"nodeLabels.writesPerSecond: Invalid value: -3: must be a positive number of node writes per second"}}},
		{name: "a rate that is not a number", text: "nodeLabels:\n  enabled: true\n  writesPerSecond: fast\n",
			want: result{Rate: 50, Errs: []string{`nodeLabels.writesPerSecond: Invalid value: "string": must be a number`}}},
		{name: "unknown field", text: "nodeLabels:\n  enable: true\n",
			want: result{Rate: 50, Errs: []string{"nodeLabels.enable: Forbidden: unknown field"}}},
		{name: "a quoted bool", text: "nodeLabels:\n  enabled: \"true\"\n",
			want: result{Rate: 50, Errs: []string{`nodeLabels.enabled: Invalid value: "string": must be a YAML bool (true or false, unquoted)`}}},
		{name: "not a mapping", text: "nodeLabels: true\n",
			want: result{Rate: 50, Errs: []string{`nodeLabels: Invalid value: "bool": must be a mapping`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parsed, err := Parse(tc.text, "hypernode-system")
			if err != nil {
				t.Fatal(err)
			}
			got := result{Enabled: parsed.NodeLabels.Enabled, Rate: parsed.NodeLabels.Rate()}
			for _, err := range parsed.NodeLabelsErrs {
				got.Errs = append(got.Errs, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodeLabels (-want,+got):\n%s", diff)
			}
			if len(parsed.Warnings) > 0 {
				t.Errorf("warnings %v, want none", parsed.Warnings)
			}
		})
	}
}
