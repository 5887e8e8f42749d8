// Over 400 lines on purpose: the eight ordered, idempotent creation steps
// of a kiln EKS cluster (VPC … node group), each a checkpoint with its own
// resource events, read as one sequence; destroy.go mirrors it.

package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/internal/exit"
)

// Kinds of the resource events the aws provider emits.
const (
	KindVPC             = "VPC"
	KindSubnet          = "Subnet"
	KindInternetGateway = "InternetGateway"
	KindRouteTable      = "RouteTable"
	KindSecurityGroup   = "SecurityGroup"
	KindIAMRole         = "IAMRole"
	KindEKSCluster      = "EKSCluster"
	KindNodegroup       = "Nodegroup"
)

// The network kiln creates: a /16 VPC and two public /18 subnets.
const (
	vpcCIDR = "10.0.0.0/16"
)

var subnetCIDRs = [2]string{"10.0.0.0/18", "10.0.64.0/18"}

// nodegroupName is the managed node group's name inside the EKS cluster.
const nodegroupName = "kiln-nodes"

// waitLimit bounds the wait for the EKS cluster and node group to become
// ACTIVE (real EKS takes 10 to 15 minutes for a cluster).
const waitLimit = 30 * time.Minute

// role is one IAM role kiln creates.
type role struct {
	part     string // cluster | node
	service  string // the service that assumes it
	policies []string
}

