// Package crdclient configures API clients of custom resources (HyperNodes, PodGroups).
package crdclient

import restclient "k8s.io/client-go/rest"

// JSONConfig returns a copy of config for clients of custom resources, which the apiserver
// serves as JSON only.
func JSONConfig(config *restclient.Config) *restclient.Config {
	jsonConfig := restclient.CopyConfig(config)
	jsonConfig.ContentType = "application/json"
	jsonConfig.AcceptContentTypes = "application/json"
	return jsonConfig
}
