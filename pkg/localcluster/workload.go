package localcluster

import (
	"fmt"
	"strings"
)

// KubeconfigArg in an argument of StartWorkloadController stands for the admin kubeconfig.
const KubeconfigArg = "%KUBECONFIG%"

// StartWorkloadController starts bin/<name> (a workload controller built from its module,
// such as Kubeflow's mpi-operator) with args, logging to logs/<name>.log. Stop stops it with
// the rest, and Leftovers reports it if it outlives Stop.
func (c *Cluster) StartWorkloadController(name string, args ...string) (*Process, error) {
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = strings.ReplaceAll(a, KubeconfigArg, c.AdminKubeconfig)
	}
	p, err := startProcess(name, c.logDir(), c.bin(name), expanded...)
	if err != nil {
		return nil, fmt.Errorf("workload controller: %w", err)
	}
	c.workloadControllers = append(c.workloadControllers, p)
	return p, nil
}
