package localcluster

import (
	"os"
	"path/filepath"
	"testing"
)

// A replica leads once its own log (not a predecessor's, appended to the same file) has a
// complete line saying it acquired the Lease.
func TestAcquiredLeaseReadsOnlyItsOwnCompleteLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube-scheduler.log")
	predecessor := "I1207 01:13:32.929347 5303 leaderelection.go:272] " + leaseAcquiredLine + "\n"
	if err := os.WriteFile(path, []byte(predecessor), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Process{LogPath: path, scanned: int64(len(predecessor))}
	appendLog := func(s string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		write string
		want  bool
	}{
		{"I1207 01:20:00.000000 6000 leaderelection.go:258] \"Attempting to acquire leader lease...\"\n", false},
		// Half a line: the scan stops before it and reads it whole next time.
		{"I1207 01:20:15.000000 6000 leaderelection.go:272] \"Successfully acq", false},
		{"uired lease\" lock=\"hypernode-system/hypernode-scheduler\"\n", true},
		{"I1207 01:20:16.000000 6000 schedule_one.go:1] \"something else\"\n", true},
	}
	if acquiredLease(p) {
		t.Fatal("a predecessor's line counted")
	}
	for i, s := range steps {
		appendLog(s.write)
		if got := acquiredLease(p); got != s.want {
			t.Errorf("step %d: acquiredLease = %t, want %t", i, got, s.want)
		}
	}
}
