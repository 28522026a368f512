package ufm

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologylisters "github.com/hypernode-dev/hypernode-scheduler/pkg/client/listers/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/ufm/ufmtest"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

const (
	testUser     = "ufm-admin"
	testPassword = "s3cr3t-Pa55"
)

// fixture is a mock UFM, a fake API with the credentials Secret and nodes, and a source.
type fixture struct {
	server *ufmtest.Server
	kube   *kubefake.Clientset
	env    source.Env
}

func newFixture(t *testing.T, secret map[string]string, nodes ...string) *fixture {
	t.Helper()
	server, err := ufmtest.NewServer(testUser, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Close)
	kube := kubefake.NewClientset()
	if secret != nil {
		s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ufm-credentials", Namespace: "hypernode-system"}, Data: map[string][]byte{}}
		for k, v := range secret {
			s.Data[k] = []byte(v)
		}
		if _, err := kube.CoreV1().Secrets("hypernode-system").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	nodeInformer := factory.Core().V1().Nodes()
	for _, n := range nodes {
		if err := nodeInformer.Informer().GetStore().Add(st.MakeNode().Name(n).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{server: server, kube: kube, env: source.Env{Nodes: nodeInformer.Lister(), Secrets: kube.CoreV1(), Namespace: "hypernode-system"}}
}

// source builds the UFM source from the YAML of its `config`.
func (f *fixture) source(t *testing.T, yamlConfig string) *Source {
	t.Helper()
	text := "networkTopologyDiscovery:\n- source: ufm\n  enabled: true\n  credentials:\n    secretRef:\n      name: ufm-credentials\n  config:\n" + indent(yamlConfig)
	parsed, err := config.Parse(text, "hypernode-system")
	if err != nil {
		t.Fatal(err)
	}
	if errs := parsed.Entries[0].Errs; len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	s, errs := New(parsed.Entries[0], f.env)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return s.(*Source)
}

func (f *fixture) verified() string {
	return fmt.Sprintf("endpoint: %s\ncaBundle: |\n%s", f.server.URL, indent(string(f.server.CAPEM)))
}

func indent(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		out = append(out, "    "+l)
	}
	return strings.Join(out, "\n") + "\n"
}

var goodCredentials = map[string]string{"username": testUser, "password": testPassword}

// TestNoAnswerYet: a rebuild before any good answer asks nothing of UFM and reports nothing.
func TestNoAnswerYet(t *testing.T) {
	f := newFixture(t, goodCredentials, "n")
	s := f.source(t, f.verified())
	if _, err := s.Discover(context.Background(), false); err != source.ErrNoAnswerYet {
		t.Errorf("Discover without refresh before any answer: %v, want ErrNoAnswerYet", err)
	}
	if n := f.server.Requests(); n != 0 {
		t.Errorf("%d requests to UFM, want 0", n)
	}
}

// TestInsecureSkipVerify: only the YAML bool true turns verification off, with a warning.
func TestInsecureSkipVerify(t *testing.T) {
	f := newFixture(t, goodCredentials, ufmtest.Hosts(1, 1, 1)...)
	f.server.SetPorts(ufmtest.FatTree(1, 1, 1, 1, 0))
	s := f.source(t, "endpoint: "+f.server.URL+"\ninsecureSkipVerify: true\n")
	if _, err := s.Discover(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	w := s.InsecureWarning()
	if w == nil || w.Reason != ReasonInsecure || !strings.Contains(w.Message, "is not verified") {
		t.Errorf("insecure warning %v", w)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		entry  string
		errors []string
	}{
		{"https is added", "  credentials: {secretRef: {name: c}}\n  config: {endpoint: ufm.example.com:8443}\n", nil},
		{"http is refused", "  credentials: {secretRef: {name: c}}\n  config: {endpoint: 'http://ufm'}\n",
			[]string{`networkTopologyDiscovery[0].config.endpoint: Invalid value: "http://ufm": must be https: the credentials would cross the network in clear text`}},
		{"credentials in the URL", "  credentials: {secretRef: {name: c}}\n  config: {endpoint: 'https://admin:pw@ufm'}\n",
			[]string{`networkTopologyDiscovery[0].config.endpoint: Invalid value: "https://admin:xxxxx@ufm": must not hold credentials; put them in the Secret`}},
		{"credentials in the ConfigMap, as in Volcano's first example", "  credentials: {secretRef: {name: c}}\n  config: {endpoint: ufm, username: admin, password: pw}\n",
			[]string{
				"networkTopologyDiscovery[0].config.username: Forbidden: credentials are read only from the Secret named in credentials.secretRef (keys username and password), never from the ConfigMap",
				"networkTopologyDiscovery[0].config.password: Forbidden: credentials are read only from the Secret named in credentials.secretRef (keys username and password), never from the ConfigMap",
			}},
		{"no credentials, no endpoint", "  config: {}\n", []string{
			"networkTopologyDiscovery[0].credentials.secretRef: Required value: UFM needs credentials: a Secret with the keys username and password",
			"networkTopologyDiscovery[0].config.endpoint: Required value: the UFM server, e.g. https://ufm.example.com",
		}},
		{"insecureSkipVerify is a YAML bool", "  credentials: {secretRef: {name: c}}\n  config: {endpoint: ufm, insecureSkipVerify: 'true'}\n",
			[]string{`networkTopologyDiscovery[0].config.insecureSkipVerify: Invalid value: "string": must be a YAML bool (true or false, unquoted)`}},
		{"a CA and no verification", "  credentials: {secretRef: {name: c}}\n  config: {endpoint: ufm, insecureSkipVerify: true, caBundle: x}\n",
			[]string{"networkTopologyDiscovery[0].config.insecureSkipVerify: Invalid value: true: set either caBundle (verified) or insecureSkipVerify, not both"}},
		{"a CA that is not PEM", "  credentials: {secretRef: {name: c}}\n  config: {endpoint: ufm, caBundle: 'not a certificate'}\n",
			[]string{`networkTopologyDiscovery[0].config.caBundle: Invalid value: "<PEM>": holds no PEM certificate`}},
		{"a bad timeout", "  credentials: {secretRef: {name: c}}\n  config: {endpoint: ufm, timeout: 1h}\n",
			[]string{`networkTopologyDiscovery[0].config.timeout: Invalid value: "1h": must be more than 0 and at most 10m`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parsed, err := config.Parse("networkTopologyDiscovery:\n- source: ufm\n  enabled: true\n"+tc.entry, "hypernode-system")
			if err != nil {
				t.Fatal(err)
			}
			e := parsed.Entries[0]
			if len(e.Errs) > 0 {
				t.Fatalf("entry errors: %v", e.Errs)
			}
			s, errs := New(e, source.Env{})
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.errors, got); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
			if tc.errors == nil && s.(*Source).settings.url != "https://ufm.example.com:8443"+PortsPath {
				t.Errorf("URL %s", s.(*Source).settings.url)
			}
		})
	}
}

// TestPartialAnswerNeedsConfirmation: an answer that lost more than half of the hosts (UFM
// restarting) is refused, and the last good one kept, until such answers have come for
// shrinkHold, shrinkAnswers of them in a row; an answer in between that does not shrink, or a
// failed fetch, starts the wait again.
func TestPartialAnswerNeedsConfirmation(t *testing.T) {
	f := newFixture(t, goodCredentials, ufmtest.Hosts(1, 2, 2)...)
	f.server.SetPorts(ufmtest.FatTree(1, 2, 2, 1, 0))
	s := f.source(t, f.verified())
	clock := testingclock.NewFakePassiveClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	s.clock = clock
	full, err := s.Discover(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	good := func() {
		t.Helper()
		f.server.SetPorts(ufmtest.FatTree(1, 2, 2, 1, 0))
		if _, err := s.Discover(context.Background(), true); err != nil {
			t.Fatal(err)
		}
	}
	// partial serves an answer with one host of four after the given time; so far ("" when
	// the answer must be applied) is the wait and the count the refusal reports.
	partial := func(after time.Duration, soFar string) {
		t.Helper()
		clock.SetTime(clock.Now().Add(after))
		f.server.SetPorts(ufmtest.FatTree(1, 1, 1, 1, 0))
		res, err := s.Discover(context.Background(), true)
		if soFar == "" {
			if err != nil || len(res.HyperNodes) != 1 {
				t.Fatalf("the lasting answer: %v; want it applied (one leaf)", err)
			}
			return
		}
		want := "UFM reports 1 hosts where its last answer had 4: taken for a partial answer (UFM restarting or rediscovering the fabric), " +
			"applied only if such answers come for 5m0s, 3 of them in a row (" + soFar + " so far)"
		if source.ReasonOf(err) != ReasonPartialAnswer || err.Error() != want {
			t.Fatalf("a partial answer: %v (%s); want %s %q", err, source.ReasonOf(err), ReasonPartialAnswer, want)
		}
		// The last good answer still maps node changes.
		if again, err := s.Discover(context.Background(), false); err != nil || len(again.HyperNodes) != len(full.HyperNodes) {
			t.Fatalf("without refresh after a refused answer: %v; want the last good answer's %d HyperNodes", err, len(full.HyperNodes))
		}
	}
	partial(0, "0s and 1")
	partial(4*time.Minute, "4m0s and 2")
	good()
	partial(time.Minute, "0s and 1")
	partial(4*time.Minute, "4m0s and 2")
	partial(time.Minute, "")

	// Three within two minutes are not enough, nor two over six minutes.
	good()
	partial(time.Minute, "0s and 1")
	partial(time.Minute, "1m0s and 2")
	partial(time.Minute, "2m0s and 3")
	good()
	partial(time.Minute, "0s and 1")
	partial(6*time.Minute, "6m0s and 2")
	partial(time.Minute, "")

	// One after an outage starts anew.
	good()
	partial(time.Minute, "0s and 1")
	partial(time.Minute, "1m0s and 2")
	f.server.SetStatus(http.StatusInternalServerError)
	clock.SetTime(clock.Now().Add(5 * time.Minute))
	if _, err := s.Discover(context.Background(), true); source.ReasonOf(err) != ReasonHTTPError {
		t.Fatalf("UFM down: %v, want %s", err, ReasonHTTPError)
	}
	f.server.SetStatus(http.StatusOK)
	partial(time.Minute, "0s and 1")
}

// TestFirstAnswerComparedWithTheOwnedTree: the first answer after a start has no last answer,
// so it is compared with the nodes the HyperNodes the source owns hold: one that matches fewer
// than half of them is refused like any partial answer, and applied once such answers last.
// Nodes that no longer exist and HyperNodes of other sources do not count.
func TestFirstAnswerComparedWithTheOwnedTree(t *testing.T) {
	nodes := append(ufmtest.Hosts(1, 2, 2), "other-0", "other-1", "other-2", "host-1-0-0")
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, hn := range []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("leaf-0-0").Tier(1).Label(source.Label, SourceName).Nodes("host-0-0-0", "host-0-0-1").Obj(),
		hntesting.MakeHyperNode("leaf-0-1").Tier(1).Label(source.Label, SourceName).Nodes("host-0-1-0", "host-0-1-1", "deleted-node").Obj(),
		hntesting.MakeHyperNode("spine-0").Tier(2).Label(source.Label, SourceName).Children("leaf-0-0", "leaf-0-1").Obj(),
		hntesting.MakeHyperNode("rack-other").Tier(1).Label(source.Label, "label").Nodes("other-0", "other-1", "other-2").Obj(),
	} {
		if err := indexer.Add(hn); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		lists bool // the source may list HyperNodes
		// pods, leaves per pod and hosts per leaf of the first answers
		pods, leaves, hosts int
		refused             bool
	}{
		{name: "one of four held nodes: refused", lists: true, pods: 1, leaves: 1, hosts: 1, refused: true},
		// host-1-0-0 joined while the controller was down: a node the tree never held.
		{name: "one held and a new one: refused", lists: true, pods: 2, leaves: 1, hosts: 1, refused: true},
		{name: "two of four: applied", lists: true, pods: 1, leaves: 1, hosts: 2},
		{name: "nothing to compare with: applied", pods: 1, leaves: 1, hosts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, goodCredentials, nodes...)
			if tc.lists {
				f.env.HyperNodes = topologylisters.NewHyperNodeLister(indexer)
			}
			f.server.SetPorts(ufmtest.FatTree(tc.pods, tc.leaves, tc.hosts, 1, 0))
			s := f.source(t, f.verified())
			clock := testingclock.NewFakePassiveClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
			s.clock = clock
			if !tc.refused {
				if res, err := s.Discover(context.Background(), true); err != nil || len(res.HyperNodes) == 0 {
					t.Fatalf("first answer: %v; want it applied", err)
				}
				return
			}
			for i, after := range []time.Duration{0, 4 * time.Minute, time.Minute} {
				clock.SetTime(clock.Now().Add(after))
				res, err := s.Discover(context.Background(), true)
				if i == 2 {
					if err != nil || len(res.HyperNodes) == 0 {
						t.Fatalf("the lasting answer: %v; want it applied", err)
					}
					return
				}
				want := fmt.Sprintf("UFM reports 1 of the 4 nodes that the HyperNodes it built before this source started hold: taken for a partial answer (UFM restarting or rediscovering the fabric), "+
					"applied only if such answers come for 5m0s, 3 of them in a row (%s and %d so far)", []string{"0s", "4m0s"}[i], i+1)
				if source.ReasonOf(err) != ReasonPartialAnswer || err.Error() != want {
					t.Fatalf("answer %d: %v (%s); want %s %q", i+1, err, source.ReasonOf(err), ReasonPartialAnswer, want)
				}
				// Nothing to rebuild from: the tree stays as it is.
				if _, err := s.Discover(context.Background(), false); err != source.ErrNoAnswerYet {
					t.Fatalf("without refresh after a refused first answer: %v, want %v", err, source.ErrNoAnswerYet)
				}
			}
		})
	}
}
