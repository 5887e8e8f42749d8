package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/kilnctl/kiln/docs"
	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/internal/testenv/awsemu"
)

// TestCheckPrincipal: --admin and --viewer take IAM role and user ARNs as
// IAM forms them (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html,
// reference_identifiers.html: 12-digit account, optional path, a name of
// at most 64 of [A-Za-z0-9+=,.@_-]); EKS refuses STS session principals
// (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html).
// A bad one is exit 2 naming the flag and the value.
func TestCheckPrincipal(t *testing.T) {
	for _, ok := range []string{
		"arn:aws:iam::123456789012:role/ci",
		"arn:aws:iam::123456789012:role/team/ops/deployer",
		"arn:aws:iam::123456789012:user/alice@example.com",
		"arn:aws-cn:iam::123456789012:role/a+b=c,d.e_f-g",
		"arn:aws-us-gov:iam::123456789012:user/u",
	} {
		if err := CheckPrincipal(input.Admin, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "ci", "arn:aws:iam::12345:role/x", "arn:aws:iam::123456789012:group/devs",
		"arn:aws:iam::123456789012:role/", "arn:aws:iam:us-east-1:123456789012:role/x",
		"arn:aws:iam::123456789012:role/" + strings.Repeat("x", 65), "arn:aws:iam::123456789012:role/sp ace",
		"arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy", "arn:other:iam::123456789012:role/x",
		"arn:aws:sts::123456789012:assumed-role/dev/session",
	} {
		err := CheckPrincipal(input.Viewer, bad)
		if err == nil || failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "--viewer") || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want exit 2 naming --viewer and the value", bad, err)
		}
	}
	if err := CheckPrincipal(input.Admin, "arn:aws:sts::123456789012:assumed-role/dev/s"); !strings.Contains(err.Error(), "arn:aws:iam::123456789012:role/dev") {
		t.Errorf("an assumed-role ARN is not answered with its role: %v", err)
	}
	a := Access{Admins: []string{"arn:aws:iam::123456789012:role/x"}, Viewers: []string{"arn:aws:iam::123456789012:role/x"}, SetAdmins: true, SetViewers: true}
	if err := a.validate(); failure.Of(err) != failure.Input {
		t.Errorf("one principal as admin and viewer: %v", err)
	}
	a = Access{Admins: []string{"arn:aws-cn:iam::123456789012:role/x"}, SetAdmins: true}
	if err := a.checkPartition("eu-west-1"); failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "aws-cn") {
		t.Errorf("an aws-cn ARN for eu-west-1: %v", err)
	}
}

// TestSameIdentity: the caller STS names (a user, or an assumed-role
// session: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns)
// against an entry's principal.
func TestSameIdentity(t *testing.T) {
	for _, tc := range []struct {
		caller, principal string
		want              bool
	}{
		{"arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/alice", true},
		{"arn:aws:sts::123456789012:assumed-role/ci/run-7", "arn:aws:iam::123456789012:role/ci", true},
		{"arn:aws:sts::123456789012:assumed-role/ci/run-7", "arn:aws:iam::123456789012:role/team/ci", true},
		{"arn:aws:sts::123456789012:assumed-role/ci/run-7", "arn:aws:iam::123456789012:role/xci", false},
		{"arn:aws:sts::123456789012:assumed-role/ci/run-7", "arn:aws:iam::210987654321:role/ci", false},
		{"arn:aws:iam::123456789012:root", "arn:aws:iam::123456789012:user/root", false},
	} {
		if got := sameIdentity(tc.caller, tc.principal); got != tc.want {
			t.Errorf("sameIdentity(%s, %s) = %v", tc.caller, tc.principal, got)
		}
	}
}

