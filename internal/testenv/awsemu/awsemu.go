// Package awsemu runs a local, multi-region AWS emulator for tests and
// benchmarks, built from real kumo servers (github.com/sivchari/kumo).
//
// # One kumo per region
//
// kumo emulates one region per process: every service creates its storage in
// a package init() and takes its region from AWS_DEFAULT_REGION at that
// moment (ARNs, EKS endpoints and OIDC issuers embed it). All
// kumo.NewServer() instances in a process share those singletons, so
// several in-process servers would share one state and one region no matter
// how the environment is juggled between starts. To get regions that really
// are independent (a cluster created in us-east-1 is not listed in
// eu-west-1), awsemu runs each region's kumo as its own child process.
//
// The child is the small command in ./kumoregion, built once with `go build`
// into the user cache directory (go build skips relinking while the binary
// is current). Each child runs in its own process group, gets
// PR_SET_PDEATHSIG on Linux, and also exits when its stdin pipe closes, so
// no kumo outlives the test binary even if it is killed.
//
// # One endpoint, routed by credential scope
//
// Code under test configures a single endpoint (AWS_ENDPOINT_URL or
// aws.Config.BaseEndpoint) exactly as it would configure nothing at all
// against real AWS, and picks the region only through aws.Config.Region.
// The only place an SDK request carries that region is the SigV4 credential
// scope (Credential=AKID/DATE/REGION/SERVICE/aws4_request in the
// Authorization header, or the X-Amz-Credential query parameter of a
// presigned URL), so the router in front of the kumos dispatches on it. That
// keeps the code under test unaware of the emulator: no per-region
// endpoints, no custom resolvers.
//
// Requests naming a region that is not served are answered at once with an
// AWS-shaped HTTP 400 error (code [ErrCodeRegionNotServed]) in the protocol
// of the calling service, so SDK calls fail fast with a message naming the
// region instead of hanging or being retried.
//
// IAM is a global service in AWS: its roles are visible from every region.
// Requests whose credential-scope service is "iam" are therefore all sent to
// the primary region's kumo (Regions()[0]). Every other service is regional.
//
// # EKS updates: emulated by the router, because kumo lacks them
//
// kumo v0.33.1 implements no EKS update operation. The router emulates
// UpdateClusterVersion (POST /clusters/NAME/updates), UpdateNodegroupVersion
// (POST /clusters/NAME/node-groups/NG/update-version), UpdateNodegroupConfig
// (POST /clusters/NAME/node-groups/NG/update-config, scalingConfig only)
// and DescribeUpdate (GET /clusters/NAME/updates/ID, ?nodegroupName=NG for
// a node group's update) — the paths and bodies aws-sdk-go-v2 sends —
// with per-region state of its own, and overlays that state on kumo's
// DescribeCluster and DescribeNodegroup answers (version, releaseVersion,
// scalingConfig, and status UPDATING while an update runs). An update is
// InProgress for [DefaultUpdateDuration] ([Emulator.SetUpdateDuration])
// and then Successful, when its change becomes visible. The rules are
// EKS's: the control plane goes up one minor version at a time and never
// down (InvalidParameterException "Unsupported Kubernetes minor version
// update from A to B"), only when every node group runs its version; a
// node group goes at most to the cluster's version, never back; sizes obey
// min ≤ desired ≤ max, max ≥ 1; a second update while one runs is
// ResourceInUseException. CreateNodegroup is relayed to kumo and the new
// group gets the cluster's emulated version (or the one asked, never newer
// than the cluster's). These are harness emulations, not kumo behaviour.
// [Emulator.Writes] counts write requests per region, so tests can prove
// a run wrote nothing.
//
// Per-region latency ([Options.Latency]) is injected by the router before
// forwarding, once per HTTP request, to make region fan-out costs visible in
// benchmarks.
package awsemu

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// DefaultRegions are the regions served when Options.Regions is empty.
var DefaultRegions = []string{"us-east-1", "eu-west-1"}