var roles = []role{
	{part: "cluster", service: "eks.amazonaws.com", policies: []string{"AmazonEKSClusterPolicy"}},
	{part: "node", service: "ec2.amazonaws.com", policies: []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"}},
}

// infra is one run of the infrastructure steps in one region.
type infra struct {
	p      *Provider
	name   string
	region string
	sink   engine.Sink
	cfg    aws.Config
	ec2    *ec2.Client
	iam    *iam.Client
	eks    *eks.Client

	vpcID     string
	subnetIDs []string
	igwID     string
	sgID      string
	roleARNs  map[string]string
	cluster   *ekstypes.Cluster
}

func (p *Provider) newInfra(ctx context.Context, name, region string, sink engine.Sink) (*infra, error) {
	cfg, err := p.config(ctx, region)
	if err != nil {
		return nil, err
	}
	return &infra{
		p: p, name: name, region: region, sink: sink, cfg: cfg,
		ec2: ec2.NewFromConfig(cfg), iam: iam.NewFromConfig(cfg), eks: eks.NewFromConfig(cfg),
		roleARNs: map[string]string{},
	}, nil
}

// EnsureInfrastructure implements engine.Provider: each step looks its
// resource up by tag and creates it only when missing, so a run killed at
// any point and run again creates no duplicates. The crash hook names each
// step (before-aws-vpc, after-aws-vpc, …, after-aws-nodegroup).
func (p *Provider) EnsureInfrastructure(ctx context.Context, name, region string, sink engine.Sink) (engine.Location, bool, error) {
	if err := p.ValidateFlags(); err != nil {
		return engine.Location{}, false, err
	}
	in, err := p.newInfra(ctx, name, region, sink)
	if err != nil {
		return engine.Location{}, false, err
	}
	// Nothing is created before the claim is held: two hosts never both
	// create a VPC (or roles, cluster, node group) for one NAME.
	c, ctx, err := in.acquireClaim(ctx, "create")
	if err != nil {
		return engine.Location{}, false, err
	}
	defer c.release(ctx)
	engine.Checkpoint(ctx, "after-aws-claim")
	steps := []struct {
		kind string
		run  func(context.Context) error
	}{
		{KindVPC, in.ensureVPC},
		{KindSubnet, in.ensureSubnets},
		{KindInternetGateway, in.ensureIGW},
		{KindRouteTable, in.ensureRouteTable},
		{KindSecurityGroup, in.ensureSecurityGroup},
		{KindIAMRole, in.ensureRoles},
		{KindEKSCluster, in.ensureCluster},
		{KindAccessEntry, in.ensureAccess},
		{KindNodegroup, in.ensureNodegroup},
		{KindAddon, in.ensureAddons},
	}
	for _, s := range steps {
		engine.Checkpoint(ctx, "before-aws-"+strings.ToLower(s.kind))
		if err := s.run(ctx); err != nil {
			return engine.Location{}, false, lostErr(ctx, err)
		}
		engine.Checkpoint(ctx, "after-aws-"+strings.ToLower(s.kind))
	}
	if p.WriteKubeconfig != "" {
		warnings, err := WriteKubeconfig(ctx, p.WriteKubeconfig, KubeconfigEntry{
			Cluster: name, Region: region, Profile: p.Profile, KilnPath: p.KilnPath,
			Endpoint: aws.ToString(in.cluster.Endpoint), CAData: caData(in.cluster),
		})
		for _, w := range warnings {
			logf(sink, engine.LevelWarn, "kubeconfig %s: %s", p.WriteKubeconfig, w)
		}
		if err != nil {
			return engine.Location{}, false, err
		}
		logf(sink, engine.LevelInfo, "kubeconfig %s: context %s uses `kiln aws token` (no static secret)", p.WriteKubeconfig, ContextName(name))
	}
	rc, cs, err := p.kubeClient(ctx, in.cfg, in.cluster)
	if err != nil {
		return engine.Location{}, false, err
	}
	// The viewers' group gets the support role (access.go) once a viewer
	// is named.
	if len(p.Access.Viewers) > 0 {
		engine.Checkpoint(ctx, "before-aws-supportrbac")
		if err := in.ensureSupportRBAC(ctx, cs); err != nil {
			return engine.Location{}, false, lostErr(ctx, err)
		}
		engine.Checkpoint(ctx, "after-aws-supportrbac")
	}
	return engine.Location{Name: region, Cluster: name, Infra: engine.InfraPresent, Client: cs, REST: rc}, false, nil
}

func caData(c *ekstypes.Cluster) string {
	if c.CertificateAuthority == nil {
		return ""
	}
	return aws.ToString(c.CertificateAuthority.Data)
}

func (in *infra) emit(kind, name, status, format string, args ...any) {
	emit(in.sink, kind, name, status, fmt.Sprintf(format, args...))
}

func (in *infra) fail(kind, name string, err error) error {
	in.emit(kind, name, engine.StatusFailed, "%v", err)
	return err
}

func (in *infra) ensureVPC(ctx context.Context) error {
	n := resourceName(in.name, "vpc")
	vpcs, err := findVPCs(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindVPC, n, err)
	}
	switch len(vpcs) {
	case 0:
		in.emit(KindVPC, n, engine.StatusInProgress, "creating %s", vpcCIDR)
		out, err := in.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{
			CidrBlock:         aws.String(vpcCIDR),
			TagSpecifications: tagSpec(ec2types.ResourceTypeVpc, ec2Tags(in.name, "vpc")),
		})
		if err != nil {
			return in.fail(KindVPC, n, fmt.Errorf("create VPC %s: %w", n, err))
		}
		in.vpcID = aws.ToString(out.Vpc.VpcId)
	case 1:
		in.vpcID = aws.ToString(vpcs[0].VpcId)
	default:
		return in.fail(KindVPC, n, fmt.Errorf("%d VPCs are tagged %s=%s in %s; remove the extra ones", len(vpcs), TagCluster, in.name, in.region))
	}
	// EKS nodes need DNS hostnames; applied every run so a run killed after
	// CreateVpc still converges.
	if _, err := in.ec2.ModifyVpcAttribute(ctx, &ec2.ModifyVpcAttributeInput{
		VpcId: aws.String(in.vpcID), EnableDnsHostnames: &ec2types.AttributeBooleanValue{Value: aws.Bool(true)},
	}); err != nil {
		return in.fail(KindVPC, n, fmt.Errorf("enable DNS hostnames on VPC %s: %w", in.vpcID, err))
	}
	in.emit(KindVPC, n, engine.StatusCurrent, "%s", in.vpcID)
	return nil
}

// eksUnsupportedZoneIDs are the zone IDs where EKS creates no control
// plane: a CreateCluster with a subnet there fails with
// UnsupportedAvailabilityZoneException (EKS User Guide, "View Amazon EKS
// networking requirements for VPC and subnets"). Zone names map to IDs
// differently in every account, so zones are judged by ID.
var eksUnsupportedZoneIDs = []string{"use1-az3", "usw1-az2", "cac1-az3"}

