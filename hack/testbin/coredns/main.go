// Command coredns is CoreDNS from the pinned github.com/coredns/coredns
// module with only the plugins the real node's cluster DNS uses: the
// kubernetes plugin answers cluster.local from the API; nothing is
// forwarded (names outside the cluster get no answer from here, so no query
// leaves this machine). A module of its own so its dependencies do not move
// the control plane's.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugin chain's order (CoreDNS's plugin.cfg order, cut to these).
var directives = []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
