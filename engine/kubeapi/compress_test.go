package kubeapi

import (
	"testing"

	"k8s.io/client-go/rest"
)

func TestUncompressedOnlyOnThisMachine(t *testing.T) {
	for host, want := range map[string]bool{
		"https://127.0.0.1:6443":            true,
		"https://127.5.6.7":                 true,
		"https://[::1]:6443":                true,
		"https://localhost:8443":            true,
		"https://LOCALHOST.":                true,
		"127.0.0.1:6443":                    true,
		"https://10.0.0.1:6443":             false,
		"https://abc.gr7.eks.amazonaws.com": false,
		"https://localhost.example.com":     false,
		"https://[2001:db8::1]:443":         false,
		"":                                  false,
	} {
		rc := &rest.Config{Host: host}
		Uncompressed(rc)
		if rc.DisableCompression != want {
			t.Errorf("%q: DisableCompression %v, want %v", host, rc.DisableCompression, want)
		}
	}
	// A kubeconfig that turned it off keeps it off.
	rc := &rest.Config{Host: "https://10.0.0.1", DisableCompression: true}
	Uncompressed(rc)
	if !rc.DisableCompression {
		t.Error("a remote server's disable-compression was turned back on")
	}
}