// zoneChoice is what zones found: the usable zones by name, ordered by
// zone ID (the physical zone, the same in every account), and why each
// other zone was passed over.
type zoneChoice struct {
	usable  []string
	skipped map[string]string // zone name -> why
	ids     map[string]string // zone name -> zone id
}

// zones judges the region's availability zones the way EKS and EC2 do:
// available, a zone of type availability-zone (no Local or Wavelength
// zone), not a zone ID EKS refuses, and offering the node group's
// instance type (DescribeInstanceTypeOfferings). An endpoint that does not
// implement DescribeAvailabilityZones gets known zone names instead.
func (in *infra) zones(ctx context.Context) (zoneChoice, error) {
	zc := zoneChoice{skipped: map[string]string{}, ids: map[string]string{}}
	out, err := in.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		if !in.unsupported(err) {
			return zc, fmt.Errorf("describe availability zones of %s: %w", in.region, err)
		}
		s, ok := azSuffixes[in.region]
		if !ok {
			s = [2]string{"a", "b"}
		}
		zc.usable = []string{in.region + s[0], in.region + s[1]}
		return zc, nil
	}
	typ := in.p.instanceType()
	var offered map[string]bool // nil: not known
	pg := ec2.NewDescribeInstanceTypeOfferingsPaginator(in.ec2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		Filters:      []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{typ}}},
	})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			if in.unsupported(err) {
				offered = nil
				break
			}
			return zc, fmt.Errorf("describe where %s is offered in %s: %w", typ, in.region, err)
		}
		if offered == nil {
			offered = map[string]bool{}
		}
		for _, o := range page.InstanceTypeOfferings {
			offered[aws.ToString(o.Location)] = true
		}
	}
	type cand struct{ name, id string }
	var usable []cand
	for _, z := range out.AvailabilityZones {
		name, id, t := aws.ToString(z.ZoneName), aws.ToString(z.ZoneId), aws.ToString(z.ZoneType)
		zc.ids[name] = id
		switch {
		case z.State != ec2types.AvailabilityZoneStateAvailable:
			zc.skipped[name] = fmt.Sprintf("%s (%s) is %s", name, id, z.State)
		case t != "" && t != "availability-zone":
			zc.skipped[name] = fmt.Sprintf("%s (%s) is a %s, where EKS runs no control plane", name, id, t)
		case slices.Contains(eksUnsupportedZoneIDs, id):
			zc.skipped[name] = fmt.Sprintf("%s (%s): EKS creates no control plane in zone %s", name, id, id)
		case offered != nil && !offered[name]:
			zc.skipped[name] = fmt.Sprintf("%s (%s) does not offer %s", name, id, typ)
		default:
			usable = append(usable, cand{name, id})
		}
	}
	slices.SortFunc(usable, func(a, b cand) int { return strings.Compare(a.id, b.id) })
	for _, c := range usable {
		zc.usable = append(zc.usable, c.name)
	}
	return zc, nil
}

// why lists why zones were passed over, sorted.
func (zc zoneChoice) why() string {
	var out []string
	for _, w := range zc.skipped {
		out = append(out, w)
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "none passed over"
	}
	return strings.Join(out, "; ")
}

