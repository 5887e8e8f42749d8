// Over 400 lines on purpose: the network of a kiln EKS cluster is one
// family of resources, with its steps side by side: ensure (VPC, subnets
// in zones chosen by zone ID, internet gateway, route table, security
// group), inventory by tag, and deletion in reverse order, each verified. Lookups by tag send the tag
// filter for real AWS and also filter the result here, because not every
// EC2 implementation applies filters (kumo ignores most of them).

package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
)

// The network kiln creates: a /16 VPC and two public /18 subnets.
const (
	vpcCIDR = "10.0.0.0/16"
)

var subnetCIDRs = [2]string{"10.0.0.0/18", "10.0.64.0/18"}

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
	}, afterCreate); err != nil {
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
				return in.fail(KindSubnet, n, input.New(failure.Failed, input.InstanceType, in.p.instanceType(), "region %s has no second availability zone where EKS and %s can run (EKS needs subnets in two); passed over: %s. Choose another region or instance type ({input:region}, {input})", in.region, in.p.instanceType(), zc.why()))
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
			}, afterCreate)
			if err != nil {
				return in.fail(KindSubnet, n, fmt.Errorf("create subnet %s: %w", n, err))
			}
			id = aws.ToString(out.Subnet.SubnetId)
		}
		// Nodes in public subnets need public addresses.
		if _, err := in.ec2.ModifySubnetAttribute(ctx, &ec2.ModifySubnetAttributeInput{
			SubnetId: aws.String(id), MapPublicIpOnLaunch: &ec2types.AttributeBooleanValue{Value: aws.Bool(true)},
		}, afterCreate); err != nil {
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
		}, afterCreate); err != nil && apiCode(err) != "Resource.AlreadyAssociated" {
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
		}, afterCreate)
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
		}, afterCreate); err != nil && apiCode(err) != "RouteAlreadyExists" {
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
		}, afterCreate); err != nil && apiCode(err) != "Resource.AlreadyAssociated" {
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
		}, afterCreate)
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
	}, afterCreate); err != nil && apiCode(err) != "InvalidPermission.Duplicate" {
		return in.fail(KindSecurityGroup, n, fmt.Errorf("allow traffic within %s: %w", in.sgID, err))
	}
	in.emit(KindSecurityGroup, n, engine.StatusCurrent, "%s", in.sgID)
	return nil
}

// networkInventory adds the kiln-tagged VPCs, subnets, internet gateways,
// route tables and security groups to inv.
func (in *infra) networkInventory(ctx context.Context, inv Inventory) error {
	vpcs, err := findVPCs(ctx, in.ec2, in.name)
	if err != nil {
		return err
	}
	for _, v := range vpcs {
		inv[KindVPC] = append(inv[KindVPC], aws.ToString(v.VpcId))
	}
	subnets, err := findSubnets(ctx, in.ec2, in.name)
	if err != nil {
		return err
	}
	for _, s := range subnets {
		inv[KindSubnet] = append(inv[KindSubnet], aws.ToString(s.SubnetId))
	}
	gws, err := findIGWs(ctx, in.ec2, in.name)
	if err != nil {
		return err
	}
	for _, g := range gws {
		inv[KindInternetGateway] = append(inv[KindInternetGateway], aws.ToString(g.InternetGatewayId))
	}
	rts, err := findRouteTables(ctx, in.ec2, in.name)
	if err != nil {
		return err
	}
	for _, r := range rts {
		inv[KindRouteTable] = append(inv[KindRouteTable], aws.ToString(r.RouteTableId))
	}
	sgs, err := findSecurityGroups(ctx, in.ec2, in.name)
	if err != nil {
		return err
	}
	for _, g := range sgs {
		inv[KindSecurityGroup] = append(inv[KindSecurityGroup], aws.ToString(g.GroupId))
	}
	return nil
}

// deleteEC2 deletes one EC2 resource, then confirms it is gone with
// exists. AWS answers DependencyViolation while something still uses the
// resource (DeleteVpc, DeleteSubnet, DeleteSecurityGroup in the EC2 API
// reference); the sweep (sweep.go) has removed what kiln removes, so one
// that persists for Limits.Dependency fails, naming what blocks (blockers,
// when given, describes it) — not deleteLimit of polling.
func (in *infra) deleteEC2(ctx context.Context, kind, id string, del func(context.Context) error, exists func(context.Context) (bool, error), blockers func(context.Context) string) error {
	in.emit(kind, id, engine.StatusTerminating, "deleting")
	var violation error
	limit := in.p.limits().Dependency
	err := poll(ctx, limit, func(ctx context.Context) (bool, error) {
		err := del(ctx)
		switch {
		case err == nil || strings.HasSuffix(apiCode(err), ".NotFound"):
			return true, nil
		case apiCode(err) == "DependencyViolation":
			violation = err
			in.emit(kind, id, engine.StatusTerminating, "waiting for dependencies to go: %v", err)
			return false, nil
		}
		return false, err
	})
	if violation != nil && timedOut(ctx, err) {
		what := ""
		if blockers != nil {
			if b := blockers(ctx); b != "" {
				what = "; blocked by " + b
			}
		}
		return in.fail(kind, id, fmt.Errorf("AWS refuses to delete %s %s for %s (DependencyViolation: %s)%s; kiln does not delete what it did not find in its VPC: remove it, then run `%s` again",
			kind, id, limit, errorMessage(violation), what, in.p.command("destroy", in.name, in.region)))
	}
	if err != nil {
		return in.fail(kind, id, fmt.Errorf("delete %s %s: %w", kind, id, err))
	}
	still, err := exists(ctx)
	if err != nil {
		return in.fail(kind, id, fmt.Errorf("confirm %s %s deleted: %w", kind, id, err))
	}
	if still {
		return in.fail(kind, id, fmt.Errorf("%s %s still exists after delete", kind, id))
	}
	in.emit(kind, id, engine.StatusNotFound, "deleted")
	return nil
}

