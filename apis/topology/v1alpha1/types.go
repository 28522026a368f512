package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hypernodes,shortName=hn,scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Tier",type=string,JSONPath=`.spec.tier`
// +kubebuilder:printcolumn:name="TierName",type=string,JSONPath=`.spec.tierName`
// +kubebuilder:printcolumn:name="NodeCount",type=integer,JSONPath=`.status.nodeCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// HyperNode is one network performance domain: a switch (or NVLink/HCCS domain) and
// everything below it. A leaf HyperNode holds nodes; a parent HyperNode holds HyperNodes.
// Nodes under the same HyperNode of a lower tier communicate with more bandwidth and less
// latency than nodes that only share a HyperNode of a higher tier.
type HyperNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec defines the tier and the members of the HyperNode.
	Spec HyperNodeSpec `json:"spec"`

	// Status is the observed state of the HyperNode.
	// +optional
	Status HyperNodeStatus `json:"status,omitempty"`
}

// MemberType is the kind of object a HyperNode member selects.
// +kubebuilder:validation:Enum=Node;HyperNode
type MemberType string

const (
	// MemberTypeNode selects Kubernetes nodes; a HyperNode with such members is a leaf.
	MemberTypeNode MemberType = "Node"
	// MemberTypeHyperNode selects another HyperNode by name; it makes this HyperNode its parent.
	MemberTypeHyperNode MemberType = "HyperNode"
)

// HyperNodeSpec defines the desired state of a HyperNode.
type HyperNodeSpec struct {
	// Tier is the performance level of the HyperNode: the smaller the tier, the higher the
	// bandwidth and the lower the latency between its nodes. A parent's tier must be greater
	// than each of its children's.
	// +kubebuilder:validation:Minimum=0
	Tier int `json:"tier"`

	// TierName is a human-readable name of the tier (for example "leaf" or "spine"). Jobs may
	// name their highest allowed tier by it; every HyperNode of one tierName must share a tier.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	TierName string `json:"tierName,omitempty"`

	// Members are the nodes or HyperNodes that this HyperNode contains. Optional, as in
	// Volcano's API: a HyperNode without members holds no node.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	// +optional
	Members []MemberSpec `json:"members,omitempty"`
}

// MemberSpec is one member of a HyperNode: a selector for nodes, or the name of a child HyperNode.
// +kubebuilder:validation:XValidation:rule="self.type != 'HyperNode' || (!has(self.selector.regexMatch) && !has(self.selector.labelMatch))",message="a member of type HyperNode must select its HyperNode by exactMatch; regexMatch and labelMatch are only allowed for members of type Node"
type MemberSpec struct {
	// Type is the kind of object this member selects: Node or HyperNode.
	Type MemberType `json:"type"`

	// Selector selects the member's objects.
	Selector MemberSelector `json:"selector"`
}

// MemberSelector selects member objects by exactly one of: an exact name, a regular
// expression over node names, or a label selector over node labels.
//
//	members:
//	- type: Node
//	  selector:
//	    exactMatch:
//	      name: node-1
//	- type: Node
//	  selector:
//	    regexMatch:
//	      pattern: "^gpu-rack1-[0-9]+$"
//	- type: Node
//	  selector:
//	    labelMatch:
//	      matchLabels:
//	        topology.example.com/rack: rack1
//
// +kubebuilder:validation:XValidation:rule="(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + (has(self.labelMatch) ? 1 : 0) == 1",message="exactly one of exactMatch, regexMatch or labelMatch must be set"
type MemberSelector struct {
	// ExactMatch selects one object by name.
	// +optional
	ExactMatch *ExactMatch `json:"exactMatch,omitempty"`

	// RegexMatch selects the nodes whose name matches a regular expression (Go RE2 syntax,
	// unanchored: add ^ and $ to match whole names). Only for members of type Node.
	// +optional
	RegexMatch *RegexMatch `json:"regexMatch,omitempty"`

	// LabelMatch selects the nodes whose labels match a label selector. An empty selector
	// matches no node. Only for members of type Node.
	// +optional
	LabelMatch *metav1.LabelSelector `json:"labelMatch,omitempty"`
}

// ExactMatch selects one object by name.
type ExactMatch struct {
	// Name is the name of the node or HyperNode; it must be a DNS subdomain.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// RegexMatch selects nodes by a regular expression over their names.
type RegexMatch struct {
	// Pattern is a Go (RE2) regular expression matched against node names.
	// +kubebuilder:validation:MinLength=1
	Pattern string `json:"pattern"`
}

// HyperNodeStatus is the observed state of a HyperNode.
type HyperNodeStatus struct {
	// Conditions describe the observed state of the HyperNode, such as whether its
	// structure is valid.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// NodeCount is the number of existing nodes under this HyperNode (recursively).
	// +kubebuilder:validation:Minimum=0
	// +optional
	NodeCount int64 `json:"nodeCount,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// HyperNodeList is a list of HyperNodes.
type HyperNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items is the list of HyperNodes.
	Items []HyperNode `json:"items"`
}
