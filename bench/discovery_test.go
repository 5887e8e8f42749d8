package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// BenchmarkDiscovery times `kiln create` and then `kiln status` with an
// engineer's kubeconfig of 20 contexts: the real cluster (kiln-bench), 8
// contexts whose server refuses connections, 8 whose server rejects the
// credentials, and 3 whose exec credential plugin takes
// $KILN_BENCH_SLOW_S (default 60) seconds to answer. Each op is a fresh
// cluster NAME: create with --context, then status without it (kiln finds
// the cluster), then an unmeasured destroy.
//
// "after" is the kiln under test ($KILN_BENCH_KILN or the working tree);
// "before" runs when $KILN_BENCH_KILN_BEFORE names an older binary.
//
//	create-ms  wall time of kiln create (discovery plus the install)
//	status-ms  wall time of kiln status
func BenchmarkDiscovery(b *testing.B) {
	c := needCluster(b)
	kc := slowKubeconfig(b, c, envInt("KILN_BENCH_SLOW_S", 60))
	bins := []struct{ name, bin string }{{"after", ""}}
	if before := os.Getenv("KILN_BENCH_KILN_BEFORE"); before != "" {
		bins = append([]struct{ name, bin string }{{"before", before}}, bins...)
	}
	for _, v := range bins {
		b.Run(v.name, func(b *testing.B) {
			bin := v.bin
			if bin == "" {
				bin = kilnBinary(b)
			}
			var create, status durations
			i := 0
			for b.Loop() {
				i++
				name := fmt.Sprintf("disc-%s-%d", v.name, i)
				e := newKilnEnv(b, bin, nil)
				t0 := time.Now()
				if err := e.runIn(10*time.Minute, kc, "create", "kube", name, "--context", "kiln-bench"); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := e.runIn(10*time.Minute, kc, "status", "kube", name); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				create, status = append(create, t1.Sub(t0)), append(status, t2.Sub(t1))
				b.StopTimer()
				if err := e.runIn(10*time.Minute, kc, "destroy", "kube", name, "--context", "kiln-bench", "--yes"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(create.meanMS(), "create-ms")
			b.ReportMetric(status.meanMS(), "status-ms")
		})
	}
}

// slowKubeconfig writes the 20-context kubeconfig of BenchmarkDiscovery.
func slowKubeconfig(b *testing.B, c *testcluster.Cluster, slowS int) string {
	b.Helper()
	dir := b.TempDir()
	cfg := clientcmdapi.NewConfig()
	add := func(name string, cl *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		cfg.Clusters[name], cfg.AuthInfos[name] = cl, u
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	real := &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.RESTConfig.CAData, InsecureSkipTLSVerify: len(c.RESTConfig.CAData) == 0}
	add("kiln-bench", real, &clientcmdapi.AuthInfo{Token: c.RESTConfig.BearerToken})
	for i := 1; i <= 8; i++ {
		add(fmt.Sprintf("refused-%d", i), &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}, &clientcmdapi.AuthInfo{Token: "x"})
		add(fmt.Sprintf("denied-%d", i), real, &clientcmdapi.AuthInfo{Token: "not-a-valid-token"})
	}
	plugin := filepath.Join(dir, "slow-plugin")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\nsleep "+strconv.Itoa(slowS)+"\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'\n"), 0o700); err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		add(fmt.Sprintf("slow-%d", i), &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true},
			&clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: plugin, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}})
	}
	cfg.CurrentContext = "kiln-bench"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// runIn runs kiln headless against kubeconfig kc, to completion, bounded by
// timeout.
func (e *kilnEnv) runIn(timeout time.Duration, kc string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args = append(args, "--kubeconfig", kc, "--keyring-backend", "file", "--headless", "-o", "json")
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = append(os.Environ(), e.vars...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kiln %v: %w\n--- stdout\n%s--- stderr\n%s", args, err, stdout.Bytes(), stderr.Bytes())
	}
	return nil
}
