package bench

import (
	"bytes"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// BenchmarkList times `kiln list kube` (every kiln cluster of every
// kubeconfig context, searched in parallel) with a kubeconfig of 5
// contexts: 4 reach the bench control plane, where the project benchmarks'
// platform (bench-proj) is installed, and one (mute) reaches a server that
// accepts TCP connections and never answers, not even the TLS handshake
// (a firewalled or hung API server). Each op is one kiln process, start to
// exit:
//
//	discovery-timeout=default  kiln list kube (the default bound, 5 s)
//	discovery-timeout=1s       kiln list kube --discovery-timeout 1s
//
// Each case runs at most $KILN_BENCH_LIST_ITER times (default 3) whatever
// -benchtime says (further iterations do nothing): every default run takes
// 5 s.
//
// Metrics: wall-ms (mean), wall-max-ms, runs (the kiln runs measured:
// b.N counts the iterations that did nothing too), rss-MB (peak, max over ops), clusters (rows
// naming a kiln cluster), unreachable (rows reporting a context that could
// not be inspected). The unreachable context bounds the run: kiln reports
// it after the timeout instead of waiting on it.
func BenchmarkList(b *testing.B) {
	c := needCluster(b)
	tmpl := projectPlatform(b, c)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	conns := make(chan net.Conn, 1024)
	b.Cleanup(func() {
		ln.Close()
		close(conns)
		for cn := range conns {
			cn.Close()
		}
	})
	go func() {
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case conns <- cn: // held, never answered
			default:
				cn.Close()
			}
		}
	}()
	cfg := clientcmdapi.NewConfig()
	add := func(name string, cl *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		cfg.Clusters[name], cfg.AuthInfos[name] = cl, u
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	real := &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.RESTConfig.CAData, InsecureSkipTLSVerify: len(c.RESTConfig.CAData) == 0}
	for _, name := range []string{"kiln-bench", "ctx-2", "ctx-3", "ctx-4"} {
		add(name, real, &clientcmdapi.AuthInfo{Token: c.RESTConfig.BearerToken})
	}
	add("mute", &clientcmdapi.Cluster{Server: "https://" + ln.Addr().String(), InsecureSkipTLSVerify: true}, &clientcmdapi.AuthInfo{Token: "x"})
	cfg.CurrentContext = "kiln-bench"
	kc := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		b.Fatal(err)
	}
	e := &kilnEnv{bin: tmpl.env.bin, vars: tmpl.env.vars}
	listIter := envInt("KILN_BENCH_LIST_ITER", 3)
	for _, v := range []struct{ name, timeout string }{{"default", ""}, {"1s", "1s"}} {
		b.Run("discovery-timeout="+v.name, func(b *testing.B) {
			args := []string{"list", "kube"}
			if v.timeout != "" {
				args = append(args, "--discovery-timeout", v.timeout)
			}
			var walls durations
			var rss int64
			var clusters, unreachable int
			i := 0
			for b.Loop() {
				if i++; i > listIter {
					continue
				}
				m, err := e.runMeasuredIn(kc, args...)
				if err != nil {
					b.Fatal(err)
				}
				walls = append(walls, m.wall)
				rss = max(rss, m.rssKB)
				clusters, unreachable = listRows(m.stdout)
			}
			if clusters != 4 || unreachable != 1 {
				b.Errorf("kiln list: %d cluster rows, %d unreachable; want 4 and 1", clusters, unreachable)
			}
			b.ReportMetric(walls.meanMS(), "wall-ms")
			b.ReportMetric(walls.maxMS(), "wall-max-ms")
			b.ReportMetric(float64(len(walls)), "runs")
			b.ReportMetric(float64(rss)/1024, "rss-MB")
			b.ReportMetric(float64(clusters), "clusters")
			b.ReportMetric(float64(unreachable), "unreachable")
			b.Logf("kiln %v: %d runs, %d cluster rows, %d unreachable", args, len(walls), clusters, unreachable)
		})
	}
}

// listRows counts the cluster events of kiln list's NDJSON output: rows
// naming a cluster, and rows reporting a location that could not be
// inspected.
func listRows(out []byte) (clusters, unreachable int) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		var ev struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Error string `json:"error"`
		}
		if json.Unmarshal(line, &ev) != nil || ev.Type != "cluster" {
			continue
		}
		if ev.Error != "" {
			unreachable++
		} else if ev.Name != "" {
			clusters++
		}
	}
	return clusters, unreachable
}
