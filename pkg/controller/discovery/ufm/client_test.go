package ufm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/ufm/ufmtest"
)

// The tests of how the source talks to UFM: TLS, failures, redirects.

// TestDiscoverVerifiedTLS: the source reads the ports over TLS verified with the configured CA,
// authenticated from the Secret, and builds the tree.
func TestDiscoverVerifiedTLS(t *testing.T) {
	f := newFixture(t, goodCredentials, ufmtest.Hosts(1, 2, 2)...)
	f.server.SetPorts(ufmtest.FatTree(1, 2, 2, 1, 0))
	s := f.source(t, f.verified())
	res, err := s.Discover(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ufm-leaf.leaf-0-0 1 leaf [host-0-0-0 host-0-0-1]",
		"ufm-leaf.leaf-0-1 1 leaf [host-0-1-0 host-0-1-1]",
		"ufm-spine.spine-0-0 2 spine [ufm-leaf.leaf-0-0 ufm-leaf.leaf-0-1]",
	}
	if diff := cmp.Diff(want, render(res.HyperNodes)); diff != "" {
		t.Errorf("HyperNodes (-want,+got):\n%s", diff)
	}
	if s.InsecureWarning() != nil {
		t.Errorf("a verified source warns about insecure TLS")
	}
}

// TestDiscoverFailures: every failure is an error of its own kind (an Event reason) that names
// what to fix and never contains the password; a failure keeps the last good answer, which
// node changes still map (no refresh).
func TestDiscoverFailures(t *testing.T) {
	otherCA, err := ufmtest.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		secret  map[string]string
		config  func(f *fixture) string
		serve   func(s *ufmtest.Server)
		reason  string
		message string
	}{
		{
			name:    "the system CAs do not know the server",
			config:  func(f *fixture) string { return "endpoint: " + f.server.URL + "\n" },
			reason:  ReasonCertificate,
			message: "the UFM server's certificate is not trusted: tls: failed to verify certificate: x509: certificate signed by unknown authority",
		},
		{
			name: "a wrong CA",
			config: func(f *fixture) string {
				return fmt.Sprintf("endpoint: %s\ncaBundle: |\n%s", f.server.URL, indent(string(otherCA.CertPEM)))
			},
			reason:  ReasonCertificate,
			message: "give its CA in config.caBundle",
		},
		{
			name:    "bad credentials",
			secret:  map[string]string{"username": testUser, "password": "wrong"},
			reason:  ReasonUnauthorized,
			message: "401 Unauthorized: UFM refused the credentials of Secret hypernode-system/ufm-credentials",
		},
		{
			name:    "no Secret",
			secret:  map[string]string{},
			reason:  ReasonCredentials,
			message: "the credentials Secret hypernode-system/ufm-credentials needs the keys username and password",
		},
		{
			name:    "an HTTP error",
			serve:   func(s *ufmtest.Server) { s.SetStatus(http.StatusInternalServerError) },
			reason:  ReasonHTTPError,
			message: "500 Internal Server Error: UFM internal error",
		},
		{
			name:    "an empty answer",
			serve:   func(s *ufmtest.Server) { s.SetBody([]byte("[]")) },
			reason:  ReasonEmpty,
			message: "UFM answered with no ports",
		},
		{
			name:    "switch ports only",
			serve:   func(s *ufmtest.Server) { s.SetPorts(ufmtest.SwitchPorts("a", "b")) },
			reason:  ReasonEmpty,
			message: "the answer has 2 ports but no host port linked to a switch",
		},
		{
			name:    "truncated JSON",
			serve:   func(s *ufmtest.Server) { s.SetBody([]byte(`[{"description":"Computer IB Port","system_name":"h`)) },
			reason:  ReasonMalformed,
			message: "port record 0: unexpected EOF",
		},
		{
			name:    "not an array",
			serve:   func(s *ufmtest.Server) { s.SetBody([]byte(`{"ports":[]}`)) },
			reason:  ReasonMalformed,
			message: "the answer is not a JSON array of ports (it starts with {)",
		},
		{
			name:    "a record that is not an object",
			serve:   func(s *ufmtest.Server) { s.SetBody([]byte(`[{"description":"x"}, 42]`)) },
			reason:  ReasonMalformed,
			message: "port record 1: json: cannot unmarshal number into Go value of type ufm.Port",
		},
		{
			name:    "not JSON at all",
			serve:   func(s *ufmtest.Server) { s.SetBody([]byte(`<html>login</html>`)) },
			reason:  ReasonMalformed,
			message: "the answer is not JSON: invalid character '<' looking for beginning of value",
		},
		{
			name:    "no host is a node",
			serve:   func(s *ufmtest.Server) { s.SetPorts([]ufmtest.Port{ufmtest.HostPort("elsewhere", "leaf")}) },
			reason:  ReasonNoHostMatched,
			message: "none of the 1 hosts UFM reports (elsewhere) is the name of a Node",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, goodCredentials, ufmtest.Hosts(1, 2, 2)...)
			f.server.SetPorts(ufmtest.FatTree(1, 2, 2, 1, 0))
			s := f.source(t, f.verified())
			good, err := s.Discover(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
			if tc.config != nil {
				fresh := f.source(t, tc.config(f))
				fresh.last = s.last
				s = fresh
			}
			if tc.secret != nil {
				sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ufm-credentials", Namespace: "hypernode-system"}, Data: map[string][]byte{}}
				for k, v := range tc.secret {
					sec.Data[k] = []byte(v)
				}
				if _, err := f.kube.CoreV1().Secrets("hypernode-system").Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.serve != nil {
				tc.serve(f.server)
			}
			_, err = s.Discover(context.Background(), true)
			if err == nil {
				t.Fatal("Discover succeeded, want an error")
			}
			if got := source.ReasonOf(err); got != tc.reason {
				t.Errorf("reason %s, want %s (error: %v)", got, tc.reason, err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q does not contain %q", err, tc.message)
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Errorf("the error shows the password: %v", err)
			}
			// The last good answer stays and still maps nodes.
			again, err := s.Discover(context.Background(), false)
			if err != nil {
				t.Fatalf("rebuilding from the last good answer: %v", err)
			}
			if diff := cmp.Diff(render(good.HyperNodes), render(again.HyperNodes)); diff != "" {
				t.Errorf("the last good tree changed (-before,+after):\n%s", diff)
			}
		})
	}
}

