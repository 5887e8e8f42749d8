// Package aws is the provider for kiln clusters on Amazon EKS. Discovery
// searches every region (a built-in list, real AWS's DescribeRegions when it
// answers, or --regions) in parallel for EKS clusters tagged
// kiln.dev/cluster=NAME; the infrastructure phase creates a VPC, subnets,
// internet gateway, route table, security group, IAM roles, the EKS cluster
// and a managed node group, each step idempotent by a tag lookup; destroy
// removes them in reverse, verified, finding leftovers by tag.
package aws

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/trace"
)

// Tags every kiln-created AWS resource carries.
const (
	TagCluster   = "kiln.dev/cluster"
	TagManagedBy = "app.kubernetes.io/managed-by"
	TagRole      = "kiln.dev/role"
)

// KubeContextEnv names the environment variable of the endpoint mapping
// (same as --kube-context-override).
const KubeContextEnv = "KILN_AWS_KUBE_CONTEXT"

// Defaults.
const (
	DefaultInstanceType = "t3.medium"
	DefaultNodes        = 2
	MaxNodes            = 100
	// DefaultTimeout bounds the inspection of one region during discovery.
	DefaultTimeout = 10 * time.Second
	// DefaultConcurrency bounds how many regions are inspected at once. It
	// is above the size of the built-in list so that the default scan takes
	// about as long as one region; the bound matters for long --regions.
	DefaultConcurrency = 20
)

// Limits are the aws provider's waits, bounds and retries. Each zero field
// is its default (see limits); tests shorten them per provider, so no
// package state changes under a parallel test.
type Limits struct {
	// Attempts is how many times one AWS request of the infrastructure
	// steps is tried before its error is taken as final (default 13,
	// eksctl's; a test shows 3, the SDK's default, is not enough).
	Attempts int
	// ClaimRenewEvery is how often the holder renews its claim (default
	// 1 min).
	ClaimRenewEvery time.Duration
	// KubeconfigLockWait bounds the wait for a kubeconfig lock held by
	// kubectl or another kiln (default 30 s).
	KubeconfigLockWait time.Duration
	// Dependency bounds how long a DependencyViolation (or an interface in
	// use) may persist before destroy fails naming what blocks (default
	// 1 min).
	Dependency time.Duration
	// Release bounds the wait for interfaces AWS removes by itself once
	// their owner is gone (default 5 min).
	Release time.Duration
	// LoadBalancers bounds the wait for LoadBalancer Services and Ingresses
	// to be deleted (default 5 min; KILN_AWS_LB_WAIT overrides it).
	LoadBalancers time.Duration
	// APIProbe bounds the first read of the cluster's Kubernetes API: one
	// that does not answer in that time is taken as not served (default
	// 20 s).
	APIProbe time.Duration
}

// limits are p.Limits with each zero field set to its default.
func (p *Provider) limits() Limits {
	l := p.Limits
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if l.Attempts <= 0 {
		l.Attempts = 13
	}
	def(&l.ClaimRenewEvery, time.Minute)
	def(&l.KubeconfigLockWait, DefaultKubeconfigLockWait)
	def(&l.Dependency, time.Minute)
	def(&l.Release, 5*time.Minute)
	def(&l.LoadBalancers, 5*time.Minute)
	def(&l.APIProbe, 20*time.Second)
	return l
}

// Regions is the built-in region list: the regions enabled by default in
// every AWS account. Opt-in regions are searched when named with --regions
// (or when DescribeRegions lists them as enabled).
var Regions = []string{
	"us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1",
	"eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1",
	"ap-south-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
	"ap-southeast-1", "ap-southeast-2", "sa-east-1",
}

// azSuffixes are the availability zones kiln uses when DescribeAvailabilityZones
// does not answer; a region missing here uses a and b.
var azSuffixes = map[string][2]string{
	"ap-northeast-1": {"a", "c"},
	"us-west-1":      {"a", "c"}, // us-west-1b is not offered to new accounts
}