// TestPlanAccess: a flag given makes kiln's entries of its kind exactly
// the ARNs named (creates before deletes); a flag not given keeps them;
// entries kiln did not create are never changed, and naming one that is
// not already what is asked is exit 2; kiln's viewer entry that gained a
// policy loses it.
func TestPlanAccess(t *testing.T) {
	const (
		a1 = "arn:aws:iam::123456789012:role/a1"
		a2 = "arn:aws:iam::123456789012:role/a2"
		v1 = "arn:aws:iam::123456789012:user/v1"
		cr = "arn:aws:iam::123456789012:user/creator"
		ot = "arn:aws:iam::123456789012:role/other"
	)
	in := &infra{p: &Provider{}, name: "c", region: "us-east-1"}
	admin := in.adminPolicyARN()
	have := []accessEntry{
		{principal: a1, kiln: true, kind: engine.AccessAdmin, policies: []string{admin}, scopes: map[string]ekstypes.AccessScopeType{admin: ekstypes.AccessScopeTypeCluster}},
		{principal: v1, kiln: true, kind: engine.AccessViewer, groups: []string{SupportGroup}, scopes: map[string]ekstypes.AccessScopeType{}},
		{principal: cr, kind: engine.AccessAdmin, policies: []string{admin}, scopes: map[string]ekstypes.AccessScopeType{admin: ekstypes.AccessScopeTypeCluster}},
		{principal: ot, kind: engine.AccessOther, groups: []string{"devs"}, scopes: map[string]ekstypes.AccessScopeType{}},
	}
	plan := func(a Access) ([]string, error) {
		in.p.Access = a
		steps, err := in.planAccess(slices.Clone(have))
		var out []string
		for _, s := range steps {
			out = append(out, fmt.Sprintf("%s %s %s", s.action, s.kind, s.principal))
		}
		return out, err
	}
	for _, tc := range []struct {
		a    Access
		want []string
	}{
		{Access{}, nil},
		{Access{Admins: []string{a1}, SetAdmins: true}, nil},
		{Access{Admins: []string{a2}, SetAdmins: true}, []string{"create admin " + a2, "delete admin " + a1}},
		{Access{SetViewers: true}, []string{"delete viewer " + v1}},
		{Access{Admins: []string{cr}, SetAdmins: true}, []string{"delete admin " + a1}},
		{Access{Viewers: []string{a1, v1}, SetViewers: true}, []string{"replace viewer " + a1}},
	} {
		got, err := plan(tc.a)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v %v, want %v", tc.a, got, err, tc.want)
		}
	}
	if _, err := plan(Access{Viewers: []string{ot}, SetViewers: true}); failure.Of(err) != failure.Input || !strings.Contains(err.Error(), ot) {
		t.Errorf("naming an entry kiln did not create: %v, want exit 2", err)
	}
	have[1].policies = []string{admin}
	if got, _ := plan(Access{}); !slices.Equal(got, []string{"update viewer " + v1}) {
		t.Errorf("kiln's viewer with a policy: %v, want an update", got)
	}
}

// TestSupportObjects: the ClusterRoles kiln applies on EKS are those of
// docs/rbac-support.yaml (kiln-support first, and the namespaced role its
// subjects get in each kiln namespace), and the viewers' group (which EKS
// refuses to start with "system:",
// https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html)
// is bound to it.
func TestSupportObjects(t *testing.T) {
	roles, b, err := supportObjects("c")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, role := range roles {
		names = append(names, role.Name)
		if len(role.Rules) == 0 || !strings.Contains(string(docs.SupportRBAC), "name: "+role.Name) {
			t.Errorf("ClusterRole %s with %d rules", role.Name, len(role.Rules))
		}
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Verbs, "*") {
				t.Errorf("support role %s reads secrets or has every verb: %+v", role.Name, r)
			}
		}
	}
	if !slices.Equal(names, []string{SupportRole, "kiln-support-namespaced"}) {
		t.Errorf("ClusterRoles %v, want kiln-support and kiln-support-namespaced", names)
	}
	if b.RoleRef.Name != SupportRole || len(b.Subjects) != 1 || b.Subjects[0].Kind != "Group" || b.Subjects[0].Name != SupportGroup || strings.HasPrefix(SupportGroup, "system:") {
		t.Errorf("binding %+v", b)
	}
}

