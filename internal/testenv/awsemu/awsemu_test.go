package awsemu

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

const (
	regionA = "us-east-1"
	regionB = "eu-west-1"
)

// start starts an emulator that is closed when the test ends.
func start(t *testing.T, opts Options) *Emulator {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute) // first run builds kumo
	defer cancel()

	e, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}

	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	return e
}

func cfg(t *testing.T, e *Emulator, region string) aws.Config {
	t.Helper()

	c, err := e.Config(t.Context(), region)
	if err != nil {
		t.Fatalf("Config(%s): %v", region, err)
	}

	return c
}

func apiErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}

	return ""
}

func TestEKSClusterIsRegional(t *testing.T) {
	e := start(t, Options{})
	ctx := t.Context()

	if got := e.Regions(); !slices.Equal(got, DefaultRegions) {
		t.Fatalf("Regions() = %v, want %v", got, DefaultRegions)
	}

	ekA := eks.NewFromConfig(cfg(t, e, regionA))
	ekB := eks.NewFromConfig(cfg(t, e, regionB))

	const name = "alpha"

	created, err := ekA.CreateCluster(ctx, &eks.CreateClusterInput{
		Name:    aws.String(name),
		RoleArn: aws.String("arn:aws:iam::123456789012:role/kiln-eks"),
		Version: aws.String("1.31"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{
			SubnetIds: []string{"subnet-1", "subnet-2"},
		},
		Tags: map[string]string{"kiln.dev/cluster": name},
	})
	if err != nil {
		t.Fatalf("CreateCluster in %s: %v", regionA, err)
	}

	t.Logf("CreateCluster status=%s arn=%s endpoint=%s", created.Cluster.Status, aws.ToString(created.Cluster.Arn), aws.ToString(created.Cluster.Endpoint))

	listA, err := ekA.ListClusters(ctx, &eks.ListClustersInput{})
	if err != nil {
		t.Fatalf("ListClusters in %s: %v", regionA, err)
	}

	if !slices.Contains(listA.Clusters, name) {
		t.Errorf("ListClusters in %s = %v, want it to contain %q", regionA, listA.Clusters, name)
	}

	desc, err := ekA.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatalf("DescribeCluster in %s: %v", regionA, err)
	}

	if arn := aws.ToString(desc.Cluster.Arn); !strings.Contains(arn, ":"+regionA+":") {
		t.Errorf("cluster ARN %q does not name %s: kumo is not running with its own region", arn, regionA)
	}

	if got := desc.Cluster.Tags["kiln.dev/cluster"]; got != name {
		t.Errorf("tag kiln.dev/cluster = %q, want %q (tags %v)", got, name, desc.Cluster.Tags)
	}

	listB, err := ekB.ListClusters(ctx, &eks.ListClustersInput{})
	if err != nil {
		t.Fatalf("ListClusters in %s: %v", regionB, err)
	}

	if slices.Contains(listB.Clusters, name) {
		t.Errorf("cluster %q created in %s is listed in %s: %v", name, regionA, regionB, listB.Clusters)
	}

	_, err = ekB.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})

	var nf *ekstypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Errorf("DescribeCluster %q in %s: err = %v, want ResourceNotFoundException", name, regionB, err)
	}

	// Names are per region, as in AWS: the same name can exist in B.
	createdB, err := ekB.CreateCluster(ctx, &eks.CreateClusterInput{
		Name:    aws.String(name),
		RoleArn: aws.String("arn:aws:iam::123456789012:role/kiln-eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{
			SubnetIds: []string{"subnet-3", "subnet-4"},
		},
		Tags: map[string]string{"kiln.dev/cluster": name},
	})
	if err != nil {
		t.Fatalf("CreateCluster %q in %s: %v", name, regionB, err)
	}

	if arn := aws.ToString(createdB.Cluster.Arn); !strings.Contains(arn, ":"+regionB+":") {
		t.Errorf("cluster ARN %q does not name %s", arn, regionB)
	}

	if e.Requests(regionA) < 3 || e.Requests(regionB) < 3 {
		t.Errorf("request counts = %v, want >= 3 per region", e.requestCounts())
	}
}

