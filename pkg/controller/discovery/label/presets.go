package label

import "fmt"

// Level is one level of a topology type: the node label whose value names the level's
// switch (or domain), and the tierName of its HyperNodes.
type Level struct {
	Key      string
	TierName string
}

// presets are the node label schemes clusters already carry, each from its top level down.
// A level that no node carries is skipped (see Discover), so a preset may list more levels
// than a given cluster uses: topograph's fabric has as many tiers as the network.
var presets = map[string][]Level{
	// NVIDIA topograph v1: fabric.topograph.run/tier-N, tier 0 nearest the node, as many
	// tiers as the fabric has; the accelerator (NVLink) domain and its optional sub-domain
	// below the leaf switch.
	"topograph": append(topographFabric(8),
		Level{"accelerator.topograph.run/domain", "accelerator"},
		Level{"accelerator.topograph.run/sub-domain", "accelerator-subdomain"},
	),
	// topograph v0.3 to v0.5.
	"topograph-leaf": {
		{"network.topology.nvidia.com/core", "core"},
		{"network.topology.nvidia.com/spine", "spine"},
		{"network.topology.nvidia.com/leaf", "leaf"},
		{"network.topology.nvidia.com/accelerator", "accelerator"},
	},
	// topograph v0.1 and v0.2.
	"topograph-block": {
		{"network.topology.nvidia.com/datacenter", "datacenter"},
		{"network.topology.nvidia.com/spine", "spine"},
		{"network.topology.nvidia.com/block", "block"},
		{"network.topology.nvidia.com/accelerator", "accelerator"},
	},
	// Google Kubernetes Engine (A3, A4 and TPU placement).
	"gke": {
		{"cloud.google.com/gce-topology-block", "block"},
		{"cloud.google.com/gce-topology-subblock", "subblock"},
		{"cloud.google.com/gce-topology-host", "host"},
	},
	// Amazon EKS: network-node-layer-1 is the top.
	"eks": {
		{"topology.k8s.aws/network-node-layer-1", "layer-1"},
		{"topology.k8s.aws/network-node-layer-2", "layer-2"},
		{"topology.k8s.aws/network-node-layer-3", "layer-3"},
		{"topology.k8s.aws/network-node-layer-4", "layer-4"},
	},
	// Oracle OKE, RDMA cluster networks.
	"oke-rdma": {
		{"oci.oraclecloud.com/rdma.hpc_island_id", "hpc-island"},
		{"oci.oraclecloud.com/rdma.network_block_id", "rdma-network-block"},
		{"oci.oraclecloud.com/rdma.local_block_id", "rdma-local-block"},
	},
	// Oracle OKE, host placement.
	"oke": {
		{"oci.oraclecloud.com/host.network_block_id", "network-block"},
		{"oci.oraclecloud.com/host.rack_id", "rack"},
	},
	// CoreWeave, current labels.
	"coreweave": {
		{"backend.coreweave.cloud/fabric", "fabric"},
		{"backend.coreweave.cloud/leafgroup", "leafgroup"},
	},
	// CoreWeave, InfiniBand labels of older clusters.
	"coreweave-ib": {
		{"ib.coreweave.cloud/fabric", "fabric"},
		{"ib.coreweave.cloud/superpod", "superpod"},
		{"ib.coreweave.cloud/leafgroup", "leafgroup"},
	},
	// NVIDIA multi-node NVLink: the GPU operator's clique label, <ClusterUUID>.<CliqueID>.
	"nvlink-clique": {
		{"nvidia.com/gpu.clique", "nvlink"},
	},
}

// topographFabric lists fabric.topograph.run/tier-(n-1) .. tier-0, top first. Tiers 0, 1
// and 2 are named leaf, spine and core, the usual names of the switches at those distances
// from the node; higher ones fabric-tier-N.
func topographFabric(n int) []Level {
	names := []string{"leaf", "spine", "core"}
	var out []Level
	for i := n - 1; i >= 0; i-- {
		name := fmt.Sprintf("fabric-tier-%d", i)
		if i < len(names) {
			name = names[i]
		}
		out = append(out, Level{Key: fmt.Sprintf("fabric.topograph.run/tier-%d", i), TierName: name})
	}
	return out
}

// PresetNames returns the names of the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sortStrings(names)
	return names
}

// Preset returns the levels of a preset, top first.
func Preset(name string) ([]Level, bool) {
	levels, ok := presets[name]
	return levels, ok
}
