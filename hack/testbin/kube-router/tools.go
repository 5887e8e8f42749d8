//go:build tools

// Package kuberouter pins kube-router, run by the real node with only its
// NetworkPolicy firewall (--run-firewall). A module of its own so its
// dependencies do not move the control plane's. v2.1.0 has reported
// security flaws: it runs here only against the local test cluster.
package kuberouter

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
