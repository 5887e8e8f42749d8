package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/kilnctl/kiln/internal/testenv/awsemu"
)

// sweepFixture is a complete kiln cluster in the emulator and its network.
type sweepFixture struct {
	p       *Provider
	ec      *ec2.Client
	ek      *eks.Client
	name    string
	vpc     string
	subnets []string
	sg      string
}

const sweepRegion = "eu-west-1"

func newSweepFixture(t *testing.T, e *awsemu.Emulator, prefix string) *sweepFixture {
	t.Helper()
	ctx := context.Background()
	f := &sweepFixture{p: newTestProvider(t, e), name: uniq(prefix)}
	if _, _, err := f.p.EnsureInfrastructure(ctx, f.name, sweepRegion, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := e.Config(ctx, sweepRegion)
	if err != nil {
		t.Fatal(err)
	}
	f.ec, f.ek = ec2.NewFromConfig(cfg), eks.NewFromConfig(cfg)
	vpcs, err := findVPCs(ctx, f.ec, f.name)
	if err != nil || len(vpcs) != 1 {
		t.Fatalf("VPCs of %s: %v %v", f.name, vpcs, err)
	}
	f.vpc = aws.ToString(vpcs[0].VpcId)
	subnets, err := findSubnets(ctx, f.ec, f.name)
	if err != nil || len(subnets) != 2 {
		t.Fatalf("subnets of %s: %v %v", f.name, subnets, err)
	}
	for _, s := range subnets {
		f.subnets = append(f.subnets, aws.ToString(s.SubnetId))
	}
	sgs, err := findSecurityGroups(ctx, f.ec, f.name)
	if err != nil || len(sgs) != 1 {
		t.Fatalf("security groups of %s: %v %v", f.name, sgs, err)
	}
	f.sg = aws.ToString(sgs[0].GroupId)
	return f
}

func (f *sweepFixture) eni(t *testing.T, subnet, desc string, groups ...string) string {
	t.Helper()
	out, err := f.ec.CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnet), Description: aws.String(desc), Groups: groups,
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.NetworkInterface.NetworkInterfaceId)
}

func (f *sweepFixture) sgIn(t *testing.T, vpc, name string) string {
	t.Helper()
	out, err := f.ec.CreateSecurityGroup(context.Background(), &ec2.CreateSecurityGroupInput{
		GroupName: aws.String(name), VpcId: aws.String(vpc), Description: aws.String("made by hand"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.GroupId)
}

func (f *sweepFixture) allow(t *testing.T, group, from string) {
	t.Helper()
	if _, err := f.ec.AuthorizeSecurityGroupIngress(context.Background(), &ec2.AuthorizeSecurityGroupIngressInput{
		GroupId: aws.String(group),
		IpPermissions: []ec2types.IpPermission{{
			IpProtocol: aws.String("tcp"), FromPort: aws.Int32(443), ToPort: aws.Int32(443),
			UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: aws.String(from)}},
		}},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDestroySweepsTheVPC: what EKS, the VPC CNI or a user leave in kiln's
// VPC — an available network interface, a security group kiln did not
// create that kiln's group references and that references kiln's, a
// Fargate profile — is deleted, each named, and the VPC goes. The
// emulator first shows the refusals the EC2 API reference states
// (DependencyViolation: API_DeleteSecurityGroup, API_DeleteSubnet,
// API_DeleteVpc; EKS ResourceInUseException: API_DeleteCluster).
func TestDestroySweepsTheVPC(t *testing.T) {
	e := emulator(t)
	f := newSweepFixture(t, e, "sweep")
	ctx := context.Background()
	byHand := f.sgIn(t, f.vpc, "by-hand-"+f.name)
	f.allow(t, f.sg, byHand) // kiln's group references it …
	f.allow(t, byHand, f.sg) // … and it references kiln's
	left := f.eni(t, f.subnets[0], "aws-K8S-i-0123456789abcdef0", byHand)
	if _, err := f.ek.CreateFargateProfile(ctx, &eks.CreateFargateProfileInput{
		ClusterName: aws.String(f.name), FargateProfileName: aws.String("fp-by-hand"),
		PodExecutionRoleArn: aws.String("arn:aws:iam::000000000000:role/fp"),
		Selectors:           []ekstypes.FargateProfileSelector{{Namespace: aws.String("batch")}},
	}); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"DeleteSecurityGroup referenced": func() error {
			_, err := f.ec.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(byHand)})
			return err
		}(),
		"DeleteSubnet with an interface": func() error {
			_, err := f.ec.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: aws.String(f.subnets[0])})
			return err
		}(),
		"DeleteVpc with dependents": func() error {
			_, err := f.ec.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(f.vpc)})
			return err
		}(),
	} {
		if apiCode(err) != "DependencyViolation" {
			t.Errorf("%s: want DependencyViolation, got %v", what, err)
		}
	}
	sink := &events{}
	start := time.Now()
	if _, err := f.p.DestroyInfrastructure(ctx, f.name, sweepRegion, sink.rep()); err != nil {
		t.Fatalf("destroy: %v\n%s", err, sink)
	}
	t.Logf("destroy took %s", time.Since(start))
	out := sink.String()
	for _, want := range []string{
		"FargateProfile fp-by-hand Terminating deleting: not created by kiln",
		"FargateProfile fp-by-hand NotFound deleted",
		"NetworkInterface " + left + " Terminating deleting: left (available, \"aws-K8S-i-0123456789abcdef0\") in VPC " + f.vpc,
		"NetworkInterface " + left + " NotFound deleted",
		"SecurityGroup " + byHand + " Terminating deleting: not created by kiln",
		"SecurityGroup " + byHand + " NotFound deleted",
		"which references " + byHand,
		"which references " + f.sg,
		"LoadBalancer " + f.name + " NotFound skipped: the Kubernetes API of EKS cluster " + f.name + " does not answer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no event %q:\n%s", want, out)
		}
	}
	inv, err := f.p.Inventory(ctx, f.name, sweepRegion)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.Empty(KindRouteTable) {
		t.Errorf("left: %s", inv)
	}
	if _, err := f.ec.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{left}}); apiCode(err) != "InvalidNetworkInterfaceID.NotFound" {
		t.Errorf("interface %s: want InvalidNetworkInterfaceID.NotFound, got %v", left, err)
	}
}

