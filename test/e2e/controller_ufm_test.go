package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/ufm"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/ufm/ufmtest"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/status"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

const (
	ufmUser     = "ufm-reader"
	ufmPassword = "Tr0ub4dor-e2e"
)

// ufmConfig is the controller's configuration for the mock UFM with a CA bundle and an
// interval (a new interval restarts the source, which then asks UFM at once).
func ufmConfig(url string, ca []byte, interval int, extra string) string {
	var b strings.Builder
	b.WriteString("networkTopologyDiscovery:\n" + extra)
	fmt.Fprintf(&b, "- source: ufm\n  enabled: true\n  interval: %ds\n  credentials:\n    secretRef:\n      name: ufm-credentials\n  config:\n    endpoint: %s\n    caBundle: |\n", interval, url)
	for _, l := range strings.Split(strings.TrimSpace(string(ca)), "\n") {
		b.WriteString("      " + l + "\n")
	}
	return b.String()
}

func setUFMSecret(t *testing.T, password string) {
	t.Helper()
	secrets := cluster.Kube.CoreV1().Secrets(localcluster.SchedulerNamespace)
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ufm-credentials", Namespace: localcluster.SchedulerNamespace},
		StringData: map[string]string{"username": ufmUser, "password": password}}
	if _, err := secrets.Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		if _, err := secrets.Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestControllerUFM runs the UFM source against a mock UFM over TLS with its own CA: verified
// with the configured CA it builds three tiers from the switch ports (host names mapped to
// nodes exactly or ignoring case, the rest reported); a wrong CA, bad credentials and an empty
// answer are each reported with their own reason and delete nothing; an unknown source next
// to UFM is reported while UFM keeps running; the password never reaches the log.
func TestControllerUFM(t *testing.T) {
	server, err := ufmtest.NewServer(ufmUser, ufmPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	otherCA, err := ufmtest.NewCA("not the UFM server's CA")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	t.Cleanup(func() {
		_ = cluster.Kube.CoreV1().Secrets(localcluster.SchedulerNamespace).Delete(t.Context(), "ufm-credentials", metav1.DeleteOptions{})
	})
	startController(t, &nodes, ufmPassword)
	setUFMSecret(t, ufmPassword)
	// Two pods of two leaves (one host each) under shared cores; one host UFM spells in
	// upper case, one host that is no node.
	ports := ufmtest.FatTree(2, 2, 1, 2, 2)
	for i := range ports {
		if ports[i].SystemName == "host-1-1-0" {
			ports[i].SystemName = "HOST-1-1-0"
		}
	}
	ports = append(ports, ufmtest.HostPort("host-not-a-node", "leaf-1-1"))
	server.SetPorts(ports)
	for _, h := range ufmtest.Hosts(2, 2, 1) {
		createNodes(t, &nodes, st.MakeNode().Name(h).Obj())
	}

	start := time.Now()
	setDiscoveryConfig(t, ufmConfig(server.URL, server.CAPEM, 10, ""))
	want := []string{"ufm-core.core-0", "ufm-spine.spine-0-0", "ufm-spine.spine-1-0",
		"ufm-leaf.leaf-0-0", "ufm-leaf.leaf-0-1", "ufm-leaf.leaf-1-0", "ufm-leaf.leaf-1-1"}
	good := waitDiscovered(t, "ufm", want...)
	waitStatus(t, map[string]wantStatus{
		"ufm-core.core-0":   {4, metav1.ConditionTrue, status.ReasonValid},
		"ufm-leaf.leaf-1-1": {1, metav1.ConditionTrue, status.ReasonValid},
	})
	if m := good["ufm-leaf.leaf-1-1"].Spec.Members; len(m) != 1 || m[0].Selector.ExactMatch.Name != "host-1-1-0" {
		t.Errorf("leaf-1-1's members %+v, want the node host-1-1-0 (UFM says HOST-1-1-0)", m)
	}
	waitEvent(t, start, localcluster.SchedulerNamespace, ufm.ReasonHostsUnmatched, "1 of 5 hosts match no Node", "host-not-a-node")

	// keep checks that nothing of the good tree was deleted or changed.
	keep := func(step string) {
		t.Helper()
		got := discovered(t, "ufm")
		for name, hn := range good {
			if now, ok := got[name]; !ok || now.UID != hn.UID || now.Generation != hn.Generation {
				t.Errorf("%s: HyperNode %s was deleted or changed", step, name)
			}
		}
	}

	step := time.Now()
	setDiscoveryConfig(t, ufmConfig(server.URL, otherCA.CertPEM, 11, ""))
	waitEvent(t, step, localcluster.SchedulerNamespace, ufm.ReasonCertificate, "certificate signed by unknown authority", "its 7 HyperNodes are kept")
	keep("a wrong CA")

	step = time.Now()
	setUFMSecret(t, "wrong-password")
	setDiscoveryConfig(t, ufmConfig(server.URL, server.CAPEM, 12, ""))
	waitEvent(t, step, localcluster.SchedulerNamespace, ufm.ReasonUnauthorized, "401 Unauthorized", "Secret hypernode-system/ufm-credentials", "its 7 HyperNodes are kept")
	keep("bad credentials")

	step = time.Now()
	setUFMSecret(t, ufmPassword)
	server.SetBody([]byte("[]"))
	setDiscoveryConfig(t, ufmConfig(server.URL, server.CAPEM, 13, ""))
	waitEvent(t, step, localcluster.SchedulerNamespace, ufm.ReasonEmpty, "UFM answered with no ports", "its 7 HyperNodes are kept")
	keep("an empty answer")

	step = time.Now()
	server.SetBody([]byte(`[{"description": "Computer IB Port", "system_name": `))
	setDiscoveryConfig(t, ufmConfig(server.URL, server.CAPEM, 14, ""))
	waitEvent(t, step, localcluster.SchedulerNamespace, ufm.ReasonMalformed, "port record 0", "its 7 HyperNodes are kept")
	keep("malformed JSON")

	step = time.Now()
	server.SetStatus(http.StatusServiceUnavailable)
	setDiscoveryConfig(t, ufmConfig(server.URL, server.CAPEM, 15, ""))
	waitEvent(t, step, localcluster.SchedulerNamespace, ufm.ReasonHTTPError, "503 Service Unavailable")
	keep("an HTTP error")

	// An unknown source next to a good one: reported; UFM runs and follows the fabric (a
	// third pod appears).
	step = time.Now()
	grown := append(append([]ufmtest.Port(nil), ports...), ufmtest.HostPort("host-9", "leaf-9"))
	grown = append(grown, ufmtest.SwitchPorts("leaf-9", "spine-0-0")...)
	server.SetPorts(grown)
	createNodes(t, &nodes, st.MakeNode().Name("host-9").Obj())
	setDiscoveryConfig(t, ufmConfig(server.URL, server.CAPEM, 16, "- source: roce\n  enabled: true\n  config:\n    endpoint: https://roce.example.com\n"))
	waitEvent(t, step, localcluster.SchedulerNamespace, discovery.ReasonInvalidConfig, `networkTopologyDiscovery[0].source: Unsupported value: "roce"`)
	waitDiscovered(t, "ufm", append(want, "ufm-leaf.leaf-9")...)
	waitStatus(t, map[string]wantStatus{"ufm-core.core-0": {5, metav1.ConditionTrue, status.ReasonValid}})
}