// Fake static credentials returned by Config. kumo does not verify
// signatures; the values only need to be well-formed.
const (
	AccessKeyID     = "AKIAKILNEMULATOR0000"
	SecretAccessKey = "kiln-awsemu-secret-access-key-not-a-secret"
)

// EnvKumoBinary names an environment variable that, when set, gives the path
// of a prebuilt kumoregion binary to use instead of building one.
const EnvKumoBinary = "KILN_AWSEMU_KUMO_BIN"

// Options configures Start.
type Options struct {
	// Regions to serve, one kumo each. The first is the primary region,
	// which also holds the global IAM state. Default: DefaultRegions.
	Regions []string

	// Latency is injected before every request to the given region, for
	// benchmarks. Keys must be served regions.
	Latency map[string]time.Duration

	// KumoBinary is the path of a prebuilt kumoregion binary. Default:
	// $KILN_AWSEMU_KUMO_BIN, else the binary is built from source with go
	// build (which needs this package's source tree and a Go toolchain).
	KumoBinary string
}

// Emulator is a running multi-region AWS emulator. Create it with Start and
// stop it with Close.
type Emulator struct {
	regions  []string
	primary  string
	backends map[string]*backend

	endpoint string
	server   *http.Server
	served   chan struct{} // closed when the router's Serve returns
	tr       *http.Transport

	countMu sync.Mutex
	counts  map[string]int

	// eks is the emulation of the EKS operations kumo lacks.
	eks *eksUpdates
	// az is the emulation of availability zones (zones.go).
	az *zoneState
	// addons is the emulation of EKS add-ons (addons.go).
	addons *addonStore
	// access is the emulation of EKS access entries (access.go).
	access *accessStore
	// faults are the injected failures (faults.go).
	faults *faultStore
	// lt is the emulation of EC2 launch templates (launchtemplates.go).
	lt *ltStore
	// net is the emulation of network interfaces and security-group
	// references (network.go); fargate of Fargate profiles (fargate.go).
	net     netStore
	fargate fargateStore

	closeOnce sync.Once
	closeErr  error
}

// backend is one region's kumo and the proxy in front of it.
type backend struct {
	region  string
	latency time.Duration
	proc    *kumoProc
	proxy   *httputil.ReverseProxy
}

// Start builds (if needed) and starts one kumo per region and the router in
// front of them, listening on 127.0.0.1 on a free port. ctx bounds the
// start-up only (build and child start); the emulator then runs until Close.
func Start(ctx context.Context, opts Options) (*Emulator, error) {
	regions, err := normalizeRegions(opts.Regions)
	if err != nil {
		return nil, err
	}

	for r := range opts.Latency {
		if !slices.Contains(regions, r) {
			return nil, fmt.Errorf("awsemu: latency given for region %q, which is not served (serving %s)", r, strings.Join(regions, ", "))
		}
	}

	bin, err := kumoBinary(ctx, opts.KumoBinary)
	if err != nil {
		return nil, err
	}

	e := &Emulator{
		regions:  regions,
		primary:  regions[0],
		backends: make(map[string]*backend, len(regions)),
		counts:   make(map[string]int),
		eks:      newEKSUpdates(),
		az:       &zoneState{zones: map[string][]Zone{}, subnets: map[string]string{}},
		addons:   &addonStore{addons: map[string]map[string]*addonState{}},
		access:   &accessStore{entries: map[string]map[string]*accessEntry{}, modes: map[string]string{}},
		faults:   newFaultStore(),
		lt:       &ltStore{byRegion: map[string]map[string]*LaunchTemplate{}},
		served:   make(chan struct{}),
		tr: &http.Transport{
			Proxy:               nil, // never send emulator traffic through an HTTP proxy
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 32,
			IdleConnTimeout:     30 * time.Second,
		},
	}

	procs := make([]*kumoProc, len(regions))
	errs := make([]error, len(regions))

	var wg sync.WaitGroup
	for i, r := range regions {
		wg.Go(func() { procs[i], errs[i] = startKumo(ctx, bin, r) })
	}

	wg.Wait()

	if err := errors.Join(errs...); err != nil {
		for _, p := range procs {
			if p != nil {
				_ = p.stop()
			}
		}

		return nil, err
	}

	for i, r := range regions {
		e.backends[r] = &backend{
			region:  r,
			latency: opts.Latency[r],
			proc:    procs[i],
			proxy:   e.newProxy(procs[i]),
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		for _, p := range procs {
			_ = p.stop()
		}

		return nil, fmt.Errorf("awsemu: listening for the router: %w", err)
	}

	e.endpoint = "http://" + ln.Addr().String()
	e.server = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 30 * time.Second,
	}

	go func() {
		defer close(e.served)

		_ = e.server.Serve(ln)
	}()

	return e, nil
}