func (in *infra) ensureSubnets(ctx context.Context) error {
	have, err := findSubnets(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindSubnet, resourceName(in.name, "subnet"), err)
	}
	// Only the subnets of this VPC count (an emulator may keep resources
	// of a deleted VPC).
	have = slices.DeleteFunc(have, func(s ec2types.Subnet) bool { return aws.ToString(s.VpcId) != in.vpcID })
	zc, err := in.zones(ctx)
	if err != nil {
		return in.fail(KindSubnet, resourceName(in.name, "subnet"), err)
	}
	// A subnet of an earlier run in a zone EKS cannot use (an older kiln
	// picked zones by name) would fail CreateCluster the same way on every
	// rerun: while no EKS cluster uses it, it is replaced.
	var kept []ec2types.Subnet
	for _, sub := range have {
		az := aws.ToString(sub.AvailabilityZone)
		why, bad := zc.skipped[az]
		if !bad {
			kept = append(kept, sub)
			continue
		}
		if exists, err := in.clusterExists(ctx); err != nil || exists {
			if err != nil {
				return in.fail(KindSubnet, aws.ToString(sub.SubnetId), err)
			}
			kept = append(kept, sub) // the cluster runs there: EKS accepted it
			continue
		}
		id := aws.ToString(sub.SubnetId)
		in.emit(KindSubnet, id, engine.StatusTerminating, "replacing: %s", why)
		if _, err := in.ec2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: aws.String(id)}); err != nil {
			return in.fail(KindSubnet, id, fmt.Errorf("delete subnet %s in %s (%s): %w", id, az, why, err))
		}
	}
	have = kept
	used := map[string]bool{}
	for _, sub := range have {
		used[aws.ToString(sub.AvailabilityZone)] = true
	}
	in.subnetIDs = nil
	for i := range 2 {
		r := fmt.Sprintf("subnet-%d", i+1)
		n := resourceName(in.name, r)
		var id string
		for _, s := range have {
			if tagValue(s.Tags, TagRole) == r {
				if id != "" {
					return in.fail(KindSubnet, n, fmt.Errorf("several subnets are tagged %s=%s, %s=%s; remove the extra ones", TagCluster, in.name, TagRole, r))
				}
				id = aws.ToString(s.SubnetId)
			}
		}
		if id == "" {
			az := ""
			for _, z := range zc.usable {
				if !used[z] {
					az = z
					break
				}
			}
			if az == "" {
				return in.fail(KindSubnet, n, fmt.Errorf("region %s has no second availability zone where EKS and %s can run (EKS needs subnets in two); passed over: %s. Choose another --region or --instance-type", in.region, in.p.instanceType(), zc.why()))
			}
			used[az] = true
			where := az
			if id := zc.ids[az]; id != "" {
				where += " (" + id + ")"
			}
			in.emit(KindSubnet, n, engine.StatusInProgress, "creating %s in %s", subnetCIDRs[i], where)
			out, err := in.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{
				VpcId: aws.String(in.vpcID), CidrBlock: aws.String(subnetCIDRs[i]), AvailabilityZone: aws.String(az),
				TagSpecifications: tagSpec(ec2types.ResourceTypeSubnet, ec2Tags(in.name, r,
					ec2types.Tag{Key: aws.String("kubernetes.io/role/elb"), Value: aws.String("1")})),
			})
			if err != nil {
				return in.fail(KindSubnet, n, fmt.Errorf("create subnet %s: %w", n, err))
			}
			id = aws.ToString(out.Subnet.SubnetId)
		}
		// Nodes in public subnets need public addresses.
		if _, err := in.ec2.ModifySubnetAttribute(ctx, &ec2.ModifySubnetAttributeInput{
			SubnetId: aws.String(id), MapPublicIpOnLaunch: &ec2types.AttributeBooleanValue{Value: aws.Bool(true)},
		}); err != nil {
			return in.fail(KindSubnet, n, fmt.Errorf("map public IPs on subnet %s: %w", id, err))
		}
		in.subnetIDs = append(in.subnetIDs, id)
		in.emit(KindSubnet, n, engine.StatusCurrent, "%s", id)
	}
	return nil
}

func (in *infra) ensureIGW(ctx context.Context) error {
	n := resourceName(in.name, "igw")
	gws, err := findIGWs(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindInternetGateway, n, err)
	}
	var gw ec2types.InternetGateway
	switch len(gws) {
	case 0:
		in.emit(KindInternetGateway, n, engine.StatusInProgress, "creating")
		out, err := in.ec2.CreateInternetGateway(ctx, &ec2.CreateInternetGatewayInput{
			TagSpecifications: tagSpec(ec2types.ResourceTypeInternetGateway, ec2Tags(in.name, "igw")),
		})
		if err != nil {
			return in.fail(KindInternetGateway, n, fmt.Errorf("create internet gateway %s: %w", n, err))
		}
		gw = *out.InternetGateway
	case 1:
		gw = gws[0]
	default:
		return in.fail(KindInternetGateway, n, fmt.Errorf("%d internet gateways are tagged %s=%s; remove the extra ones", len(gws), TagCluster, in.name))
	}
	in.igwID = aws.ToString(gw.InternetGatewayId)
	attached := false
	for _, a := range gw.Attachments {
		attached = attached || aws.ToString(a.VpcId) == in.vpcID
	}
	if !attached {
		if _, err := in.ec2.AttachInternetGateway(ctx, &ec2.AttachInternetGatewayInput{
			InternetGatewayId: aws.String(in.igwID), VpcId: aws.String(in.vpcID),
		}); err != nil && apiCode(err) != "Resource.AlreadyAssociated" {
			return in.fail(KindInternetGateway, n, fmt.Errorf("attach internet gateway %s to %s: %w", in.igwID, in.vpcID, err))
		}
	}
	in.emit(KindInternetGateway, n, engine.StatusCurrent, "%s attached to %s", in.igwID, in.vpcID)
	return nil
}