// Provider creates and finds kiln clusters on EKS.
type Provider struct {
	// actions words the provider's hints (engine.ActionsTaker; nil: the
	// kiln command); namer the inputs its events name (engine.NamerTaker;
	// nil: the flags).
	actions engine.Actions
	namer   engine.Namer
	// Region is --region ("" = the AWS configuration's default region).
	Region string
	// SearchRegions is --regions ("" = DescribeRegions or the built-in list).
	SearchRegions []string
	// Profile is --profile (shared config profile).
	Profile string
	// KubeOverride, when set, replaces the EKS cluster's Kubernetes
	// endpoint: every cluster is reached through the client it returns.
	// The CLI injects a kubeconfig context here (--kube-context-override /
	// KILN_AWS_KUBE_CONTEXT) for tests and local development against an
	// emulator; the provider itself knows nothing of kubeconfigs.
	KubeOverride func() (*rest.Config, kubernetes.Interface, error)
	// InstanceType and Nodes size the managed node group.
	InstanceType string
	Nodes        int
	// KubernetesVersion is the EKS control plane's Kubernetes version for a
	// cluster kiln creates (MAJOR.MINOR, like 1.30; "" is EKS's default).
	KubernetesVersion string
	// Change is what kiln upgrade changes of an existing cluster's
	// infrastructure (upgrade.go); the zero value changes nothing.
	Change Change
	// Access is what --admin and --viewer ask of the EKS access entries
	// (access.go), on create and upgrade alike; the zero value keeps them.
	Access Access
	// WriteKubeconfig, if set, is the kubeconfig file that gets (or has
	// updated) an entry for the cluster using `kiln aws token`.
	WriteKubeconfig string
	// KilnPath is the kiln executable the kubeconfig entry runs.
	KilnPath string
	// KubeconfigFile is the kubeconfig --write-kubeconfig writes to (the
	// files of $KUBECONFIG, joined by filepath.ListSeparator, else
	// ~/.kube/config; see WriteKubeconfig): destroy removes the
	// entries kiln wrote there ("" = none).
	KubeconfigFile string
	// Timeout bounds one region's inspection; Concurrency bounds the
	// regions inspected at once.
	Timeout     time.Duration
	Concurrency int
	// LoadConfig builds the AWS configuration for a region. Default: the
	// standard chain (environment, shared profiles, SSO, IMDS) with Profile;
	// AWS_ENDPOINT_URL is honoured by the SDK.
	LoadConfig func(ctx context.Context, region string) (aws.Config, error)
	// Limits are the provider's waits and retries (zero: the defaults).
	Limits Limits
	// Hooks are test hooks (engine.Hooks): the provider's checkpoints
	// (its infrastructure steps, its claim, the kubeconfig it writes) are
	// reported to them, and an engine.HostHook names the claim's host.
	// nil (every release build): none.
	Hooks engine.Hooks

	// hostname replaces the host in the claim's holder identity (tests).
	hostname string

	once       sync.Once
	defRegion  string
	defErr     error
	validated  bool
	validateMu sync.Mutex
}

// checkpoint marks the point named point of one of p's operations for
// p.Hooks.
func (p *Provider) checkpoint(ctx context.Context, point string) {
	engine.Checkpoint(ctx, p.Hooks, point)
}

// Name implements engine.Provider.
func (p *Provider) Name() string { return "aws" }

// Nouns implements engine.Provider: an aws location is a region of the
// account.
func (p *Provider) Nouns() engine.Nouns {
	return engine.Nouns{Location: "region", Scope: "account", Target: engine.InputRegion}
}

// DefaultExpose implements engine.DefaultExposer: an EKS cluster kiln
// creates has a cloud load-balancer controller, so the gateway's Service
// is type LoadBalancer.
func (p *Provider) DefaultExpose(context.Context, kubernetes.Interface, *config.ClusterConfig) (string, string, error) {
	return config.ExposeLoadBalancer, "EKS provisions a load balancer for a LoadBalancer Service", nil
}

// Explicit reports whether the user named the region (--region).
func (p *Provider) Explicit() bool { return p.Region != "" }

// Target implements engine.Provider: --region, else the configuration's
// default region.
func (p *Provider) Target() string {
	r, _ := p.DefaultRegion()
	return r
}

// DefaultRegion is --region, else the AWS configuration's region ("" when
// it has none); the error says why the configuration did not load.
func (p *Provider) DefaultRegion() (string, error) {
	if p.Region != "" {
		return p.Region, nil
	}
	p.once.Do(func() {
		cfg, err := p.config(context.Background(), "")
		p.defRegion, p.defErr = cfg.Region, err
	})
	return p.defRegion, p.defErr
}