func TestEC2VpcIsRegional(t *testing.T) {
	e := start(t, Options{})
	ctx := t.Context()

	ecA := ec2.NewFromConfig(cfg(t, e, regionA))
	ecB := ec2.NewFromConfig(cfg(t, e, regionB))

	out, err := ecA.CreateVpc(ctx, &ec2.CreateVpcInput{
		CidrBlock: aws.String("10.40.0.0/16"),
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeVpc,
			Tags:         []ec2types.Tag{{Key: aws.String("kiln.dev/cluster"), Value: aws.String("alpha")}},
		}},
	})
	if err != nil {
		t.Fatalf("CreateVpc in %s: %v", regionA, err)
	}

	id := aws.ToString(out.Vpc.VpcId)

	vpcIDs := func(c *ec2.Client) []string {
		t.Helper()

		d, err := c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
		if err != nil {
			t.Fatalf("DescribeVpcs: %v", err)
		}

		var ids []string
		for _, v := range d.Vpcs {
			ids = append(ids, aws.ToString(v.VpcId))
		}

		return ids
	}

	if ids := vpcIDs(ecA); !slices.Contains(ids, id) {
		t.Errorf("DescribeVpcs in %s = %v, want it to contain %s", regionA, ids, id)
	}

	if ids := vpcIDs(ecB); slices.Contains(ids, id) {
		t.Errorf("VPC %s created in %s is visible in %s", id, regionA, regionB)
	}

	_, err = ecB.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{id}})
	if code := apiErrorCode(err); code != "InvalidVpcID.NotFound" {
		t.Errorf("DescribeVpcs(%s) in %s: err = %v, want InvalidVpcID.NotFound", id, regionB, err)
	}
}

