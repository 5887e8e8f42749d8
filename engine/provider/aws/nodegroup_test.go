package aws

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/internal/testenv/awsemu"
)

// kilnTemplates are the emulator's launch templates tagged for name.
func kilnTemplates(e *awsemu.Emulator, region, name string) []awsemu.LaunchTemplate {
	var out []awsemu.LaunchTemplate
	for _, lt := range e.LaunchTemplates(region) {
		if lt.Tags[TagCluster] == name {
			out = append(out, lt)
		}
	}
	return out
}

// TestNodegroupLaunchTemplateRequiresIMDSv2 checks the launch template
// kiln gives its node groups against the EC2 and EKS API references:
//
//   - CreateLaunchTemplate's MetadataOptions
//     (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateInstanceMetadataOptionsRequest.html):
//     HttpTokens "required" is IMDSv2 only; HttpPutResponseHopLimit 1 keeps
//     IMDS out of reach of a pod's network namespace; HttpEndpoint
//     "enabled".
//   - CreateNodegroup (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html):
//     launchTemplate names the template by id (or name, not both) and a
//     version; with a launch template the request must not set diskSize
//     or remoteAccess; instanceTypes may stay in the request when the
//     template names none. The emulator refuses a request that breaks
//     these (InvalidParameterException), so the create passing is the
//     check; the template's own fields are checked here.
//
// The template is in the inventory and destroy deletes it after the node
// groups.
func TestNodegroupLaunchTemplateRequiresIMDSv2(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	const region = "eu-west-1"
	name := uniq("imds")
	sink := &events{}
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, sink.rep()); err != nil {
		t.Fatalf("%v\n%s", err, sink)
	}
	lts := kilnTemplates(e, region, name)
	if len(lts) != 1 {
		t.Fatalf("launch templates tagged %s=%s: %+v, want 1", TagCluster, name, lts)
	}
	lt := lts[0]
	want := map[string]string{
		"MetadataOptions.HttpTokens":              "required",
		"MetadataOptions.HttpPutResponseHopLimit": "1",
		"MetadataOptions.HttpEndpoint":            "enabled",
	}
	for k, v := range want {
		if lt.Data[k] != v {
			t.Errorf("launch template data %s = %q, want %q (all: %v)", k, lt.Data[k], v, lt.Data)
		}
	}
	for k := range lt.Data {
		// EKS: a template with an instance type forbids instanceTypes in
		// the request; kiln keeps the type in the request only.
		if strings.HasPrefix(k, "InstanceType") || strings.HasPrefix(k, "IamInstanceProfile") || strings.HasPrefix(k, "KeyName") {
			t.Errorf("launch template sets %s: EKS managed node groups set it themselves", k)
		}
	}
	if lt.Name != "kiln-"+name+"-nodes" || lt.Tags[TagManagedBy] != "kiln" {
		t.Errorf("launch template %s tags %v", lt.Name, lt.Tags)
	}
	cfg, _ := e.Config(ctx, region)
	ng, err := eks.NewFromConfig(cfg).DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(nodegroupName)})
	if err != nil {
		t.Fatal(err)
	}
	if ng.Nodegroup.LaunchTemplate == nil || aws.ToString(ng.Nodegroup.LaunchTemplate.Id) != lt.ID || aws.ToString(ng.Nodegroup.LaunchTemplate.Version) != "1" {
		t.Errorf("node group's launch template %+v, want id %s version 1", ng.Nodegroup.LaunchTemplate, lt.ID)
	}
	if ng.Nodegroup.RemoteAccess != nil {
		t.Errorf("node group has remoteAccess %+v with a launch template", ng.Nodegroup.RemoteAccess)
	}
	if !sink.has(KindLaunchTemplate, engine.StatusCurrent) {
		t.Errorf("no LaunchTemplate Current event:\n%s", sink)
	}
	checkComplete(t, p, name, region)
	destroy(t, p, name, region)
	if left := kilnTemplates(e, region, name); len(left) != 0 {
		t.Errorf("destroy left launch templates %+v", left)
	}
}

// TestLaunchTemplateKilledAfterCreateConverges stops the create right
// after CreateLaunchTemplate answered (the new checkpoint): the rerun
// finds the template by tag and makes no second one.
func TestLaunchTemplateKilledAfterCreateConverges(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	const region = "us-east-1"
	name := uniq("ltkill")
	func() {
		p.Hooks = stopAt("aws-launchtemplate-created")
		defer func() {
			p.Hooks = nil // the rerun below goes through
			if r := recover(); r != nil && r != (stop{}) {
				panic(r)
			}
		}()
		_, _, _ = p.EnsureInfrastructure(ctx, name, region, nil)
		t.Fatal("the create never reached aws-launchtemplate-created")
	}()
	if n := len(kilnTemplates(e, region, name)); n != 1 {
		t.Fatalf("%d launch templates after the kill, want 1", n)
	}
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, nil); err != nil {
		t.Fatal(err)
	}
	checkComplete(t, p, name, region)
	destroy(t, p, name, region)
}