func (in *infra) ensureRouteTable(ctx context.Context) error {
	n := resourceName(in.name, "rt")
	rts, err := findRouteTables(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindRouteTable, n, err)
	}
	rts = slices.DeleteFunc(rts, func(r ec2types.RouteTable) bool { return aws.ToString(r.VpcId) != in.vpcID })
	var rt ec2types.RouteTable
	switch len(rts) {
	case 0:
		in.emit(KindRouteTable, n, engine.StatusInProgress, "creating")
		out, err := in.ec2.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{
			VpcId:             aws.String(in.vpcID),
			TagSpecifications: tagSpec(ec2types.ResourceTypeRouteTable, ec2Tags(in.name, "rt")),
		})
		if err != nil {
			return in.fail(KindRouteTable, n, fmt.Errorf("create route table %s: %w", n, err))
		}
		rt = *out.RouteTable
	case 1:
		rt = rts[0]
	default:
		return in.fail(KindRouteTable, n, fmt.Errorf("%d route tables are tagged %s=%s; remove the extra ones", len(rts), TagCluster, in.name))
	}
	id := aws.ToString(rt.RouteTableId)
	hasDefault := false
	for _, r := range rt.Routes {
		hasDefault = hasDefault || aws.ToString(r.DestinationCidrBlock) == "0.0.0.0/0" && aws.ToString(r.GatewayId) == in.igwID
	}
	if !hasDefault {
		if _, err := in.ec2.CreateRoute(ctx, &ec2.CreateRouteInput{
			RouteTableId: aws.String(id), DestinationCidrBlock: aws.String("0.0.0.0/0"), GatewayId: aws.String(in.igwID),
		}); err != nil && apiCode(err) != "RouteAlreadyExists" {
			return in.fail(KindRouteTable, n, fmt.Errorf("route 0.0.0.0/0 via %s in %s: %w", in.igwID, id, err))
		}
	}
	for _, s := range in.subnetIDs {
		associated := false
		for _, a := range rt.Associations {
			associated = associated || aws.ToString(a.SubnetId) == s
		}
		if associated {
			continue
		}
		if _, err := in.ec2.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{
			RouteTableId: aws.String(id), SubnetId: aws.String(s),
		}); err != nil && apiCode(err) != "Resource.AlreadyAssociated" {
			return in.fail(KindRouteTable, n, fmt.Errorf("associate route table %s with %s: %w", id, s, err))
		}
	}
	in.emit(KindRouteTable, n, engine.StatusCurrent, "%s: default route via %s, %d subnets", id, in.igwID, len(in.subnetIDs))
	return nil
}

func (in *infra) ensureSecurityGroup(ctx context.Context) error {
	n := resourceName(in.name, "sg")
	sgs, err := findSecurityGroups(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindSecurityGroup, n, err)
	}
	sgs = slices.DeleteFunc(sgs, func(g ec2types.SecurityGroup) bool { return aws.ToString(g.VpcId) != in.vpcID })
	switch len(sgs) {
	case 0:
		in.emit(KindSecurityGroup, n, engine.StatusInProgress, "creating")
		out, err := in.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
			GroupName: aws.String(n), VpcId: aws.String(in.vpcID),
			Description:       aws.String("kiln cluster " + in.name + ": traffic between control plane and nodes"),
			TagSpecifications: tagSpec(ec2types.ResourceTypeSecurityGroup, ec2Tags(in.name, "sg")),
		})
		if err != nil {
			return in.fail(KindSecurityGroup, n, fmt.Errorf("create security group %s: %w", n, err))
		}
		in.sgID = aws.ToString(out.GroupId)
	case 1:
		in.sgID = aws.ToString(sgs[0].GroupId)
	default:
		return in.fail(KindSecurityGroup, n, fmt.Errorf("%d security groups are tagged %s=%s; remove the extra ones", len(sgs), TagCluster, in.name))
	}
	// Members of the group talk to each other (control plane ↔ nodes).
	if _, err := in.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
		GroupId: aws.String(in.sgID),
		IpPermissions: []ec2types.IpPermission{{
			IpProtocol: aws.String("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: aws.String(in.sgID)}},
		}},
	}); err != nil && apiCode(err) != "InvalidPermission.Duplicate" {
		return in.fail(KindSecurityGroup, n, fmt.Errorf("allow traffic within %s: %w", in.sgID, err))
	}
	in.emit(KindSecurityGroup, n, engine.StatusCurrent, "%s", in.sgID)
	return nil
}