// TestUpgradeSwitchesAConfigMapCluster: an EKS cluster in authentication
// mode CONFIG_MAP (made by a kiln before access entries) is moved to
// API_AND_CONFIG_MAP by the next upgrade — planned, then UpdateClusterConfig
// (https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateClusterConfig.html,
// API_UpdateAccessConfigRequest.html) waited for — and then gets the
// entries asked; create with --admin on such a cluster is exit 2 pointing
// at upgrade.
func TestUpgradeSwitchesAConfigMapCluster(t *testing.T) {
	e := emulator(t)
	e.SetUpdateDuration(time.Second) // the rerun waits a running update out
	t.Cleanup(func() { e.SetUpdateDuration(awsemu.DefaultUpdateDuration) })
	ctx := context.Background()
	const region = "us-east-1"
	name := uniq("cfgmap")
	cfg, err := e.Config(ctx, region)
	if err != nil {
		t.Fatal(err)
	}
	c := eks.NewFromConfig(cfg)
	if _, err := c.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::123456789012:role/r"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1"}}, Tags: map[string]string{TagCluster: name, TagManagedBy: "kiln"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(nodegroupName),
		NodeRole: aws.String("arn:aws:iam::123456789012:role/nodes"), Subnets: []string{"subnet-1"}, InstanceTypes: []string{DefaultInstanceType},
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(2), MaxSize: aws.Int32(2), DesiredSize: aws.Int32(2)},
		Tags:          map[string]string{TagCluster: name, TagManagedBy: "kiln"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(nodegroupName)})
		_, _ = c.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(name)})
	})
	const admin = "arn:aws:iam::123456789012:role/ci"
	p := newTestProvider(t, e)
	p.Access = Access{Admins: []string{admin}, SetAdmins: true}

	in, err := p.newInfra(ctx, name, region, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	in.cluster = d.Cluster
	if err := in.ensureAccess(ctx); failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "kiln upgrade aws "+name) {
		t.Errorf("create's access step on a CONFIG_MAP cluster: %v, want exit 2 naming kiln upgrade", err)
	}

	changes, err := p.PlanInfrastructure(ctx, name, region)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range changes {
		if ch.Kind == KindEKSCluster || ch.Kind == KindAccessEntry {
			got = append(got, ch.Action+" "+ch.Kind+" "+ch.Name+" "+strings.Join(ch.Fields, ","))
		}
	}
	want := []string{"update EKSCluster " + name + " accessConfig.authenticationMode", "create AccessEntry " + admin + " kubernetesGroups,accessPolicies"}
	if !slices.Equal(got, want) {
		t.Errorf("plan %v, want %v", got, want)
	}
	// Stopped right after EKS was asked to switch, the rerun waits the
	// update out and goes on.
	func() {
		p.Hooks = stopAt("aws-upgrade-access-mode-requested")
		defer func() {
			p.Hooks = nil // the rerun below goes through
			if r := recover(); r != nil && r != (stop{}) {
				panic(r)
			}
		}()
		_ = p.UpgradeInfrastructure(ctx, name, region, nil)
		t.Fatal("the upgrade never reached aws-upgrade-access-mode-requested")
	}()
	sink := &events{}
	if err := p.UpgradeInfrastructure(ctx, name, region, sink.rep()); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, sink)
	}
	d, err = c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil || d.Cluster.AccessConfig.AuthenticationMode != ekstypes.AuthenticationModeApiAndConfigMap {
		t.Fatalf("mode after the upgrade: %+v %v", d.Cluster.AccessConfig, err)
	}
	if v := e.AccessEntries(region, name)[admin]; !slices.Equal(v, []string{in.adminPolicyARN()}) {
		t.Errorf("%s after the upgrade: %v", admin, v)
	}
	acc := p.ReadAccess(ctx, name, region)
	if acc.Mode != "API_AND_CONFIG_MAP" || len(acc.Entries) != 1 || !acc.Entries[0].Kiln || acc.Entries[0].Kind != engine.AccessAdmin {
		t.Errorf("ReadAccess = %+v", acc)
	}
	if changes, err := p.PlanInfrastructure(ctx, name, region); err != nil || len(changes) != 0 {
		t.Errorf("not converged: %v %v", changes, err)
	}
}

// stopAt is a hook that stops the operation (panic stop{}) at point.
type stopAt string

func (s stopAt) At(_ context.Context, point string) {
	if point == string(s) {
		panic(stop{})
	}
}
