package localcluster

import (
	"context"
	"crypto/tls"
	_ "embed"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// poll runs cond every 100 ms until it is true, the timeout passes, or proc exits.
func (c *Cluster) poll(ctx context.Context, proc *Process, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, werr := proc.Exited(); exited {
			return false, fmt.Errorf("%s exited (%v); see %s", proc.Name, werr, proc.LogPath)
		}
		return cond(ctx)
	})
	if err != nil && !strings.Contains(err.Error(), "exited") {
		return fmt.Errorf("%s not ready: %w; see %s", proc.Name, err, proc.LogPath)
	}
	return err
}

// waitHTTP polls url until check accepts a 200 response body. TLS certificates are not
// verified: the binaries serve self-signed certificates on the loopback interface.
func (c *Cluster) waitHTTP(ctx context.Context, proc *Process, url string, check func(body string) bool) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	err := c.poll(ctx, proc, 2*time.Minute, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && check(string(body)), nil
	})
	if err == nil {
		c.step("%s ready (pid %d)", proc.Name, proc.Pid())
	}
	return err
}
