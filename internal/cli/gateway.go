package cli

import (
	"sort"

	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/internal/gateway"
)

func newGatewayCmd(g *globals) *cobra.Command {
	cfg := gateway.Config{}
	var backends []string
	cmd := &cobra.Command{
		Use:   "gateway --auth-dir DIR --cluster NAME --domain DOMAIN",
		Short: "Run the tenant gateway: authenticate tenant tokens and route to projects",
		Long: `gateway is the platform's default gateway (the kiln-gateway Deployment runs
it). It accepts a request only with "Authorization: Bearer <tenant token>"
that verifies against the trusted keys in DIR/keys.json (the mounted
kiln-auth ConfigMap): RS256, a kid the file lists, iss kiln:NAME. The
token's sub is its tenant. It routes

  Host: P.T.DOMAIN           to Service P in namespace kiln-tenant-T
  /t/T/p/P/rest (any Host)   the same, with the path /rest

and only for tenant T's own token: 401 without a valid token, 403 for
another tenant's, 404 for an unknown project, 503 (with Retry-After) when
the project has no ready endpoints. keys.json is reloaded when it changes
(kubelet's ConfigMap volume swap included): a key added by rotate-key is
accepted and a removed key refused within seconds, without a restart.

Backends are found by cluster DNS (P.kiln-tenant-T.svc, port 80), so the
gateway needs no Kubernetes API access. For local use and tests,
--backend T/P=HOST:PORT (repeatable) replaces cluster DNS: a project not
listed is unknown.

With --tls-cert and --tls-key (the mounted Secret of spec.gateway.tls),
--listen serves HTTPS; the pair is reloaded when the files change (kubelet's
Secret volume swap included), so a renewed certificate is served without a
restart, and a pair that does not load keeps the one in force.

/healthz, /readyz (ready once keys are loaded, and not while keys.json
cannot be read) and Prometheus /metrics are served on --metrics-listen, or
on --listen when that is empty (then /metrics answers loopback clients
only, unless --metrics-public).

Limits: request headers over --max-header-bytes are refused with 431; a
backend that sends no response headers within --backend-timeout gets the
client a 504; at most --max-conns connections are held at once; a tenant
with --tenant-concurrency requests in flight gets 503 for the next, so one
tenant cannot starve the others. Projects are dialled by fully qualified
name (P.kiln-tenant-T.svc.CLUSTER-DOMAIN.). The access
log is JSON lines on stderr; it never contains tokens. Lines are written
in batches by a writer of their own, so no request waits for stderr; if
stderr falls behind by more than --log-buffer-bytes, lines are dropped,
counted (kiln_gateway_log_dropped_lines_total) and reported in the log
once it catches up. On exit every pending line is written. SIGTERM drains the
requests in flight and exits 0.

Plain HTTP requests of the common shape (HTTP/1.1, no body or a
Content-Length one, a path that needs no escaping, no Upgrade, Expect or
chunked upload) are proxied by a fast path of the gateway's own; every
other request, and HTTPS, by Go's net/http proxy, with the same checks
and the same answers. On Linux the fast path runs on event loops of its
own (epoll, one per CPU) for requests without a body and answers with a
Content-Length; --no-event-loop serves it with a goroutine per
connection instead. --net-http-only turns the fast path off.`,
		Example: `  kiln gateway --listen 127.0.0.1:8080 --auth-dir ./auth --cluster dev1 \
    --domain dev1.kiln.test --backend default/web=127.0.0.1:9000
  curl -H "Authorization: Bearer $(cat ~/.local/state/kiln/kube/dev1/tokens/tokens/default)" \
    http://127.0.0.1:8080/t/default/p/web/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, name := range []string{"auth-dir", "cluster", "domain"} {
				if !cmd.Flags().Changed(name) {
					return failure.BadInput("--%s: required (see `kiln gateway --help`)", name)
				}
			}
			for _, b := range backends {
				route, addr, err := gateway.ParseBackend(b)
				if err != nil {
					return failure.BadInput("%v", err)
				}
				if cfg.Backends == nil {
					cfg.Backends = map[gateway.Route]string{}
				}
				if _, dup := cfg.Backends[route]; dup {
					return failure.BadInput("--backend: %s is given twice", route)
				}
				cfg.Backends[route] = addr
			}
			cfg.LogOutput = g.stderr
			gw, err := gateway.New(cfg)
			if err != nil {
				return failure.BadInput("%v", err)
			}
			gateway.SetMemoryLimit(gw.Logger())
			if len(cfg.Backends) > 0 {
				routes := make([]string, 0, len(cfg.Backends))
				for r := range cfg.Backends {
					routes = append(routes, r.String())
				}
				sort.Strings(routes)
				gw.Logger().Info("backends from --backend, not cluster DNS", "routes", routes)
			}
			return gw.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", gateway.DefaultListen, "address to serve tenants on")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", "", "address for /healthz, /readyz and /metrics (default: on --listen)")
	f.StringVar(&cfg.AuthDir, "auth-dir", "", "directory holding keys.json (the mounted kiln-auth ConfigMap)")
	f.StringVar(&cfg.Cluster, "cluster", "", "cluster NAME: tokens must have iss kiln:NAME")
	f.StringVar(&cfg.Domain, "domain", "", "cluster domain: Host P.T.DOMAIN routes to project P of tenant T")
	f.StringArrayVar(&backends, "backend", nil, "TENANT/PROJECT=HOST:PORT instead of cluster DNS (repeatable)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate (chain) file: serve HTTPS on --listen, reloading it when it changes (with --tls-key)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key file of --tls-cert")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", gateway.DefaultShutdownTimeout, "on SIGTERM, wait this long for requests in flight")
	f.IntVar(&cfg.MaxHeaderBytes, "max-header-bytes", gateway.DefaultMaxHeaderBytes, "largest request headers accepted (larger: 431)")
	f.DurationVar(&cfg.BackendTimeout, "backend-timeout", gateway.DefaultBackendTimeout, "longest wait for a project's response headers (then 504)")
	f.IntVar(&cfg.MaxConns, "max-conns", gateway.DefaultMaxConns, "most client connections held open at once")
	f.IntVar(&cfg.TenantConcurrency, "tenant-concurrency", gateway.DefaultTenantConcurrency, "most requests of one tenant in flight (more: 503)")
	f.StringVar(&cfg.ClusterDomain, "cluster-domain", gateway.DefaultClusterDomain, "the cluster's DNS domain, for project Service names")
	f.IntVar(&cfg.LogBufferBytes, "log-buffer-bytes", gateway.DefaultLogBufferBytes, "most log bytes waiting to be written (more: lines are dropped and counted in /metrics)")
	f.BoolVar(&cfg.NetHTTPOnly, "net-http-only", false, "proxy every request through Go's net/http, the fast path off (slower; for comparison, or if the fast path misbehaves)")
	f.BoolVar(&cfg.NoEventLoop, "no-event-loop", false, "serve the fast path with a goroutine per connection, not its epoll event loops (Linux; for comparison, or if the event loop misbehaves)")
	f.BoolVar(&cfg.MetricsPublic, "metrics-public", false, "without --metrics-listen, serve /metrics to every client, not only loopback")
	return cmd
}
