// Package docs holds the roles kiln ships (rbac-operator.yaml,
// rbac-support.yaml); the support role is embedded so that kiln applies
// on EKS exactly the ClusterRole the file documents.
package docs

import _ "embed"

// SupportRBAC is rbac-support.yaml: the kiln-support ClusterRole, then an
// example ClusterRoleBinding.
//
//go:embed rbac-support.yaml
var SupportRBAC []byte