// TestCreateRidesOutThrottling: AWS answers ThrottlingException when an
// account's request rate is exceeded and expects clients to back off and
// retry (EKS API reference, Common Errors:
// https://docs.aws.amazon.com/eks/latest/APIReference/CommonErrors.html).
// Five throttled DescribeCluster answers in a row fail a client with the
// SDK's default of 3 attempts; kiln's retryer for long operations (13
// attempts, adaptive backoff, as eksctl) rides them out.
func TestCreateRidesOutThrottling(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	const region = "ap-northeast-1"
	name := uniq("throttle")
	t.Cleanup(func() { e.FailNext("DescribeCluster", "", 0) })

	// The SDK default: the create fails on the third throttled answer.
	p.Limits.Attempts = 3
	before := e.Failed("DescribeCluster")
	e.FailNext("DescribeCluster", "ThrottlingException", 5)
	_, _, err := p.EnsureInfrastructure(ctx, name, region, nil)
	if apiCode(err) != "ThrottlingException" {
		t.Fatalf("with 3 attempts: %v, want the create to fail with ThrottlingException", err)
	}
	if got := e.Failed("DescribeCluster") - before; got != 3 {
		t.Errorf("with 3 attempts: %d throttled answers, want 3", got)
	}

	p.Limits.Attempts = 13
	before = e.Failed("DescribeCluster")
	e.FailNext("DescribeCluster", "ThrottlingException", 5)
	start := time.Now()
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, nil); err != nil {
		t.Fatalf("with kiln's retryer: %v", err)
	}
	if got := e.Failed("DescribeCluster") - before; got != 5 {
		t.Errorf("%d throttled answers, want all 5 consumed", got)
	}
	t.Logf("create through 5 throttled DescribeCluster answers: %s", time.Since(start))
	checkComplete(t, p, name, region)
	destroy(t, p, name, region)
}

// TestDiscoveryIsNotSlowedByTheLongRetryer: discovery keeps the SDK's 3
// attempts, so a region that throttles is reported within its bound, not
// retried 13 times.
func TestDiscoveryIsNotSlowedByTheLongRetryer(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	p.SearchRegions = []string{"eu-west-1"}
	t.Cleanup(func() { e.FailNext("ListClusters", "", 0) })
	before := e.Failed("ListClusters")
	e.FailNext("ListClusters", "ThrottlingException", 20)
	locs, _ := p.Discover(context.Background(), uniq("mute"))
	e.FailNext("ListClusters", "", 0)
	if len(locs) != 1 || locs[0].Err == nil || !strings.Contains(locs[0].Err.Error(), "ThrottlingException") {
		t.Fatalf("discovery of a throttling region: %+v, want the region reported with ThrottlingException", locs)
	}
	if got := e.Failed("ListClusters") - before; got != 3 {
		t.Errorf("discovery made %d attempts, want the SDK default 3", got)
	}
}

// TestEC2NotFoundAfterCreateIsRetried: EC2 is eventually consistent; a
// request naming a resource just created may answer InvalidVpcID.NotFound
// and must be retried with backoff (EC2 API reference, Eventual
// consistency:
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/query-api-troubleshooting.html#eventual-consistency).
func TestEC2NotFoundAfterCreateIsRetried(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	const region = "eu-west-1"
	name := uniq("consist")
	faults := map[string]string{
		"ModifyVpcAttribute":            "InvalidVpcID.NotFound",
		"CreateSubnet":                  "InvalidVpcID.NotFound",
		"AttachInternetGateway":         "InvalidInternetGatewayID.NotFound",
		"AuthorizeSecurityGroupIngress": "InvalidGroup.NotFound",
	}
	before := map[string]int{}
	for a, code := range faults {
		before[a] = e.Failed(a)
		e.FailNext(a, code, 2)
		t.Cleanup(func() { e.FailNext(a, "", 0) })
	}
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, nil); err != nil {
		t.Fatalf("create through NotFound-after-create answers: %v", err)
	}
	for a := range faults {
		if got := e.Failed(a) - before[a]; got != 2 {
			t.Errorf("%s: %d NotFound answers consumed, want 2", a, got)
		}
	}
	checkComplete(t, p, name, region)
	destroy(t, p, name, region)
}