// AWSConfig returns the AWS configuration for region (the standard chain,
// --profile, AWS_ENDPOINT_URL), with usable credentials: missing
// credentials are bad input (failure.Input).
func (p *Provider) AWSConfig(ctx context.Context, region string) (aws.Config, error) {
	cfg, err := p.config(ctx, region)
	if err != nil {
		return aws.Config{}, err
	}
	if err := checkCredentials(ctx, cfg); err != nil {
		return aws.Config{}, err
	}
	return cfg, nil
}

func checkCredentials(ctx context.Context, cfg aws.Config) error {
	const hint = "set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or {input}, or run `aws sso login`"
	if cfg.Credentials == nil {
		return input.New(failure.Input, input.Profile, "", "credentials: no AWS credentials found; "+hint)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(cctx); err != nil {
		return input.New(failure.Input, input.Profile, "", "credentials: no usable AWS credentials (%v); "+hint, err)
	}
	return nil
}

func (p *Provider) config(ctx context.Context, region string) (aws.Config, error) {
	cfg, err := p.loadConfig(ctx, region)
	if err == nil {
		// Every AWS request and SDK retry is traced with kiln -v (each try
		// passes through the HTTP client); never a header or query string.
		next := cfg.HTTPClient
		if next == nil {
			next = awshttp.NewBuildableClient()
		}
		cfg.HTTPClient = trace.Client{Next: next}
	}
	return cfg, err
}

// longConfig is config with the retryer of long operations (create,
// upgrade, destroy, inventory): adaptive mode (exponential backoff with
// jitter up to 20 s, and a client-side rate that slows down when AWS
// throttles) with Limits.Attempts attempts per request, so a throttled
// DescribeCluster in a 15-minute create is waited out, not fatal.
//
// Discovery (Discover, list, InspectLocation) keeps config's SDK default
// (3 attempts): each region is bounded by --discovery-timeout, and a mute
// or throttling region must be reported within it, not retried 13 times.
func (p *Provider) longConfig(ctx context.Context, region string) (aws.Config, error) {
	cfg, err := p.config(ctx, region)
	if err != nil {
		return cfg, err
	}
	n := p.limits().Attempts
	cfg.Retryer = func() aws.Retryer {
		return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) { so.MaxAttempts = n })
		})
	}
	return cfg, nil
}

// notFoundAfterCreate are the EC2 error codes a request naming a resource
// created moments ago may answer while EC2's eventual consistency has not
// caught up: "If you create a resource and immediately try to use it, you
// might get an error such as InvalidVpcID.NotFound … retry with exponential
// backoff" (EC2 API reference, Troubleshoot API request errors, Eventual
// consistency:
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/query-api-troubleshooting.html#eventual-consistency).
var notFoundAfterCreate = []string{
	"InvalidVpcID.NotFound", "InvalidSubnetID.NotFound", "InvalidGroup.NotFound",
	"InvalidInternetGatewayID.NotFound", "InvalidRouteTableID.NotFound",
	"InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFoundException",
}

// afterCreate is the option of an EC2 request that names a resource kiln
// has just created (tags it, modifies it, attaches or associates it, or
// creates something inside it): its NotFound is retried like a throttle,
// with the long retryer's backoff, for at most Limits.Attempts attempts
// (about three minutes). Never used on Describe by tag, nor on a delete,
// where NotFound is an answer ("absent", "already gone"), not lag.
func afterCreate(o *ec2.Options) {
	o.Retryer = retry.AddWithErrorCodes(o.Retryer, notFoundAfterCreate...)
}

func (p *Provider) loadConfig(ctx context.Context, region string) (aws.Config, error) {
	if p.LoadConfig != nil {
		return p.LoadConfig(ctx, region)
	}
	var opts []func(*awsconfig.LoadOptions) error
	if p.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(p.Profile))
	}
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		if p.Profile != "" {
			return aws.Config{}, input.New(failure.Input, input.Profile, p.Profile, "{input} %s: %v", p.Profile, err)
		}
		return aws.Config{}, failure.BadInput("AWS configuration: %v", err)
	}
	return cfg, nil
}