func trustPolicy(service string) string {
	return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"` + service + `"},"Action":"sts:AssumeRole"}]}`
}

func iamTags(name string) []iamtypes.Tag {
	return []iamtypes.Tag{
		{Key: aws.String(TagCluster), Value: aws.String(name)},
		{Key: aws.String(TagManagedBy), Value: aws.String("kiln")},
	}
}

func iamTagged(tags []iamtypes.Tag, name string) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == TagCluster && aws.ToString(t.Value) == name {
			return true
		}
	}
	return false
}

// partition is the ARN partition of arn ("aws", "aws-cn", …).
func partition(arn string) string {
	if f := strings.SplitN(arn, ":", 3); len(f) == 3 {
		return f[1]
	}
	return "aws"
}

// ensureRoles creates the cluster and node roles (looked up with GetRole
// first: CreateRole on an existing name must never be what decides) and
// attaches the AWS managed policies EKS requires.
//
// An endpoint that is not AWS (AWS_ENDPOINT_URL: an emulator) may have no
// AWS managed policies; there, NoSuchEntity on attaching one is reported as
// a warning and the role is left without it. Against AWS it is an error.
func (in *infra) ensureRoles(ctx context.Context) error {
	for _, r := range roles {
		n := resourceName(in.name, r.part)
		got, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(n)})
		var arn string
		switch {
		case err == nil:
			if !iamTagged(got.Role.Tags, in.name) {
				return in.fail(KindIAMRole, n, fmt.Errorf("IAM role %s exists but is not tagged %s=%s; kiln does not adopt roles it did not create; rename or delete it", n, TagCluster, in.name))
			}
			arn = aws.ToString(got.Role.Arn)
		case apiCode(err) == "NoSuchEntity":
			in.emit(KindIAMRole, n, engine.StatusInProgress, "creating (assumed by %s)", r.service)
			out, err := in.iam.CreateRole(ctx, &iam.CreateRoleInput{
				RoleName: aws.String(n), AssumeRolePolicyDocument: aws.String(trustPolicy(r.service)),
				Description: aws.String("kiln cluster " + in.name + " (" + r.part + ")"),
				Tags:        iamTags(in.name),
			})
			if err != nil {
				return in.fail(KindIAMRole, n, fmt.Errorf("create IAM role %s: %w", n, err))
			}
			arn = aws.ToString(out.Role.Arn)
		default:
			return in.fail(KindIAMRole, n, fmt.Errorf("get IAM role %s: %w", n, err))
		}
		in.roleARNs[r.part] = arn
		attached := map[string]bool{}
		pg := iam.NewListAttachedRolePoliciesPaginator(in.iam, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(n)})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return in.fail(KindIAMRole, n, fmt.Errorf("list policies of %s: %w", n, err))
			}
			for _, ap := range page.AttachedPolicies {
				attached[aws.ToString(ap.PolicyArn)] = true
			}
		}
		var missing []string
		for _, pol := range r.policies {
			parn := "arn:" + partition(arn) + ":iam::aws:policy/" + pol
			if attached[parn] {
				continue
			}
			_, err := in.iam.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(n), PolicyArn: aws.String(parn)})
			switch {
			case err == nil:
			case apiCode(err) == "NoSuchEntity" && customEndpoint(in.cfg):
				missing = append(missing, pol)
			default:
				return in.fail(KindIAMRole, n, fmt.Errorf("attach %s to %s: %w", parn, n, err))
			}
		}
		if len(missing) > 0 {
			logf(in.sink, engine.LevelWarn, "IAM role %s: the endpoint %s has no AWS managed policies %s (an emulator); the role is left without them",
				n, aws.ToString(in.cfg.BaseEndpoint), strings.Join(missing, ", "))
		}
		in.emit(KindIAMRole, n, engine.StatusCurrent, "%s", arn)
	}
	return nil
}

func (in *infra) ensureCluster(ctx context.Context) error {
	n := in.name
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
	switch {
	case err == nil:
		if out.Cluster.Tags[TagCluster] != in.name {
			return in.fail(KindEKSCluster, n, fmt.Errorf("EKS cluster %s exists in %s but is not tagged %s=%s; kiln does not adopt clusters it did not create", n, in.region, TagCluster, in.name))
		}
		switch out.Cluster.Status {
		case ekstypes.ClusterStatusDeleting, ekstypes.ClusterStatusFailed:
			return in.fail(KindEKSCluster, n, fmt.Errorf("EKS cluster %s is %s; run `%s`, then create again", n, out.Cluster.Status, command("destroy", in.name, in.region)))
		}
	case apiCode(err) == "ResourceNotFoundException":
		in.emit(KindEKSCluster, n, engine.StatusInProgress, "creating")
		err := retryRolePropagation(ctx, func(ctx context.Context) error {
			var version *string
			if in.p.KubernetesVersion != "" {
				version = aws.String(in.p.KubernetesVersion)
			}
			_, err := in.eks.CreateCluster(ctx, &eks.CreateClusterInput{
				Name:    aws.String(n),
				Version: version,
				RoleArn: aws.String(in.roleARNs["cluster"]),
				// Access entries, with the creator as bootstrap admin
				// (access.go; API_CreateAccessConfigRequest.html).
				AccessConfig: &ekstypes.CreateAccessConfigRequest{
					AuthenticationMode:                      AuthenticationMode,
					BootstrapClusterCreatorAdminPermissions: aws.Bool(true),
				},
				ResourcesVpcConfig: &ekstypes.VpcConfigRequest{
					SubnetIds: in.subnetIDs, SecurityGroupIds: []string{in.sgID},
					EndpointPublicAccess: aws.Bool(true),
				},
				Tags: map[string]string{TagCluster: in.name, TagManagedBy: "kiln"},
			})
			return err
		})
		if err != nil && apiCode(err) != "ResourceInUseException" {
			return in.fail(KindEKSCluster, n, fmt.Errorf("create EKS cluster %s: %w", n, err))
		}
	default:
		return in.fail(KindEKSCluster, n, fmt.Errorf("describe EKS cluster %s: %w", n, err))
	}
	err = poll(ctx, waitLimit, func(ctx context.Context) (bool, error) {
		out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
		if err != nil {
			return false, fmt.Errorf("describe EKS cluster %s: %w", n, err)
		}
		in.cluster = out.Cluster
		switch out.Cluster.Status {
		case ekstypes.ClusterStatusActive:
			return true, nil
		case ekstypes.ClusterStatusFailed, ekstypes.ClusterStatusDeleting:
			return false, fmt.Errorf("EKS cluster %s is %s", n, out.Cluster.Status)
		}
		in.emit(KindEKSCluster, n, engine.StatusInProgress, "%s", out.Cluster.Status)
		return false, nil
	})
	if err != nil {
		return in.fail(KindEKSCluster, n, err)
	}
	got := aws.ToString(in.cluster.Version)
	if want := in.p.KubernetesVersion; want != "" && got != want {
		// Never ignore what the user asked for: an existing cluster runs
		// another version, and create does not change it.
		err := exit.Usage("--kubernetes-version %s: EKS cluster %s already runs Kubernetes %s, and create does not change the version of an existing cluster; run create without --kubernetes-version (or with %s)", want, n, got, got)
		return in.fail(KindEKSCluster, n, err)
	}
	in.emit(KindEKSCluster, n, engine.StatusCurrent, "ACTIVE, Kubernetes %s", got)
	return nil
}

func (in *infra) ensureNodegroup(ctx context.Context) error {
	n := nodegroupName
	out, err := in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
	if apiCode(err) == "ResourceNotFoundException" {
		// An upgrade that changed the instance type replaced kiln-nodes
		// by kiln-nodes-TYPE (upgrade.go): that group is the cluster's.
		if st, serr := in.readState(ctx); serr == nil && len(st.groups) > 0 {
			n = aws.ToString(st.groups[len(st.groups)-1].NodegroupName)
			out, err = in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
		}
	}
	switch {
	case err == nil:
		if out.Nodegroup.Tags[TagCluster] != in.name {
			return in.fail(KindNodegroup, n, fmt.Errorf("node group %s of EKS cluster %s is not tagged %s=%s; kiln does not adopt it", n, in.name, TagCluster, in.name))
		}
	case apiCode(err) == "ResourceNotFoundException":
		in.emit(KindNodegroup, n, engine.StatusInProgress, "creating %d × %s", in.p.nodes(), in.p.instanceType())
		err := retryRolePropagation(ctx, func(ctx context.Context) error {
			_, err := in.eks.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
				ClusterName: aws.String(in.name), NodegroupName: aws.String(n),
				NodeRole: aws.String(in.roleARNs["node"]), Subnets: in.subnetIDs,
				InstanceTypes: []string{in.p.instanceType()},
				ScalingConfig: &ekstypes.NodegroupScalingConfig{
					MinSize: aws.Int32(in.p.nodes()), MaxSize: aws.Int32(in.p.nodes()), DesiredSize: aws.Int32(in.p.nodes()),
				},
				Tags: map[string]string{TagCluster: in.name, TagManagedBy: "kiln"},
			})
			return err
		})
		if err != nil && apiCode(err) != "ResourceInUseException" {
			return in.fail(KindNodegroup, n, fmt.Errorf("create node group %s: %w", n, err))
		}
	default:
		return in.fail(KindNodegroup, n, fmt.Errorf("describe node group %s: %w", n, err))
	}
	var ng *ekstypes.Nodegroup
	err = poll(ctx, waitLimit, func(ctx context.Context) (bool, error) {
		out, err := in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
		if err != nil {
			return false, fmt.Errorf("describe node group %s: %w", n, err)
		}
		ng = out.Nodegroup
		switch ng.Status {
		case ekstypes.NodegroupStatusActive:
			return true, nil
		case ekstypes.NodegroupStatusCreateFailed, ekstypes.NodegroupStatusDeleting, ekstypes.NodegroupStatusDegraded:
			return false, fmt.Errorf("node group %s is %s", n, ng.Status)
		}
		in.emit(KindNodegroup, n, engine.StatusInProgress, "%s", ng.Status)
		return false, nil
	})
	if err != nil {
		return in.fail(KindNodegroup, n, err)
	}
	size := int32(0)
	if ng.ScalingConfig != nil {
		size = aws.ToInt32(ng.ScalingConfig.DesiredSize)
	}
	in.emit(KindNodegroup, n, engine.StatusCurrent, "ACTIVE, %d × %s", size, strings.Join(ng.InstanceTypes, ","))
	return nil
}

// retryRolePropagation retries create while EKS says the new IAM role
// cannot be assumed yet (IAM is eventually consistent: a role is usable
// seconds after CreateRole returns), for up to two minutes.
func retryRolePropagation(ctx context.Context, create func(context.Context) error) error {
	var last error
	err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		last = create(ctx)
		if apiCode(last) == "InvalidParameterException" && strings.Contains(strings.ToLower(last.Error()), "role") {
			return false, nil
		}
		return true, last
	})
	if errors.Is(err, errPollLimit) {
		return last
	}
	return err
}

// errPollLimit is returned when poll's limit passes.
var errPollLimit = errors.New("gave up waiting")

// poll asks check until it reports done, with a backoff from 1s to 15s
// (EKS has no watch API; its own waiters poll the same way). check runs at
// once first, so a resource that is already there costs no delay.
func poll(ctx context.Context, limit time.Duration, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	delay := time.Second
	for {
		done, err := check(ctx)
		if err != nil || done {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w after %s", errPollLimit, limit)
			}
			return ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 15*time.Second)
	}
}

// clusterExists says whether the EKS cluster exists (in any state).
func (in *infra) clusterExists(ctx context.Context) (bool, error) {
	_, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(in.name)})
	switch {
	case err == nil:
		return true, nil
	case apiCode(err) == "ResourceNotFoundException":
		return false, nil
	}
	return false, fmt.Errorf("describe EKS cluster %s: %w", in.name, err)
}
