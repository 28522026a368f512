// Package ufmtest is a mock UFM server for tests: HTTPS with a certificate from a CA of its
// own, basic authentication, and an answer the test sets (port records, a raw body, or an
// HTTP error), and redirects. It also builds the port records of typical fabrics.
package ufmtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// PortsPath is the resource the mock serves.
const PortsPath = "/ufmRest/resources/ports"

// Port is a UFM port record with the fields the source reads and a few it ignores.
type Port struct {
	Description     string `json:"description"`
	SystemName      string `json:"system_name"`
	PeerNodeName    string `json:"peer_node_name"`
	NodeDescription string `json:"node_description,omitempty"`
	GUID            string `json:"guid,omitempty"`
	LogicalState    string `json:"logical_state,omitempty"`
}

// Server is a running mock UFM.
type Server struct {
	// URL is https://127.0.0.1:<port>; CAPEM the PEM of the CA that signed its certificate.
	URL   string
	CAPEM []byte

	srv *httptest.Server

	mu       sync.Mutex
	user     string
	password string
	body     []byte
	status   int
	requests int
	// redirects maps a path to the Location its requests are redirected to.
	redirects map[string]string
}

// NewServer starts a mock UFM that accepts user/password and answers with no ports until
// told otherwise.
func NewServer(user, password string) (*Server, error) {
	ca, err := NewCA("mock UFM CA")
	if err != nil {
		return nil, err
	}
	cert, err := ca.ServerCert()
	if err != nil {
		return nil, err
	}
	s := &Server{CAPEM: ca.CertPEM, user: user, password: password, body: []byte("[]"), status: http.StatusOK}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// Refused handshakes (a client with the wrong CA) are what some tests do on purpose.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.srv.StartTLS()
	s.URL = s.srv.URL
	return s, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	user, password, body, status := s.user, s.password, s.body, s.status
	location, redirect := s.redirects[r.URL.Path]
	s.mu.Unlock()
	if redirect {
		http.Redirect(w, r, location, http.StatusFound)
		return
	}
	if r.URL.Path != PortsPath || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
		w.Header().Set("WWW-Authenticate", `Basic realm="UFM"`)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if status != http.StatusOK {
		http.Error(w, "UFM internal error", status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// SetPorts makes the server answer with these port records.
func (s *Server) SetPorts(ports []Port) {
	body, err := json.Marshal(ports)
	if err != nil {
		panic(err)
	}
	s.SetBody(body)
}

// SetBody makes the server answer with this raw body (status 200).
func (s *Server) SetBody(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.status = body, http.StatusOK
}

// SetStatus makes the server fail with an HTTP status.
func (s *Server) SetStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// Redirect makes the server answer requests to path with a redirect (302) to location,
// before any authentication, as a proxy in front of UFM would.
func (s *Server) Redirect(path, location string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.redirects == nil {
		s.redirects = map[string]string{}
	}
	s.redirects[path] = location
}

// Requests counts the requests served.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// CA is a certificate authority for tests.
type CA struct {
	CertPEM []byte
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
}

// NewCA creates a CA.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}, nil
}

// ServerCert issues a serving certificate for 127.0.0.1 and localhost.
func (ca *CA) ServerCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "ufm.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// HostPort is the record of a host's port cabled to a switch.
func HostPort(host, leaf string) Port {
	return Port{Description: "Computer IB Port", SystemName: host, PeerNodeName: leaf, NodeDescription: host + " mlx5_0", LogicalState: "Active"}
}

// SwitchPorts are the records of a switch-to-switch cable (each end reports its port).
func SwitchPorts(a, b string) []Port {
	return []Port{
		{Description: "Switch IB Port", SystemName: a, PeerNodeName: b, LogicalState: "Active"},
		{Description: "Switch IB Port", SystemName: b, PeerNodeName: a, LogicalState: "Active"},
	}
}

// FatTree returns the ports of a fabric of pods: each pod has leavesPerPod leaf switches with
// hostsPerLeaf hosts each (named host-<pod>-<leaf>-<i>, one port each) and spinesPerPod
// spines cabled to every leaf of the pod. With cores > 0 every spine is cabled to every core
// (three tiers); with none, each pod is a two-tier fabric of its own.
func FatTree(pods, leavesPerPod, hostsPerLeaf, spinesPerPod, cores int) []Port {
	var ports []Port
	for p := range pods {
		for l := range leavesPerPod {
			leaf := fmt.Sprintf("leaf-%d-%d", p, l)
			for h := range hostsPerLeaf {
				ports = append(ports, HostPort(fmt.Sprintf("host-%d-%d-%d", p, l, h), leaf))
				// Switch ports toward hosts exist too; the source ignores them.
				ports = append(ports, Port{Description: "Switch IB Port", SystemName: leaf, PeerNodeName: fmt.Sprintf("host-%d-%d-%d", p, l, h)})
			}
			for s := range spinesPerPod {
				ports = append(ports, SwitchPorts(leaf, fmt.Sprintf("spine-%d-%d", p, s))...)
			}
		}
		for s := range spinesPerPod {
			for c := range cores {
				ports = append(ports, SwitchPorts(fmt.Sprintf("spine-%d-%d", p, s), fmt.Sprintf("core-%d", c))...)
			}
		}
	}
	return ports
}

// Hosts returns the host names FatTree uses.
func Hosts(pods, leavesPerPod, hostsPerLeaf int) []string {
	var out []string
	for p := range pods {
		for l := range leavesPerPod {
			for h := range hostsPerLeaf {
				out = append(out, fmt.Sprintf("host-%d-%d-%d", p, l, h))
			}
		}
	}
	return out
}