// TestRedirects: the endpoint's redirects are followed only to https on its own host and
// port. One to http:// or to another host is refused (UFMRedirectRefused, naming the target)
// before anything is sent there: the credentials reach only the configured endpoint. Every
// case starts from a good answer, which a refusal keeps.
func TestRedirects(t *testing.T) {
	var mu sync.Mutex
	var plainRequests []string // the Authorization headers the plain-HTTP server received
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		plainRequests = append(plainRequests, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte("[]"))
	}))
	defer plain.Close()
	const from = "/old" + PortsPath
	for _, tc := range []struct {
		name string
		// location is where the endpoint redirects, given the mock's URL; want is Discover's
		// error ("" when the redirect is followed).
		location, want func(mock string) string
	}{
		{
			name:     "to another path of the endpoint",
			location: func(string) string { return PortsPath },
			want:     func(string) string { return "" },
		},
		{
			name:     "to http",
			location: func(string) string { return plain.URL + PortsPath },
			want: func(mock string) string {
				return "GET " + mock + from + ": UFM redirected to " + plain.URL + PortsPath +
					", which is not https: the credentials would cross the network in clear text; the request was not sent there: set config.endpoint to the URL UFM answers on"
			},
		},
		{
			name:     "to https on another host",
			location: func(mock string) string { return strings.Replace(mock, "127.0.0.1", "localhost", 1) + PortsPath },
			want: func(mock string) string {
				return "GET " + mock + from + ": UFM redirected to " + strings.Replace(mock, "127.0.0.1", "localhost", 1) + PortsPath +
					", another host than the endpoint's " + strings.TrimPrefix(mock, "https://") +
					": the credentials are sent only to the configured endpoint; the request was not sent there: set config.endpoint to the URL UFM answers on"
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, goodCredentials, ufmtest.Hosts(1, 2, 2)...)
			f.server.SetPorts(ufmtest.FatTree(1, 2, 2, 1, 0))
			s := f.source(t, fmt.Sprintf("endpoint: %s/old\ncaBundle: |\n%s", f.server.URL, indent(string(f.server.CAPEM))))
			f.server.Redirect(from, PortsPath)
			good, err := s.Discover(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
			f.server.Redirect(from, tc.location(f.server.URL))
			res, err := s.Discover(context.Background(), true)
			// Each answer took the redirect and the request it redirects to; a refused one
			// only the redirect.
			requests := 4
			if want := tc.want(f.server.URL); want == "" {
				if err != nil {
					t.Fatalf("Discover: %v, want the redirect followed", err)
				}
				if diff := cmp.Diff(render(good.HyperNodes), render(res.HyperNodes)); diff != "" {
					t.Errorf("HyperNodes after the redirect (-want,+got):\n%s", diff)
				}
			} else {
				requests = 3
				if got := source.ReasonOf(err); err == nil || got != ReasonRedirect || err.Error() != want {
					t.Errorf("Discover: %v (%s),\nwant %s: %s", err, got, ReasonRedirect, want)
				}
				again, err := s.Discover(context.Background(), false)
				if err != nil {
					t.Fatalf("rebuilding from the last good answer: %v", err)
				}
				if diff := cmp.Diff(render(good.HyperNodes), render(again.HyperNodes)); diff != "" {
					t.Errorf("the last good tree changed (-before,+after):\n%s", diff)
				}
			}
			if got := f.server.Requests(); got != requests {
				t.Errorf("the mock UFM received %d requests, want %d", got, requests)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(plainRequests) > 0 {
				t.Errorf("the plain-HTTP server received %d requests (Authorization: %q), want none", len(plainRequests), plainRequests)
			}
			plainRequests = nil
		})
	}
}
