package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCert is a self-signed serving certificate for *.DOMAIN and
// 127.0.0.1, named by its common name.
type testCert struct {
	cn              string
	certPEM, keyPEM []byte
	cert            *x509.Certificate
}

func newCert(t *testing.T, cn, domain string) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		DNSNames:              []string{"*." + domain, "localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return testCert{cn: cn, cert: cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
}

// tlsDir is laid out like a kubelet Secret volume of a kubernetes.io/tls
// Secret (tls.crt and tls.key through ..data), swapped as kubelet does.
type tlsDir struct {
	t    *testing.T
	path string
	n    int
	old  string
}

func newTLSDir(t *testing.T, c testCert) *tlsDir {
	d := &tlsDir{t: t, path: t.TempDir()}
	d.set(c.certPEM, c.keyPEM)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(d.path, f)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func (d *tlsDir) set(certPEM, keyPEM []byte) {
	d.t.Helper()
	d.n++
	ts := fmt.Sprintf("..2026_01_01_00_00_00.%d", d.n)
	must := func(err error) {
		if err != nil {
			d.t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(d.path, ts), 0o755))
	must(os.WriteFile(filepath.Join(d.path, ts, "tls.crt"), certPEM, 0o644))
	must(os.WriteFile(filepath.Join(d.path, ts, "tls.key"), keyPEM, 0o600))
	tmp := filepath.Join(d.path, "..data_tmp")
	must(os.Symlink(ts, tmp))
	must(os.Rename(tmp, filepath.Join(d.path, "..data")))
	if d.old != "" {
		must(os.RemoveAll(filepath.Join(d.path, d.old)))
	}
	d.old = ts
}

// The gateway with --tls-cert/--tls-key serves HTTPS on --listen (auth and
// routing unchanged), and after the Secret volume is swapped it serves the
// new certificate without a restart; a pair that does not load keeps the
// certificate in force.
func TestGatewayProcessTLS(t *testing.T) {
	const cluster, domain = "dev1", "dev1.kiln.test"
	key := newKey(t)
	auth := newAuthDir(t, key)
	backend := newBackend(t)
	first, second := newCert(t, "kiln-first", domain), newCert(t, "kiln-second", domain)
	certs := newTLSDir(t, first)

	gw := startGateway(t, "--auth-dir", auth.path, "--cluster", cluster, "--domain", domain,
		"--metrics-listen", "127.0.0.1:0",
		"--tls-cert", filepath.Join(certs.path, "tls.crt"), "--tls-key", filepath.Join(certs.path, "tls.key"),
		"--backend", "default/web="+backend.Listener.Addr().String())
	metricsAddr := <-gw.addrs
	eventually(t, "/readyz (plain HTTP on --metrics-listen) answers 200", func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	roots := x509.NewCertPool()
	roots.AddCert(first.cert)
	roots.AddCert(second.cert)
	// A new connection per request: each one shows the certificate in force.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}
	tok := key.token(t, cluster, "default")
	get := func() (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+gw.addr+"/t/default/p/web/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.TLS.PeerCertificates[0].Subject.CommonName, nil
	}

	code, cn, err := get()
	if err != nil || code != http.StatusOK || cn != first.cn {
		t.Fatalf("HTTPS: code %d, certificate %q, err %v; want 200 with %s\n%s", code, cn, err, first.cn, gw.log())
	}
	if code, _, _ := func() (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+gw.addr+"/t/default/p/web/x", nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		resp.Body.Close()
		return resp.StatusCode, "", nil
	}(); code != http.StatusUnauthorized {
		t.Errorf("HTTPS without a token: code %d, want 401", code)
	}
	if resp, err := http.Get("http://" + gw.addr + "/t/default/p/web/x"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to the TLS port answered 200")
		}
	}

	certs.set(second.certPEM, second.keyPEM)
	eventually(t, "the renewed certificate is served", func() bool {
		_, cn, err := get()
		return err == nil && cn == second.cn
	})

	// A certificate with another key's pair does not load: the one in
	// force stays, and the failure is logged.
	certs.set(first.certPEM, second.keyPEM)
	eventually(t, "the bad pair is logged", func() bool {
		return strings.Contains(gw.log(), "certificate not reloaded")
	})
	if code, cn, err := get(); err != nil || code != http.StatusOK || cn != second.cn {
		t.Fatalf("after a bad pair: code %d, certificate %q, err %v; want 200 with %s", code, cn, err, second.cn)
	}
}

// A gateway given only one of the pair, or a pair that does not load,
// refuses to start.
func TestGatewayProcessTLSBadInput(t *testing.T) {
	key := newKey(t)
	auth := newAuthDir(t, key)
	bin, err := buildKiln()
	if err != nil {
		t.Fatal(err)
	}
	c := newCert(t, "x", "dev1.kiln.test")
	dir := t.TempDir()
	crt, k := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(crt, c.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k, c.certPEM, 0o600); err != nil { // not a key
		t.Fatal(err)
	}
	base := []string{"gateway", "--listen", "127.0.0.1:0", "--auth-dir", auth.path, "--cluster", "dev1", "--domain", "dev1.kiln.test"}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert", crt}, "give both"},
		{"not a key", []string{"--tls-cert", crt, "--tls-key", k}, "--tls-key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.Command(bin, append(base, tt.args...)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Fatalf("err %v, output:\n%s\nwant a failure mentioning %q", err, out, tt.want)
			}
		})
	}
}
