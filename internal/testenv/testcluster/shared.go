package testcluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Main runs a package's tests against one shared cluster: call it from
// TestMain as `os.Exit(testcluster.Main(m, opts, &cluster))`. The cluster is
// stopped after the tests, also when they panic.
func Main(m *testing.M, opts Options, out **Cluster) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	c, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
		return 1
	}
	defer func() { _ = c.Stop() }()
	*out = c
	return m.Run()
}

// Namespace creates a namespace for the test, named after it, and deletes
// it when the test ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-") + "-" + randomHex(3)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}
