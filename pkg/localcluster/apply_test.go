package localcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    []string // kind/name
		wantErr string
	}{
		{
			name: "documents, comments and empty documents",
			yaml: "# a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
			want: []string{"Namespace/a", "ConfigMap/b"},
		},
		{
			name:    "a document without kind",
			yaml:    "apiVersion: v1\nmetadata:\n  name: a\n",
			wantErr: "document 1 has no apiVersion or kind",
		},
		{
			name:    "not YAML",
			yaml:    "kind: [",
			wantErr: "error converting YAML to JSON: yaml: line 1: did not find expected node content",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Decode([]byte(tc.yaml))
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("error %q, want %q", gotErr, tc.wantErr)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
