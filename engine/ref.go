package engine

// ClusterRef names one cluster as a frontend knows it before it has a
// Provider: the provider's name ("kube" or "aws"), the cluster's name and
// its location (kube context or AWS region), as a ClusterSummary names
// it. A frontend's host (the CLI) builds the Target from it.
type ClusterRef struct {
	Provider, Name, Location string
}

// Infra is what a frontend asks of a provider's infrastructure besides
// its location: the values of the provider's own inputs (aws:
// InputNodes, InputInstanceType and InputProfile on create;
// input.KubernetesVersion, InputNodes and InputInstanceType on upgrade),
// which the host applies as it applies the flags of the same name. Zero
// values keep the provider's defaults (create) or what runs (upgrade); a
// provider without such inputs ignores them.
type Infra struct {
	KubernetesVersion string
	// Nodes is the node group's size; NodesGiven says the input was given
	// (so 0 is refused on upgrade, not kept); -1: what was typed is not a
	// number.
	Nodes        int
	NodesGiven   bool
	InstanceType string
	// Profile is the AWS shared-config profile ("": the default
	// credential chain).
	Profile string
}