// TestDestroyNamesWhatBlocksTheVPC: an interface in use by an instance
// kiln did not create (DeleteNetworkInterface: "You must detach the
// network interface before you can delete it",
// InvalidNetworkInterface.InUse) and a group in another VPC whose rule
// references kiln's group (DeleteSecurityGroup: DependencyViolation) fail
// the destroy within the bound, naming them; once they are gone a rerun
// finishes.
func TestDestroyNamesWhatBlocksTheVPC(t *testing.T) {
	e := emulator(t)
	f := newSweepFixture(t, e, "blocked")
	f.p.Limits.Dependency = 3 * time.Second
	ctx := context.Background()

	busy := f.eni(t, f.subnets[1], "attached by hand", f.sg)
	if err := e.AttachNetworkInterface(sweepRegion, busy, "i-0notkiln000000001"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ec.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(busy)}); apiCode(err) != "InvalidNetworkInterface.InUse" {
		t.Fatalf("DeleteNetworkInterface of an attached interface: want InvalidNetworkInterface.InUse, got %v", err)
	}
	start := time.Now()
	sink := &events{}
	_, err := f.p.DestroyInfrastructure(ctx, f.name, sweepRegion, sink.rep())
	took := time.Since(start)
	if err == nil {
		t.Fatalf("destroy with an interface in use succeeded:\n%s", sink)
	}
	for _, want := range []string{busy, "i-0notkiln000000001", `"attached by hand"`, f.vpc, "kiln destroy aws " + f.name} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
	if took > 30*time.Second {
		t.Errorf("destroy took %s to fail (bound %s)", took, f.p.Limits.Dependency)
	}
	t.Logf("failed after %s: %v", took, err)

	// The instance went; now a group in another VPC references kiln's.
	if err := e.DetachNetworkInterface(sweepRegion, busy); err != nil {
		t.Fatal(err)
	}
	other, err := f.ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.9.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	otherVPC := aws.ToString(other.Vpc.VpcId)
	defer f.ec.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(otherVPC)}) //nolint:errcheck
	peer := f.sgIn(t, otherVPC, "peer-"+f.name)
	f.allow(t, peer, f.sg)
	start = time.Now()
	sink = &events{}
	_, err = f.p.DestroyInfrastructure(ctx, f.name, sweepRegion, sink.rep())
	took = time.Since(start)
	if err == nil {
		t.Fatalf("destroy with a group referenced from another VPC succeeded:\n%s", sink)
	}
	for _, want := range []string{f.sg, "DependencyViolation", "security group " + peer + " (peer-" + f.name + ") in " + otherVPC + " has a rule referencing it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
	if took > 30*time.Second {
		t.Errorf("destroy took %s to fail (bound %s)", took, f.p.Limits.Dependency)
	}
	t.Logf("failed after %s: %v", took, err)
	if !strings.Contains(sink.String(), "NetworkInterface "+busy+" NotFound deleted") {
		t.Errorf("the detached interface was not swept on the rerun:\n%s", sink)
	}

	if _, err := f.ec.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(peer)}); err != nil {
		t.Fatal(err)
	}
	sink = &events{}
	if _, err := f.p.DestroyInfrastructure(ctx, f.name, sweepRegion, sink.rep()); err != nil {
		t.Fatalf("rerun once nothing blocks: %v\n%s", err, sink)
	}
	inv, err := f.p.Inventory(ctx, f.name, sweepRegion)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.Empty(KindRouteTable) {
		t.Errorf("left: %s", inv)
	}
}