// deleteSecurityGroups deletes every security group in kiln's VPCs but
// "default", and kiln's tagged ones, after revoking the rules by which
// they reference each other (sweep.go). A group kiln did not create is
// named in its event.
func (in *infra) deleteSecurityGroups(ctx context.Context) error {
	sgs, err := in.vpcSecurityGroups(ctx)
	if err != nil {
		return in.fail(KindSecurityGroup, resourceName(in.name, "sg"), err)
	}
	if len(sgs) == 0 {
		in.emit(KindSecurityGroup, resourceName(in.name, "sg"), engine.StatusNotFound, "none")
	}
	if err := in.revokeCrossReferences(ctx, sgs); err != nil {
		return in.fail(KindSecurityGroup, resourceName(in.name, "sg"), err)
	}
	for _, g := range sgs {
		id := aws.ToString(g.GroupId)
		if !hasTag(g.Tags, TagCluster, in.name) {
			in.emit(KindSecurityGroup, id, engine.StatusTerminating, "deleting: not created by kiln (%s, %q) but in kiln's VPC %s", aws.ToString(g.GroupName), aws.ToString(g.Description), aws.ToString(g.VpcId))
		}
		err := in.deleteEC2(ctx, KindSecurityGroup, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				out, err := in.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
				if apiCode(err) == "InvalidGroup.NotFound" {
					return false, nil
				}
				return err == nil && slices.ContainsFunc(out.SecurityGroups, func(x ec2types.SecurityGroup) bool { return aws.ToString(x.GroupId) == id }), err
			},
			func(ctx context.Context) string { return in.sgBlockers(ctx, id) })
		if err != nil {
			return err
		}
	}
	return nil
}

func (in *infra) deleteSubnets(ctx context.Context) error {
	subnets, err := findSubnets(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindSubnet, resourceName(in.name, "subnet"), err)
	}
	if len(subnets) == 0 {
		in.emit(KindSubnet, resourceName(in.name, "subnet"), engine.StatusNotFound, "none")
	}
	for _, s := range subnets {
		id := aws.ToString(s.SubnetId)
		err := in.deleteEC2(ctx, KindSubnet, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				left, err := findSubnets(ctx, in.ec2, in.name)
				return slices.ContainsFunc(left, func(x ec2types.Subnet) bool { return aws.ToString(x.SubnetId) == id }), err
			},
			func(ctx context.Context) string { return in.subnetBlockers(ctx, id) })
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteRouteTables reports left=true when the endpoint does not implement
// DeleteRouteTable (an emulator): the table is then left and reported.
func (in *infra) deleteRouteTables(ctx context.Context) (left bool, err error) {
	rts, err := findRouteTables(ctx, in.ec2, in.name)
	if err != nil {
		return false, in.fail(KindRouteTable, resourceName(in.name, "rt"), err)
	}
	if len(rts) == 0 {
		in.emit(KindRouteTable, resourceName(in.name, "rt"), engine.StatusNotFound, "none")
	}
	for _, rt := range rts {
		id := aws.ToString(rt.RouteTableId)
		_, err := in.ec2.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: aws.String(id)})
		if in.unsupported(err) {
			left = true
			in.emit(KindRouteTable, id, engine.StatusCurrent, "left behind: the endpoint %s does not implement DeleteRouteTable (%s)", aws.ToString(in.cfg.BaseEndpoint), apiCode(err))
			logf(in.sink, engine.LevelWarn, "route table %s of %s was not deleted: the endpoint %s does not implement DeleteRouteTable (an emulator); AWS would delete it",
				id, in.name, aws.ToString(in.cfg.BaseEndpoint))
			continue
		}
		err = in.deleteEC2(ctx, KindRouteTable, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				left, err := findRouteTables(ctx, in.ec2, in.name)
				return slices.ContainsFunc(left, func(x ec2types.RouteTable) bool { return aws.ToString(x.RouteTableId) == id }), err
			}, nil)
		if err != nil {
			return left, err
		}
	}
	return left, nil
}

