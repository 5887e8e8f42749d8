package awsemu

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// TestEKSAccessEntriesEmulated drives the emulated access-entry operations
// through the real aws-sdk-go-v2 client (so on the paths it sends, the
// principal ARN escaped in the path) and checks the answers EKS gives:
//
//   - https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessConfigRequest.html:
//     authenticationMode is API | API_AND_CONFIG_MAP | CONFIG_MAP, default
//     CONFIG_MAP; bootstrapClusterCreatorAdminPermissions default true;
//   - https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html:
//     one entry per principal (ResourceInUseException), no STS session
//     principal (InvalidParameterException);
//   - https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html:
//     no group name starting with system:, no entry on a CONFIG_MAP
//     cluster (InvalidRequestException);
//   - https://docs.aws.amazon.com/eks/latest/APIReference/API_AssociateAccessPolicy.html,
//     API_AccessScope.html: scope cluster or namespace (with namespaces);
//   - unknown cluster or entry: ResourceNotFoundException.
func TestEKSAccessEntriesEmulated(t *testing.T) {
	e := start(t, Options{})
	ctx := t.Context()
	c := eks.NewFromConfig(cfg(t, e, regionA))
	vpc := &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1"}}
	role := aws.String("arn:aws:iam::123456789012:role/r")

	// A cluster without accessConfig is CONFIG_MAP, with no entries.
	if _, err := c.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("cm"), RoleArn: role, ResourcesVpcConfig: vpc}); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("cm")})
	if err != nil {
		t.Fatal(err)
	}
	if ac := d.Cluster.AccessConfig; ac == nil || ac.AuthenticationMode != ekstypes.AuthenticationModeConfigMap || !aws.ToBool(ac.BootstrapClusterCreatorAdminPermissions) {
		t.Errorf("default accessConfig = %+v, want CONFIG_MAP with bootstrap true", ac)
	}
	if _, err := c.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String("cm")}); apiErrorCode(err) != errInvalidRequest {
		t.Errorf("ListAccessEntries on CONFIG_MAP: %v, want %s", err, errInvalidRequest)
	}
	if _, err := c.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("bad"), RoleArn: role, ResourcesVpcConfig: vpc,
		AccessConfig: &ekstypes.CreateAccessConfigRequest{AuthenticationMode: "OPEN"}}); apiErrorCode(err) != errInvalidParameter {
		t.Errorf("CreateCluster with authenticationMode OPEN: %v, want %s", err, errInvalidParameter)
	}

	// https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateClusterConfig.html,
	// API_UpdateAccessConfigRequest.html: CONFIG_MAP → API_AND_CONFIG_MAP is
	// an update of the cluster, never undone.
	e.SetUpdateDuration(0)
	up, err := c.UpdateClusterConfig(ctx, &eks.UpdateClusterConfigInput{Name: aws.String("cm"),
		AccessConfig: &ekstypes.UpdateAccessConfigRequest{AuthenticationMode: ekstypes.AuthenticationModeApiAndConfigMap}})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitUpdate(t, c, "cm", "", aws.ToString(up.Update.Id)); st != ekstypes.UpdateStatusSuccessful {
		t.Fatalf("access config update %s", st)
	}
	if _, err := c.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String("cm")}); err != nil {
		t.Errorf("ListAccessEntries after the switch: %v", err)
	}
	if _, err := c.UpdateClusterConfig(ctx, &eks.UpdateClusterConfigInput{Name: aws.String("cm"),
		AccessConfig: &ekstypes.UpdateAccessConfigRequest{AuthenticationMode: ekstypes.AuthenticationModeConfigMap}}); apiErrorCode(err) != errInvalidParameter {
		t.Errorf("back to CONFIG_MAP: %v, want %s", err, errInvalidParameter)
	}

	const name = "acc"
	if _, err := c.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(name), RoleArn: role, ResourcesVpcConfig: vpc,
		AccessConfig: &ekstypes.CreateAccessConfigRequest{AuthenticationMode: ekstypes.AuthenticationModeApiAndConfigMap, BootstrapClusterCreatorAdminPermissions: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	d, err = c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil || d.Cluster.AccessConfig.AuthenticationMode != ekstypes.AuthenticationModeApiAndConfigMap {
		t.Fatalf("DescribeCluster accessConfig: %+v %v", d, err)
	}
	l, err := c.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String(name)})
	if err != nil || len(l.AccessEntries) != 1 || l.AccessEntries[0] != CreatorARN {
		t.Fatalf("entries after create = %v %v, want the creator's bootstrap entry", l, err)
	}

	const p = "arn:aws:iam::123456789012:role/team/ci-deployer"
	create := func(principal string, groups ...string) error {
		_, err := c.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(principal),
			Type: aws.String("STANDARD"), KubernetesGroups: groups, Tags: map[string]string{"kiln.dev/access": "viewer"}})
		return err
	}
	if err := create(p, "kiln:support"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		principal string
		groups    []string
		want      string
	}{
		{p, nil, errResourceInUse},
		{"arn:aws:sts::123456789012:assumed-role/dev/session", nil, errInvalidParameter},
		{"arn:aws:iam::1234:role/short-account", nil, errInvalidParameter},
		{"arn:aws:iam::123456789012:group/devs", nil, errInvalidParameter},
		{"arn:aws:iam::123456789012:user/u", []string{"system:masters"}, errInvalidParameter},
	} {
		if err := create(tc.principal, tc.groups...); apiErrorCode(err) != tc.want {
			t.Errorf("CreateAccessEntry %s %v: %v, want %s", tc.principal, tc.groups, err, tc.want)
		}
	}
	got, err := c.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(p)})
	if err != nil || aws.ToString(got.AccessEntry.PrincipalArn) != p || got.AccessEntry.Tags["kiln.dev/access"] != "viewer" || len(got.AccessEntry.KubernetesGroups) != 1 {
		t.Fatalf("DescribeAccessEntry = %+v %v", got, err)
	}

	pol := aws.String("arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy")
	assoc := func(scope *ekstypes.AccessScope) error {
		_, err := c.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: aws.String(name), PrincipalArn: aws.String(p), PolicyArn: pol, AccessScope: scope})
		return err
	}
	if err := assoc(&ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeNamespace}); apiErrorCode(err) != errInvalidParameter {
		t.Errorf("namespace scope without namespaces: %v, want %s", err, errInvalidParameter)
	}
	if err := assoc(&ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}); err != nil {
		t.Fatal(err)
	}
	ap, err := c.ListAssociatedAccessPolicies(ctx, &eks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String(name), PrincipalArn: aws.String(p)})
	if err != nil || len(ap.AssociatedAccessPolicies) != 1 || ap.AssociatedAccessPolicies[0].AccessScope.Type != ekstypes.AccessScopeTypeCluster {
		t.Fatalf("ListAssociatedAccessPolicies = %+v %v", ap, err)
	}
	if _, err := c.DisassociateAccessPolicy(ctx, &eks.DisassociateAccessPolicyInput{ClusterName: aws.String(name), PrincipalArn: aws.String(p), PolicyArn: pol}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DisassociateAccessPolicy(ctx, &eks.DisassociateAccessPolicyInput{ClusterName: aws.String(name), PrincipalArn: aws.String(p), PolicyArn: pol}); apiErrorCode(err) != errResourceNotFound {
		t.Errorf("second DisassociateAccessPolicy: %v, want %s", err, errResourceNotFound)
	}
	if _, err := c.UpdateAccessEntry(ctx, &eks.UpdateAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(p), KubernetesGroups: []string{"system:nodes"}}); apiErrorCode(err) != errInvalidParameter {
		t.Errorf("UpdateAccessEntry to system:nodes: %v, want %s", err, errInvalidParameter)
	}
	if _, err := c.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(p)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(p)}); apiErrorCode(err) != errResourceNotFound {
		t.Errorf("DescribeAccessEntry after delete: %v, want %s", err, errResourceNotFound)
	}
	if _, err := c.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String("nope")}); apiErrorCode(err) != errResourceNotFound {
		t.Errorf("ListAccessEntries of an unknown cluster: %v, want %s", err, errResourceNotFound)
	}
	// A managed node group's role gets the EC2_LINUX entry EKS makes.
	const nodeRole = "arn:aws:iam::123456789012:role/nodes"
	if _, err := c.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String("ng"),
		NodeRole: aws.String(nodeRole), Subnets: []string{"subnet-1"}}); err != nil {
		t.Fatal(err)
	}
	ne, err := c.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(nodeRole)})
	if err != nil || aws.ToString(ne.AccessEntry.Type) != "EC2_LINUX" {
		t.Errorf("node role entry: %+v %v", ne, err)
	}
	if reqs := e.AccessRequests(); len(reqs) == 0 || reqs[0].Op != "ListAccessEntries" {
		t.Errorf("requests not recorded: %+v", reqs)
	}
}
