// Package scheduler holds the shipped KubeSchedulerConfiguration (config.yaml) for the
// programs that need it without the repository at hand: kubectl hypernode plan simulates
// preemption with it when it cannot read the running scheduler's.
package scheduler

import _ "embed"

// Config is config.yaml.
//
//go:embed config.yaml
var Config []byte
