package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// certStore holds the serving certificate and keeps it in step with the
// files, as keyStore does for keys.json: a Secret volume is swapped by
// kubelet the same way (a `..data` symlink renamed), so the store watches
// the directories of both files and polls as a safety net. A pair that
// cannot be loaded (a half-renewed certificate written by hand, a key that
// does not match) keeps the certificate in force.
type certStore struct {
	certFile, keyFile string
	interval          time.Duration
	log               *slog.Logger

	cur atomic.Pointer[tls.Certificate]
	// Loader goroutine only.
	digest  [sha256.Size]byte
	lastErr string
}

func newCertStore(certFile, keyFile string, interval time.Duration, log *slog.Logger) *certStore {
	return &certStore{certFile: certFile, keyFile: keyFile, interval: interval, log: log}
}

// load reads both files and swaps the certificate if they changed. It
// returns the failure, for the first load (which must succeed).
func (c *certStore) load() error {
	certPEM, err := os.ReadFile(c.certFile)
	if err != nil {
		return c.fail(fmt.Errorf("read --tls-cert %s: %w", c.certFile, err))
	}
	keyPEM, err := os.ReadFile(c.keyFile)
	if err != nil {
		return c.fail(fmt.Errorf("read --tls-key %s: %w", c.keyFile, err))
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	if c.cur.Load() != nil && sum == c.digest {
		return nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return c.fail(fmt.Errorf("--tls-cert %s and --tls-key %s: %w", c.certFile, c.keyFile, err))
	}
	c.digest, c.lastErr = sum, ""
	c.cur.Store(&cert)
	subject := ""
	if cert.Leaf != nil {
		subject = cert.Leaf.Subject.String()
	}
	c.log.Info("certificate loaded", "file", c.certFile, "subject", subject)
	return nil
}

func (c *certStore) fail(err error) error {
	if err.Error() != c.lastErr {
		c.lastErr = err.Error()
		if c.cur.Load() != nil {
			c.log.Error("certificate not reloaded; the certificate in force stays", "error", c.lastErr)
		}
	}
	return err
}

// getCertificate is tls.Config.GetCertificate: the certificate in force.
func (c *certStore) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cert := c.cur.Load(); cert != nil {
		return cert, nil
	}
	return nil, errors.New("no certificate loaded")
}

// run reloads on every change until ctx ends.
func (c *certStore) run(ctx context.Context) {
	watchDirs(ctx, uniqueDirs(c.certFile, c.keyFile), c.interval, c.log, "the certificate", func() { _ = c.load() })
}

func uniqueDirs(files ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		d := filepath.Dir(f)
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}