// describeGroups returns the status of each node group of the cluster.
func describeGroups(t *testing.T, e *awsemu.Emulator, region, name string) map[string]string {
	t.Helper()
	cfg, _ := e.Config(context.Background(), region)
	c := eks.NewFromConfig(cfg)
	l, err := c.ListNodegroups(context.Background(), &eks.ListNodegroupsInput{ClusterName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range l.Nodegroups {
		d, err := c.DescribeNodegroup(context.Background(), &eks.DescribeNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(n)})
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(d.Nodegroup.Status) + " " + strings.Join(d.Nodegroup.InstanceTypes, ",")
	}
	return out
}

// TestNodegroupHealth: one rule for healthy (ACTIVE, no health issue —
// NodegroupHealth.issues, https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupHealth.html;
// statuses from https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html).
//   - DEGRADED on a rerun is reported (a warning naming the issue), not
//     fatal;
//   - a replacement that ends CREATE_FAILED, or DEGRADED, stops the
//     upgrade with AWS's issue, and the working group keeps running;
//   - DELETE_FAILED fails the destroy at once, naming the issue, instead
//     of waiting out the 20-minute bound.
func TestNodegroupHealth(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	const region = "us-east-1"
	name := uniq("health")
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.SetNodegroupFault(nodegroupName, awsemu.NodegroupFault{})
		e.SetNodegroupFault(replacementName("c5.large"), awsemu.NodegroupFault{})
		destroy(t, p, name, region)
	})

	t.Run("DEGRADED on rerun is a warning", func(t *testing.T) {
		e.SetNodegroupFault(nodegroupName, awsemu.NodegroupFault{Status: "DEGRADED", Code: "Ec2SecurityGroupNotFound", Message: "We couldn't find one or more security group associated with your Auto Scaling group."})
		defer e.SetNodegroupFault(nodegroupName, awsemu.NodegroupFault{})
		sink := &events{}
		if _, _, err := p.EnsureInfrastructure(ctx, name, region, sink.rep()); err != nil {
			t.Fatalf("rerun with a DEGRADED node group: %v, want it reported, not fatal\n%s", err, sink)
		}
		var warned, reported bool
		for _, ev := range sink.evs {
			if l, ok := ev.Payload.(event.LogEvent); ok && l.Level == engine.LevelWarn && strings.Contains(l.Message, "DEGRADED: Ec2SecurityGroupNotFound") {
				warned = true
			}
			if r := resOf(ev); r.Kind == KindNodegroup && r.Status == engine.StatusCurrent && strings.Contains(r.Message, "DEGRADED: Ec2SecurityGroupNotFound") {
				reported = true
			}
		}
		if !warned || !reported {
			t.Errorf("DEGRADED group: warning %v, resource event %v:\n%s", warned, reported, sink)
		}
	})

	for _, fault := range []awsemu.NodegroupFault{
		{Status: "CREATE_FAILED", Code: "AsgInstanceLaunchFailures", Message: "Could not launch On-Demand Instances. InsufficientInstanceCapacity"},
		{Status: "DEGRADED", Code: "InstanceLimitExceeded", Message: "You've reached your quota for maximum Fleet Requests for this account."},
	} {
		t.Run("replacement ends "+fault.Status, func(t *testing.T) {
			repl := replacementName("c5.large")
			was := describeGroups(t, e, region, name)
			var working string
			for k := range was {
				working = k
			}
			e.SetNodegroupFault(repl, fault)
			p.Change = Change{InstanceType: "c5.large"}
			defer func() { p.Change = Change{} }()
			up := p
			sink := &events{}
			err := up.UpgradeInfrastructure(ctx, name, region, sink.rep())
			if err == nil {
				t.Fatalf("upgrade whose replacement ends %s succeeded:\n%s", fault.Status, sink)
			}
			for _, part := range []string{repl, fault.Status, fault.Code, working + " keeps running", "nothing was deleted"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error lacks %q: %v", part, err)
				}
			}
			if fault.Status == "CREATE_FAILED" {
				// Another instance type fixes it: the CLI is told the flag
				// and the command, a frontend its own input's name only.
				if !strings.Contains(err.Error(), "with --instance-type") || !strings.Contains(err.Error(), "(`kiln upgrade aws "+name) {
					t.Errorf("the CLI's words lack the flag or the command: %v", err)
				}
				form := input.Render(err, func(in input.Input) string { return "the " + string(in) + " field" })
				if strings.Contains(form, "--") || !strings.Contains(form, "Upgrade again once EC2 has the capacity") || !strings.Contains(form, "with the instance-type field") {
					t.Errorf("a frontend's words: %q", form)
				}
			}
			if got := describeGroups(t, e, region, name); got[working] != "ACTIVE t3.medium" {
				t.Fatalf("the working group after the failed replacement: %v", got)
			}
			// Fixed, the rerun finishes the replacement (a CREATE_FAILED
			// group is deleted and created again; a DEGRADED one that is
			// healthy now takes over) and only then deletes the old one.
			e.SetNodegroupFault(repl, awsemu.NodegroupFault{})
			if err := up.UpgradeInfrastructure(ctx, name, region, sink.rep()); err != nil {
				t.Fatalf("rerun once fixed: %v\n%s", err, sink)
			}
			if got := describeGroups(t, e, region, name); !maps1(got, repl, "ACTIVE c5.large") {
				t.Fatalf("after the rerun: %v, want only %s ACTIVE", got, repl)
			}
			// Back to kiln-nodes-t3-medium for what follows.
			p.Change = Change{InstanceType: DefaultInstanceType}
			if err := p.UpgradeInfrastructure(ctx, name, region, nil); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("DELETE_FAILED fails the destroy at once", func(t *testing.T) {
		groups := describeGroups(t, e, region, name)
		var n string
		for k := range groups {
			n = k
		}
		e.SetNodegroupFault(n, awsemu.NodegroupFault{Status: "DELETE_FAILED", Code: "Ec2SecurityGroupDeletionFailure", Message: "DependencyViolation - resource has a dependent object"})
		defer e.SetNodegroupFault(n, awsemu.NodegroupFault{})
		start := time.Now()
		_, err := p.DestroyInfrastructure(ctx, name, region, nil)
		if err == nil || !strings.Contains(err.Error(), "DELETE_FAILED: Ec2SecurityGroupDeletionFailure: DependencyViolation") {
			t.Fatalf("destroy of a DELETE_FAILED node group: %v, want the health issue", err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("destroy took %s to give up on a DELETE_FAILED group", d)
		}
		if got := describeGroups(t, e, region, name); !strings.HasPrefix(got[n], "DELETE_FAILED") {
			t.Errorf("node group after the failed delete: %v", got)
		}
	})
}

// maps1 reports whether m holds exactly k=v.
func maps1(m map[string]string, k, v string) bool { return len(m) == 1 && m[k] == v }

// TestListBoundsDescribeClusterConcurrency: list describes a region's EKS
// clusters at most describeConcurrency at a time.
func TestListBoundsDescribeClusterConcurrency(t *testing.T) {
	e := emulator(t)
	ctx := context.Background()
	const region = "ap-northeast-1"
	cfg, _ := e.Config(ctx, region)
	c := eks.NewFromConfig(cfg)
	var names []string
	for range 3 * describeConcurrency {
		n := uniq("many")
		names = append(names, n)
		if _, err := c.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(n), RoleArn: aws.String("arn:aws:iam::123456789012:role/r"),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1"}}, Tags: map[string]string{TagCluster: "other"}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range names {
			_, _ = c.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(n)})
		}
	})
	var inFlight, peak atomic.Int32
	p := newTestProvider(t, e)
	p.SearchRegions = []string{region}
	p.Timeout = 30 * time.Second
	p.LoadConfig = func(ctx context.Context, r string) (aws.Config, error) {
		cfg, err := e.Config(ctx, r)
		cfg.HTTPClient = slowDescribe{next: http.DefaultClient, inFlight: &inFlight, peak: &peak}
		return cfg, err
	}
	locs, err := p.ListClusters(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range locs {
		if l.Err != nil {
			t.Fatalf("list: %v", l.Err)
		}
	}
	if got := peak.Load(); got > int32(describeConcurrency) || got < 2 {
		t.Errorf("peak DescribeCluster calls in flight: %d, want 2..%d", got, describeConcurrency)
	}
}

// slowDescribe holds each DescribeCluster (GET /clusters/NAME) 50 ms and
// records how many are in flight at once.
type slowDescribe struct {
	next           *http.Client
	inFlight, peak *atomic.Int32
}

var peakMu sync.Mutex

func (s slowDescribe) Do(r *http.Request) (*http.Response, error) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "clusters" {
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		peakMu.Lock()
		if n > s.peak.Load() {
			s.peak.Store(n)
		}
		peakMu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	return s.next.Do(r)
}
