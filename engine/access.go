package engine

import "context"

// Kinds of an access entry.
const (
	AccessAdmin  = "admin"  // cluster admin
	AccessViewer = "viewer" // the support role's Kubernetes group
	AccessNode   = "node"   // a node role's entry (EKS makes it for a node group)
	AccessOther  = "other"  // none of these (an entry kiln did not create)
)

// AccessEntry is one principal that may reach the cluster.
type AccessEntry struct {
	// Principal is the IAM role or user ARN.
	Principal string `json:"principal"`
	// Kind is AccessAdmin, AccessViewer, AccessNode or AccessOther.
	Kind string `json:"kind"`
	// Type is the entry's type (EKS: STANDARD, EC2_LINUX, …).
	Type string `json:"type"`
	// Kiln says whether kiln created the entry (and so may change or
	// remove it); entries kiln did not create are never touched.
	Kiln bool `json:"kiln"`
	// Groups are the Kubernetes groups the principal is mapped to.
	Groups []string `json:"kubernetes_groups"`
	// Policies are the access policies associated with the entry.
	Policies []string `json:"policies"`
}

// Access is the cluster's access configuration, read live.
type Access struct {
	// Mode is the authentication mode (EKS: API_AND_CONFIG_MAP, …).
	Mode    string        `json:"authentication_mode"`
	Entries []AccessEntry `json:"entries"`
	// Problem says why the entries could not be read ("" when they were).
	Problem string `json:"problem,omitempty"`
}

// AccessReader is a provider whose clusters have cloud access entries
// (aws): kiln status lists them.
type AccessReader interface {
	ReadAccess(ctx context.Context, name, location string) Access
}