var instanceTypeRE = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[0-9]*[a-z0-9]+$`)

// CheckNodes is the one rule for a node count, for create, upgrade and
// the CLI's flags: a node group has 1 to MaxNodes nodes. 0 means not given
// (create's default, upgrade keeps the size) unless given says it was
// typed. Exit 2 naming the field.
func CheckNodes(n int, given bool) error {
	if n < 0 || n > MaxNodes || (given && n < 1) {
		return input.New(failure.Input, input.Nodes, fmt.Sprint(n), "{input}: %d is out of range; %s", n, nodeRange())
	}
	return nil
}

// NotANodeCount is the refusal of a node count that is not a number (a
// frontend's field: the CLI's flag parser refuses such a --nodes itself),
// with the range CheckNodes allows.
func NotANodeCount() error {
	return input.New(failure.Input, input.Nodes, "", "{input}: not a number; %s", nodeRange())
}

func nodeRange() string { return fmt.Sprintf("a node group has 1 to %d nodes", MaxNodes) }

// checkInstanceType: an EC2 instance type's spelling ("" is not given).
func checkInstanceType(t string) error {
	if t != "" && !instanceTypeRE.MatchString(t) {
		return input.New(failure.Input, input.InstanceType, t, "{input}: %q is not an EC2 instance type (like t3.medium or m6i.large)", t)
	}
	return nil
}

// checkKubernetesVersion: an EKS Kubernetes version's spelling ("" is not
// given).
func checkKubernetesVersion(v string) error {
	if v != "" && !k8sVersionRE.MatchString(v) {
		return input.New(failure.Input, input.KubernetesVersion, v, "{input}: %q is not an EKS Kubernetes version (MAJOR.MINOR, like 1.31)", v)
	}
	return nil
}

// ValidateFlags checks what can be checked without AWS: instance type,
// node count and the region's spelling. Exit 2 naming the field.
func (p *Provider) ValidateFlags() error {
	if err := checkInstanceType(p.InstanceType); err != nil {
		return err
	}
	if err := CheckNodes(p.Nodes, false); err != nil {
		return err
	}
	if err := checkKubernetesVersion(p.KubernetesVersion); err != nil {
		return err
	}
	for _, r := range append([]string{p.Region}, p.SearchRegions...) {
		if r != "" && !regionRE.MatchString(r) {
			return input.New(failure.Input, input.Region, r, "{input}/{input:regions}: %q is not an AWS region name (like eu-west-1)", r)
		}
	}
	if err := p.Access.validate(); err != nil {
		return err
	}
	return p.Change.validate()
}

var k8sVersionRE = regexp.MustCompile(`^1\.[0-9]{1,2}$`)

var regionRE = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]$`)

func (p *Provider) instanceType() string {
	if p.InstanceType == "" {
		return DefaultInstanceType
	}
	return p.InstanceType
}

func (p *Provider) nodes() int32 {
	if p.Nodes == 0 {
		return DefaultNodes
	}
	return int32(p.Nodes)
}

// validateCredentials checks, once per provider, that the AWS
// configuration loads and yields credentials: failure.Input before anything is
// created, and before regions are asked for.
func (p *Provider) validateCredentials(ctx context.Context) error {
	p.validateMu.Lock()
	defer p.validateMu.Unlock()
	if p.validated {
		return nil
	}
	cfg, err := p.config(ctx, p.regionOr(Regions))
	if err != nil {
		return err
	}
	if err := checkCredentials(ctx, cfg); err != nil {
		return err
	}
	p.validated = true
	return nil
}

// checkRegion refuses a --region kiln does not know exists.
func (p *Provider) checkRegion(known []string) error {
	if p.Region != "" && !slices.Contains(known, p.Region) {
		return engine.NewInputError(failure.Input, engine.InputRegion, p.Region, "{input}: unknown region %q (known: %s; name an enabled opt-in region in {input:regions} too)", p.Region, strings.Join(known, ", "))
	}
	return nil
}

func (p *Provider) regionOr(known []string) string {
	if t := p.Target(); t != "" {
		return t
	}
	return known[0]
}

// customEndpoint reports whether the configuration points at an endpoint
// other than AWS (AWS_ENDPOINT_URL / a test's BaseEndpoint): only then are
// an emulator's gaps tolerated.
func customEndpoint(cfg aws.Config) bool {
	return cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != ""
}

// apiCode returns the AWS error code of err ("" when it is not an API error).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// emit reports an AWS resource's status through the operation's Reporter
// (stamped and cleaned like every event).
func emit(r *event.Reporter, kind, name string, status event.Status, msg string) {
	r.Resource(kind, "", name, status, msg)
}

// logf reports a log line through the operation's Reporter.
func logf(r *event.Reporter, level event.Level, format string, args ...any) {
	r.Logf(level, format, args...)
}

// resourceName is the Name tag / IAM name of a kiln resource.
func resourceName(cluster, part string) string { return "kiln-" + cluster + "-" + part }
