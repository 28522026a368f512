package ufm

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
)

// PortsPath is the UFM REST resource the source reads.
const PortsPath = "/ufmRest/resources/ports"

// DefaultTimeout bounds one request to UFM (Volcano's value).
const DefaultTimeout = 30 * time.Second

// Config is the UFM source's `config`, Volcano's fields plus a CA and a timeout.
//
//	config:
//	  endpoint: https://ufm.example.com   # https:// is added when no scheme is given
//	  caBundle: |                          # PEM; the system's CAs when unset
//	    -----BEGIN CERTIFICATE-----
//	    ...
//	  insecureSkipVerify: false            # a YAML bool; true only to test
//	  timeout: 30s
type Config struct {
	Endpoint           string `json:"endpoint"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify,omitempty"`
	CABundle           string `json:"caBundle,omitempty"`
	Timeout            string `json:"timeout,omitempty"`
}

// settings are a validated Config.
type settings struct {
	// url is the ports resource; host names the server in messages.
	url, host string
	tls       *tls.Config
	timeout   time.Duration
	secret    config.SecretRef
	insecure  bool
}

// parseConfig decodes and validates the UFM source's entry.
func parseConfig(e config.Entry) (*settings, field.ErrorList) {
	path := e.Path.Child("config")
	// Volcano's first releases read the credentials from the ConfigMap: say where they go.
	var raw map[string]json.RawMessage
	if json.Unmarshal(e.Config, &raw) == nil {
		var errs field.ErrorList
		for _, key := range []string{"username", "password"} {
			if _, ok := raw[key]; ok {
				errs = append(errs, field.Forbidden(path.Child(key), "credentials are read only from the Secret named in credentials.secretRef (keys username and password), never from the ConfigMap"))
			}
		}
		if len(errs) > 0 {
			return nil, errs
		}
	}
	var cfg Config
	if errs := config.DecodeStrict(e.Config, &cfg, path); len(errs) > 0 {
		return nil, errs
	}
	var errs field.ErrorList
	s := &settings{timeout: DefaultTimeout, insecure: cfg.InsecureSkipVerify}
	if e.Credentials == nil || e.Credentials.SecretRef == nil {
		errs = append(errs, field.Required(e.Path.Child("credentials", "secretRef"), "UFM needs credentials: a Secret with the keys username and password"))
	} else {
		s.secret = *e.Credentials.SecretRef
	}
	endpoint := strings.TrimSpace(cfg.Endpoint)
	if endpoint == "" {
		errs = append(errs, field.Required(path.Child("endpoint"), "the UFM server, e.g. https://ufm.example.com"))
	} else {
		if !strings.Contains(endpoint, "://") {
			endpoint = "https://" + endpoint
		}
		u, err := url.Parse(endpoint)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("endpoint"), cfg.Endpoint, err.Error()))
		case u.Scheme != "https":
			errs = append(errs, field.Invalid(path.Child("endpoint"), cfg.Endpoint, "must be https: the credentials would cross the network in clear text"))
		case u.User != nil:
			errs = append(errs, field.Invalid(path.Child("endpoint"), u.Redacted(), "must not hold credentials; put them in the Secret"))
		case u.Host == "" || u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, field.Invalid(path.Child("endpoint"), cfg.Endpoint, "must be a URL of the form https://host[:port][/path]"))
		default:
			s.host = u.Host
			s.url = strings.TrimRight(u.String(), "/") + PortsPath
		}
	}
	s.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case cfg.InsecureSkipVerify && cfg.CABundle != "":
		errs = append(errs, field.Invalid(path.Child("insecureSkipVerify"), true, "set either caBundle (verified) or insecureSkipVerify, not both"))
	case cfg.InsecureSkipVerify:
		s.tls.InsecureSkipVerify = true
	case cfg.CABundle != "":
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(cfg.CABundle)) || !bytes.Contains([]byte(cfg.CABundle), []byte("BEGIN CERTIFICATE")) {
			errs = append(errs, field.Invalid(path.Child("caBundle"), "<PEM>", "holds no PEM certificate"))
		}
		s.tls.RootCAs = pool
	}
	if cfg.Timeout != "" {
		d, err := time.ParseDuration(cfg.Timeout)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("timeout"), cfg.Timeout, fmt.Sprintf("not a duration such as 30s: %v", err)))
		case d <= 0 || d > 10*time.Minute:
			errs = append(errs, field.Invalid(path.Child("timeout"), cfg.Timeout, "must be more than 0 and at most 10m"))
		default:
			s.timeout = d
		}
	}
	return s, errs
}
