package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// Scheduler replicas: the manifests run two schedulers under leader election; the fault run
// (test/bench) does the same here. StartScheduler starts the first one and waits until it
// leads; StartSchedulerReplica starts another beside it, which waits as a standby.

// leaseAcquiredLine is what client-go's leader election logs when the process takes the Lease.
const leaseAcquiredLine = `"Successfully acquired lease" lock="` + SchedulerNamespace + "/" + SchedulerLease + `"`

// StartSchedulerReplica starts one more bin/kube-scheduler with the same configuration and
// identity and waits until it serves /healthz; it does not wait for the Lease. Each replica
// logs to a file of its own (kube-scheduler-replica-N.log).
func (c *Cluster) StartSchedulerReplica(ctx context.Context) (*Process, error) {
	if c.SchedulerConfig == "" {
		return nil, errors.New("start the first scheduler (StartScheduler) before a replica")
	}
	port := freePort()
	if port == 0 {
		return nil, errors.New("no free loopback port for a scheduler replica")
	}
	name := fmt.Sprintf("kube-scheduler-replica-%d", len(c.replicas)+1)
	p, err := c.startSchedulerProcess(name, port)
	if err != nil {
		return nil, err
	}
	c.replicas = append(c.replicas, p)
	if err := c.waitHTTP(ctx, p, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), func(body string) bool { return body == "ok" }); err != nil {
		return nil, err
	}
	return p, nil
}

// SchedulerProcesses are every scheduler process started, the exited ones included.
func (c *Cluster) SchedulerProcesses() []*Process {
	out := append([]*Process(nil), c.previousSchedulers...)
	if c.scheduler != nil {
		out = append(out, c.scheduler)
	}
	return append(out, c.replicas...)
}

// CheckControlPlane fails when etcd, kube-controller-manager or kwok has exited
// (kube-apiserver is not checked: RestartAPIServer replaces it).
func (c *Cluster) CheckControlPlane() error {
	for _, p := range []*Process{c.etcd, c.controllerManager, c.kwok} {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited (%v); see %s", p.Name, err, p.LogPath)
		}
	}
	return nil
}

// RunningSchedulers are the scheduler processes (the first one and the replicas) that have
// not exited, in start order.
func (c *Cluster) RunningSchedulers() []*Process {
	var out []*Process
	for _, p := range append([]*Process{c.scheduler}, c.replicas...) {
		if p == nil {
			continue
		}
		if exited, _ := p.Exited(); !exited {
			out = append(out, p)
		}
	}
	return out
}

// LeadingScheduler is the running scheduler process that has acquired the Lease (nil if
// none): a kube-scheduler that loses its Lease exits, so a running process that took it once
// still holds it, or is about to learn that it does not. Not safe for concurrent use.
func (c *Cluster) LeadingScheduler() *Process {
	for _, p := range c.RunningSchedulers() {
		if acquiredLease(p) {
			return p
		}
	}
	return nil
}

// acquiredLease reads the process's log from where it stopped last time, up to its last
// complete line, for leaseAcquiredLine.
func acquiredLease(p *Process) bool {
	if p.acquired {
		return true
	}
	f, err := os.Open(p.LogPath)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.NewSectionReader(f, p.scanned, 1<<40))
	if err != nil {
		return false
	}
	complete := bytes.LastIndexByte(data, '\n') + 1
	p.acquired = bytes.Contains(data[:complete], []byte(leaseAcquiredLine))
	p.scanned += int64(complete)
	return p.acquired
}