// TestIAMIsGlobal checks that IAM, global in AWS, is shared by all regions.
func TestIAMIsGlobal(t *testing.T) {
	e := start(t, Options{})
	ctx := t.Context()

	_, err := iam.NewFromConfig(cfg(t, e, regionB)).CreateRole(ctx, &iam.CreateRoleInput{
		RoleName:                 aws.String("kiln-alpha-cluster"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`),
	})
	if err != nil {
		t.Fatalf("CreateRole via %s: %v", regionB, err)
	}

	got, err := iam.NewFromConfig(cfg(t, e, regionA)).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("kiln-alpha-cluster")})
	if err != nil {
		t.Fatalf("GetRole via %s of a role created via %s: %v", regionA, regionB, err)
	}

	t.Logf("role ARN %s", aws.ToString(got.Role.Arn))
}

func TestPresignedURLIsRoutedByQueryCredential(t *testing.T) {
	e := start(t, Options{})
	ctx := t.Context()

	req, err := sts.NewPresignClient(sts.NewFromConfig(cfg(t, e, regionB))).
		PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatalf("PresignGetCallerIdentity: %v", err)
	}

	if !strings.Contains(req.URL, "X-Amz-Credential=") {
		t.Fatalf("presigned URL has no X-Amz-Credential: %s", req.URL)
	}

	before := e.Requests(regionB)

	hreq, err := http.NewRequestWithContext(ctx, req.Method, req.URL, nil)
	if err != nil {
		t.Fatal(err)
	}

	hreq.Header = req.SignedHeader.Clone()

	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatalf("GET presigned URL: %v", err)
	}

	resp.Body.Close()

	if got := e.Requests(regionB); got != before+1 {
		t.Errorf("Requests(%s) = %d after a presigned request, want %d (counts %v)", regionB, got, before+1, e.requestCounts())
	}

	if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusForbidden {
		if resp.Header.Get("X-Amzn-ErrorType") == ErrCodeRegionNotServed {
			t.Errorf("presigned request rejected by the router")
		}
	}

	t.Logf("kumo answered the presigned GetCallerIdentity with HTTP %d", resp.StatusCode)
}

// TestUnservedRegionFailsFast checks every protocol the router speaks: the
// SDK must decode the router's error (no retries, no hang) and its message
// must name the region.
func TestUnservedRegionFailsFast(t *testing.T) {
	e := start(t, Options{})

	const region = "ap-south-1"

	c := cfg(t, e, region)

	calls := map[string]func(context.Context) error{
		"eks": func(ctx context.Context) error {
			_, err := eks.NewFromConfig(c).ListClusters(ctx, &eks.ListClustersInput{})
			return err
		},
		"ec2": func(ctx context.Context) error {
			_, err := ec2.NewFromConfig(c).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
			return err
		},
		"sts": func(ctx context.Context) error {
			_, err := sts.NewFromConfig(c).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
			return err
		},
		"iam": func(ctx context.Context) error {
			_, err := iam.NewFromConfig(c).ListRoles(ctx, &iam.ListRolesInput{})
			return err
		},
	}

	for svc, call := range calls {
		t.Run(svc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			before := e.Requests(region)
			err := call(ctx)
			t.Logf("%s: %v", svc, err)

			switch {
			case err == nil:
				t.Fatalf("%s call in unserved region %s succeeded", svc, region)
			case ctx.Err() != nil:
				t.Fatalf("%s call in unserved region hung until the deadline: %v", svc, err)
			case apiErrorCode(err) != ErrCodeRegionNotServed:
				t.Errorf("%s: error code %q, want %q: %v", svc, apiErrorCode(err), ErrCodeRegionNotServed, err)
			case !strings.Contains(err.Error(), region):
				t.Errorf("%s: error does not name %s: %v", svc, region, err)
			}

			if got := e.Requests(region) - before; got != 1 {
				t.Errorf("%s: %d requests reached the router, want exactly 1 (no retries)", svc, got)
			}
		})
	}
}

func TestLatencyIsPerRegion(t *testing.T) {
	const latency = 300 * time.Millisecond

	e := start(t, Options{Latency: map[string]time.Duration{regionB: latency}})
	ctx := t.Context()

	ekA := eks.NewFromConfig(cfg(t, e, regionA))
	ekB := eks.NewFromConfig(cfg(t, e, regionB))

	// Fastest of a few calls, so a scheduling hiccup on a busy machine does
	// not decide the comparison.
	fastest := func(c *eks.Client) time.Duration {
		t.Helper()

		best := time.Duration(-1)
		for range 3 {
			t0 := time.Now()
			if _, err := c.ListClusters(ctx, &eks.ListClustersInput{}); err != nil {
				t.Fatalf("ListClusters: %v", err)
			}

			if d := time.Since(t0); best < 0 || d < best {
				best = d
			}
		}

		return best
	}

	a, b := fastest(ekA), fastest(ekB)
	t.Logf("fastest ListClusters: %s %v, %s %v (injected %v)", regionA, a, regionB, b, latency)

	if b < latency {
		t.Errorf("%s call took %v, want >= injected latency %v", regionB, b, latency)
	}

	if b <= a {
		t.Errorf("%s (with latency) took %v, not longer than %s (without) at %v", regionB, b, regionA, a)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	e, err := Start(ctx, Options{Regions: []string{"us-west-2", "eu-central-1", "ap-northeast-1"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}

	addr := strings.TrimPrefix(e.Endpoint(), "http://")

	var pids []int
	for _, b := range e.backends {
		pids = append(pids, b.proc.pid())
	}

	// Make the emulator hold live keep-alive connections when it closes.
	for _, r := range e.Regions() {
		if _, err := sts.NewFromConfig(cfg(t, e, r)).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); err != nil {
			t.Fatalf("GetCallerIdentity in %s: %v", r, err)
		}
	}

	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("router %s still accepts connections after Close", addr)
	}

	for _, pid := range pids {
		if processExists(pid) {
			t.Errorf("kumo pid %d still exists after Close", pid)
		}
	}

	// A client of the closed emulator gets an error, not a hang.
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()

	_, err = sts.NewFromConfig(cfg(t, e, "us-west-2")).GetCallerIdentity(cctx, &sts.GetCallerIdentityInput{})
	if err == nil || cctx.Err() != nil {
		t.Errorf("call after Close: err = %v, ctx = %v; want a prompt connection error", err, cctx.Err())
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	cases := map[string]Options{
		"latency for unserved region": {Regions: []string{regionA}, Latency: map[string]time.Duration{regionB: time.Second}},
		"empty region":                {Regions: []string{regionA, ""}},
		"duplicate region":            {Regions: []string{regionA, regionA}},
	}

	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := Start(t.Context(), opts)
			if err == nil {
				e.Close()
				t.Fatalf("Start(%+v) succeeded", opts)
			}
		})
	}
}

func TestCredentialScope(t *testing.T) {
	cases := []struct {
		name         string
		auth         string
		query        string
		regionSet    string
		wantRegion   string
		wantService  string
		wantRoutable bool
	}{
		{
			name:         "sigv4 header",
			auth:         "AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-west-1/eks/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc",
			wantRegion:   "eu-west-1",
			wantService:  "eks",
			wantRoutable: true,
		},
		{
			name:         "presigned query",
			query:        "Action=GetCallerIdentity&X-Amz-Credential=AKID%2F20260101%2Fus-east-1%2Fsts%2Faws4_request",
			wantRegion:   "us-east-1",
			wantService:  "sts",
			wantRoutable: true,
		},
		{
			name:         "sigv4a single region",
			auth:         "AWS4-ECDSA-P256-SHA256 Credential=AKID/20260101/s3/aws4_request, SignedHeaders=host, Signature=abc",
			regionSet:    "eu-west-1",
			wantRegion:   "eu-west-1",
			wantService:  "s3",
			wantRoutable: true,
		},
		{
			name:      "sigv4a wildcard",
			auth:      "AWS4-ECDSA-P256-SHA256 Credential=AKID/20260101/s3/aws4_request, SignedHeaders=host, Signature=abc",
			regionSet: "*",
		},
		{name: "unsigned"},
		{name: "malformed", auth: "AWS4-HMAC-SHA256 Credential=AKID/20260101/eks"},
		{name: "empty region", auth: "AWS4-HMAC-SHA256 Credential=AKID/20260101//eks/aws4_request"},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1/?"+tc.query, nil)
			if err != nil {
				t.Fatal(err)
			}

			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}

			if tc.regionSet != "" {
				r.Header.Set("X-Amz-Region-Set", tc.regionSet)
			}

			s, ok := credentialScope(r)
			if ok != tc.wantRoutable {
				t.Fatalf("credentialScope ok = %v, want %v (scope %+v)", ok, tc.wantRoutable, s)
			}

			if ok && (s.region != tc.wantRegion || s.service != tc.wantService) {
				t.Errorf("credentialScope = %+v, want region %q service %q", s, tc.wantRegion, tc.wantService)
			}
		})
	}
}