func normalizeRegions(in []string) ([]string, error) {
	if len(in) == 0 {
		return slices.Clone(DefaultRegions), nil
	}

	out := make([]string, 0, len(in))
	for _, r := range in {
		if r == "" || strings.ContainsAny(r, "/ \t\r\n") {
			return nil, fmt.Errorf("awsemu: invalid region name %q", r)
		}

		if slices.Contains(out, r) {
			return nil, fmt.Errorf("awsemu: region %q listed twice", r)
		}

		out = append(out, r)
	}

	return out, nil
}

// Endpoint returns the router's base URL, "http://127.0.0.1:PORT". It serves
// every service and region, so it is usable as AWS_ENDPOINT_URL.
func (e *Emulator) Endpoint() string { return e.endpoint }

// Regions returns the served regions, primary first.
func (e *Emulator) Regions() []string { return slices.Clone(e.regions) }

// Config returns an aws.Config for region with static fake credentials and
// BaseEndpoint set to the router. The region need not be served: requests
// for an unserved region fail with ErrCodeRegionNotServed, which is how
// tests exercise that path.
//
// The config is built directly rather than with config.LoadDefaultConfig so
// that the developer's ~/.aws files and AWS_* environment (profiles,
// endpoint overrides, proxies) cannot leak into tests.
func (e *Emulator) Config(ctx context.Context, region string) (aws.Config, error) {
	if err := ctx.Err(); err != nil {
		return aws.Config{}, err
	}

	if region == "" {
		return aws.Config{}, errors.New("awsemu: Config: empty region")
	}

	return aws.Config{
		Region:       region,
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, "")),
		BaseEndpoint: aws.String(e.endpoint),
	}, nil
}

// Requests returns how many requests the router received whose credential
// scope named region, including requests rejected because the region is not
// served. IAM requests count against the region in their scope, not the
// primary region that answers them.
func (e *Emulator) Requests(region string) int {
	e.countMu.Lock()
	defer e.countMu.Unlock()

	return e.counts[region]
}

// requestCounts returns a copy of all counters (for tests).
func (e *Emulator) requestCounts() map[string]int {
	e.countMu.Lock()
	defer e.countMu.Unlock()

	return maps.Clone(e.counts)
}

// Close stops the router and every kumo process and waits for them to exit.
// It is safe to call more than once; later calls return the first result.
func (e *Emulator) Close() error {
	e.closeOnce.Do(func() {
		var errs []error

		if e.server != nil {
			if err := e.server.Close(); err != nil {
				errs = append(errs, fmt.Errorf("awsemu: closing router: %w", err))
			}

			<-e.served
		}

		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)

		for _, b := range e.backends {
			wg.Go(func() {
				if err := b.proc.stop(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}

		wg.Wait()
		e.tr.CloseIdleConnections()

		e.closeErr = errors.Join(errs...)
	})

	return e.closeErr
}
