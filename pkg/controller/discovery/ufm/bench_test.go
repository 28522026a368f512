package ufm

import (
	"testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/ufm/ufmtest"
)

// BenchmarkFabric10kHosts parses a UFM answer of a 3-tier fabric of 10,240 hosts (40 pods of
// 8 leaves of 32 hosts, 8 spines per pod, 16 cores: 35,840 port records, of hosts, of switches
// toward hosts, and both ends of 2,560 leaf-spine and 5,120 spine-core cables) and builds its
// HyperNodes (320 leaves, 40 pods, 1 core).
func BenchmarkFabric10kHosts(b *testing.B) {
	ports := ports(ufmtest.FatTree(40, 8, 32, 8, 16))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		f, err := NewFabric(ports)
		if err != nil {
			b.Fatal(err)
		}
		n = len(f.HyperNodes(identity))
	}
	b.ReportMetric(float64(n), "hypernodes")
	b.ReportMetric(float64(len(ports)), "ports")
}
