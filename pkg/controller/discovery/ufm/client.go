package ufm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
)

// Event reasons of failed fetches: each kind of failure is its own Event.
const (
	ReasonCredentials    = "UFMCredentialsUnavailable"
	ReasonUnreachable    = "UFMUnreachable"
	ReasonCertificate    = "UFMCertificateRejected"
	ReasonUnauthorized   = "UFMUnauthorized"
	ReasonHTTPError      = "UFMHTTPError"
	ReasonMalformed      = "UFMMalformedAnswer"
	ReasonEmpty          = "UFMEmptyAnswer"
	ReasonNoHostMatched  = "UFMNoHostMatchesANode"
	ReasonHostsUnmatched = "UFMHostsWithoutNode"
	ReasonInsecure       = "UFMTLSVerificationDisabled"
	ReasonPartialAnswer  = "UFMPartialAnswer"
	ReasonRedirect       = "UFMRedirectRefused"
)

// maxAnswerBytes bounds the answer read into memory (a port record is a few hundred bytes;
// this is room for several hundred thousand ports).
const maxAnswerBytes = 256 << 20

// Port is the part of a UFM port record the source uses.
type Port struct {
	// Description says what the port belongs to: "Computer IB Port" for a host's port.
	Description string `json:"description"`
	// SystemName is the host or switch the port belongs to.
	SystemName string `json:"system_name"`
	// PeerNodeName is the host or switch at the other end of the port's link.
	PeerNodeName string `json:"peer_node_name"`
}

// credentials reads the username and password from the configured Secret. They are never
// logged and never part of an error.
func (s *Source) credentials(ctx context.Context) (string, string, error) {
	ref := s.settings.secret
	secret, err := s.env.Secrets.Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", "", source.Errorf(ReasonCredentials, "the credentials Secret %s does not exist", ref)
	case apierrors.IsForbidden(err):
		return "", "", source.Errorf(ReasonCredentials, "the controller may not read the credentials Secret %s: grant it get on that Secret by name (a Role in %s with resourceNames: [%s])", ref, ref.Namespace, ref.Name)
	case err != nil:
		return "", "", source.Errorf(ReasonCredentials, "reading the credentials Secret %s: %v", ref, err)
	}
	user, pass := string(secret.Data["username"]), string(secret.Data["password"])
	if user == "" || pass == "" {
		return "", "", source.Errorf(ReasonCredentials, "the credentials Secret %s needs the keys username and password, both non-empty", ref)
	}
	return user, pass, nil
}

// fetch reads every port from UFM: one GET with basic authentication, TLS verified unless
// insecureSkipVerify is configured, following redirects only within the endpoint
// (checkRedirect).
func (s *Source) fetch(ctx context.Context) ([]Port, error) {
	user, pass, err := s.credentials(ctx)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.settings.url, nil)
	if err != nil {
		return nil, source.Errorf(ReasonUnreachable, "building the request to %s: %v", s.settings.url, err)
	}
	req.SetBasicAuth(user, pass)
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		var refused *redirectRefused
		if errors.As(err, &refused) {
			return nil, source.Errorf(ReasonRedirect, "GET %s: UFM redirected to %s, %s; the request was not sent there: set config.endpoint to the URL UFM answers on", s.settings.url, refused.target, refused.why)
		}
		if tlsVerificationFailed(err) {
			return nil, source.Errorf(ReasonCertificate, "GET %s: the UFM server's certificate is not trusted: %v; give its CA in config.caBundle", s.settings.url, unwrapURLError(err))
		}
		return nil, source.Errorf(ReasonUnreachable, "GET %s: %v", s.settings.url, unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, source.Errorf(ReasonUnauthorized, "GET %s: %s: UFM refused the credentials of Secret %s", s.settings.url, resp.Status, s.settings.secret)
	case resp.StatusCode != http.StatusOK:
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, source.Errorf(ReasonHTTPError, "GET %s: %s%s", s.settings.url, resp.Status, printable(snippet))
	}
	ports, err := decodePorts(resp.Body)
	if err != nil {
		return nil, source.Errorf(ReasonMalformed, "GET %s: %v", s.settings.url, err)
	}
	if len(ports) == 0 {
		return nil, source.Errorf(ReasonEmpty, "GET %s: UFM answered with no ports", s.settings.url)
	}
	return ports, nil
}

// maxRedirects is as many redirects as net/http follows by default.
const maxRedirects = 10

// redirectRefused is a redirect the source does not follow: the request carries the
// credentials, and a redirect must not take them anywhere the configured endpoint would not.
type redirectRefused struct {
	// target is the redirect's URL (without user information), why the reason it is refused.
	target, why string
}

func (r *redirectRefused) Error() string { return "redirect to " + r.target + " refused: " + r.why }

// checkRedirect follows a redirect only to https on the host and port of the first request
// (the configured endpoint). net/http would follow one to http://, Authorization header
// included, and one to another host with it if that host is a subdomain of the endpoint's,
// else without it (UFM would then answer 401, blaming the credentials).
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	from, to := via[0].URL, req.URL
	switch {
	case to.Scheme != "https":
		return &redirectRefused{target: to.Redacted(), why: "which is not https: the credentials would cross the network in clear text"}
	case !strings.EqualFold(from.Hostname(), to.Hostname()) || httpsPort(from) != httpsPort(to):
		return &redirectRefused{target: to.Redacted(), why: fmt.Sprintf("another host than the endpoint's %s: the credentials are sent only to the configured endpoint", from.Host)}
	}
	return nil
}

// httpsPort is the port of an https URL, 443 when it names none.
func httpsPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return "443"
}

// decodePorts reads a JSON array of port records, one record at a time.
func decodePorts(r io.Reader) ([]Port, error) {
	counted := &countingReader{r: io.LimitReader(r, maxAnswerBytes+1)}
	dec := json.NewDecoder(counted)
	fail := func(err error) ([]Port, error) {
		if counted.n > maxAnswerBytes {
			return nil, fmt.Errorf("the answer is larger than %d MiB", maxAnswerBytes>>20)
		}
		return nil, err
	}
	tok, err := dec.Token()
	if err != nil {
		return fail(fmt.Errorf("the answer is not JSON: %v", err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fail(fmt.Errorf("the answer is not a JSON array of ports (it starts with %v)", tok))
	}
	var ports []Port
	for dec.More() {
		var p Port
		if err := dec.Decode(&p); err != nil {
			return fail(fmt.Errorf("port record %d: %v", len(ports), err))
		}
		ports = append(ports, p)
	}
	if _, err := dec.Token(); err != nil {
		return fail(fmt.Errorf("after %d port records: %v", len(ports), err))
	}
	return ports, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// tlsVerificationFailed reports whether err is the server's certificate being refused.
func tlsVerificationFailed(err error) bool {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &verify)
}

// unwrapURLError drops the "Get <url>:" prefix that the URL is already in our message.
func unwrapURLError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil && strings.HasPrefix(err.Error(), "Get ") {
			return inner
		}
	}
	return err
}

// printable renders the start of an error body for a message: printable characters only.
func printable(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, string(b))
	if s = strings.TrimSpace(s); s == "" {
		return ""
	}
	return ": " + s
}