func (in *infra) deleteIGWs(ctx context.Context) error {
	gws, err := findIGWs(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindInternetGateway, resourceName(in.name, "igw"), err)
	}
	if len(gws) == 0 {
		in.emit(KindInternetGateway, resourceName(in.name, "igw"), engine.StatusNotFound, "none")
	}
	for _, g := range gws {
		id := aws.ToString(g.InternetGatewayId)
		for _, a := range g.Attachments {
			if _, err := in.ec2.DetachInternetGateway(ctx, &ec2.DetachInternetGatewayInput{InternetGatewayId: aws.String(id), VpcId: a.VpcId}); err != nil &&
				apiCode(err) != "Gateway.NotAttached" && !strings.HasSuffix(apiCode(err), ".NotFound") {
				return in.fail(KindInternetGateway, id, fmt.Errorf("detach internet gateway %s from %s: %w", id, aws.ToString(a.VpcId), err))
			}
		}
		err := in.deleteEC2(ctx, KindInternetGateway, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteInternetGateway(ctx, &ec2.DeleteInternetGatewayInput{InternetGatewayId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				left, err := findIGWs(ctx, in.ec2, in.name)
				return slices.ContainsFunc(left, func(x ec2types.InternetGateway) bool { return aws.ToString(x.InternetGatewayId) == id }), err
			}, nil)
		if err != nil {
			return err
		}
	}
	return nil
}

func (in *infra) deleteVPCs(ctx context.Context) error {
	vpcs, err := findVPCs(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindVPC, resourceName(in.name, "vpc"), err)
	}
	if len(vpcs) == 0 {
		in.emit(KindVPC, resourceName(in.name, "vpc"), engine.StatusNotFound, "none")
	}
	for _, v := range vpcs {
		id := aws.ToString(v.VpcId)
		err := in.deleteEC2(ctx, KindVPC, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				left, err := findVPCs(ctx, in.ec2, in.name)
				return slices.ContainsFunc(left, func(x ec2types.Vpc) bool { return aws.ToString(x.VpcId) == id }), err
			},
			func(ctx context.Context) string { return in.vpcBlockers(ctx, id) })
		if err != nil {
			return err
		}
	}
	return nil
}

func clusterFilter(name string) []ec2types.Filter {
	return []ec2types.Filter{{Name: aws.String("tag:" + TagCluster), Values: []string{name}}}
}

func hasTag(tags []ec2types.Tag, key, value string) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == key && aws.ToString(t.Value) == value {
			return true
		}
	}
	return false
}

func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// ec2Tags are the tags of one kiln EC2 resource; role tells resources of
// one kind apart (subnet-1, subnet-2).
func ec2Tags(name, role string, extra ...ec2types.Tag) []ec2types.Tag {
	tags := []ec2types.Tag{
		{Key: aws.String(TagCluster), Value: aws.String(name)},
		{Key: aws.String(TagManagedBy), Value: aws.String("kiln")},
		{Key: aws.String(TagRole), Value: aws.String(role)},
		{Key: aws.String("Name"), Value: aws.String(resourceName(name, role))},
	}
	return append(tags, extra...)
}

func tagSpec(rt ec2types.ResourceType, tags []ec2types.Tag) []ec2types.TagSpecification {
	return []ec2types.TagSpecification{{ResourceType: rt, Tags: tags}}
}

func findVPCs(ctx context.Context, c *ec2.Client, name string) ([]ec2types.Vpc, error) {
	var out []ec2types.Vpc
	pg := ec2.NewDescribeVpcsPaginator(c, &ec2.DescribeVpcsInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe VPCs: %w", err)
		}
		for _, v := range page.Vpcs {
			if hasTag(v.Tags, TagCluster, name) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

func findSubnets(ctx context.Context, c *ec2.Client, name string) ([]ec2types.Subnet, error) {
	var out []ec2types.Subnet
	pg := ec2.NewDescribeSubnetsPaginator(c, &ec2.DescribeSubnetsInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe subnets: %w", err)
		}
		for _, s := range page.Subnets {
			if hasTag(s.Tags, TagCluster, name) {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func findIGWs(ctx context.Context, c *ec2.Client, name string) ([]ec2types.InternetGateway, error) {
	var out []ec2types.InternetGateway
	pg := ec2.NewDescribeInternetGatewaysPaginator(c, &ec2.DescribeInternetGatewaysInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe internet gateways: %w", err)
		}
		for _, g := range page.InternetGateways {
			if hasTag(g.Tags, TagCluster, name) {
				out = append(out, g)
			}
		}
	}
	return out, nil
}

func findRouteTables(ctx context.Context, c *ec2.Client, name string) ([]ec2types.RouteTable, error) {
	var out []ec2types.RouteTable
	pg := ec2.NewDescribeRouteTablesPaginator(c, &ec2.DescribeRouteTablesInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe route tables: %w", err)
		}
		for _, r := range page.RouteTables {
			if hasTag(r.Tags, TagCluster, name) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func findSecurityGroups(ctx context.Context, c *ec2.Client, name string) ([]ec2types.SecurityGroup, error) {
	var out []ec2types.SecurityGroup
	pg := ec2.NewDescribeSecurityGroupsPaginator(c, &ec2.DescribeSecurityGroupsInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe security groups: %w", err)
		}
		for _, g := range page.SecurityGroups {
			if hasTag(g.Tags, TagCluster, name) {
				out = append(out, g)
			}
		}
	}
	return out, nil
}
