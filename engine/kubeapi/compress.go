package kubeapi

import (
	"net"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
)

// Uncompressed turns off response compression when rc's API server is on
// this machine (a loopback address or "localhost"): there is no network
// to save, and gzip costs both ends CPU. At 10,000 projects a `kiln
// project list` cost the API server about 2 s of CPU more compressed than
// not, on the 2 cores it shares with kiln (docs/benchmarks.md). Elsewhere
// compression stays as client-go and the kubeconfig say; a kubeconfig's
// disable-compression turns it off for any cluster.
func Uncompressed(rc *rest.Config) {
	if onThisMachine(rc.Host) {
		rc.DisableCompression = true
	}
}

// onThisMachine reports whether host (a URL or HOST[:PORT]) names a
// loopback address or localhost.
func onThisMachine(host string) bool {
	if u, err := url.Parse(host); err == nil && u.Host != "" {
		host = u.Host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
