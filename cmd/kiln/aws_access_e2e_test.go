package main

import (
	"context"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/internal/testenv/awsemu"
	"github.com/kilnctl/kiln/internal/testenv/testhooks"
)

// Rules of the EKS API reference the requests kiln sends are checked
// against (no real account is reachable here):
var (
	// https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html:
	// principalArn is an IAM principal (not an STS session), type STANDARD
	// for a person or CI role.
	iamPrincipalRule = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/`)
	// https://docs.aws.amazon.com/eks/latest/APIReference/API_AssociateAccessPolicy.html:
	// policyArn is an EKS cluster access policy.
	adminPolicy = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
)

// checkAccessRequests checks every access-entry request kiln sent for
// cluster against the API reference: CreateAccessEntry (STANDARD, an IAM
// principal, Kubernetes groups never starting with system: — EKS user
// guide, creating-access-entries.html — kiln's tags); AssociateAccessPolicy
// (only the cluster-admin policy, accessScope type cluster without
// namespaces — API_AccessScope.html — and only for admin principals; a
// viewer never gets a policy). It returns the principals created, by kind.
// Requests for the principals in notKiln (the test's own) are left out.
func checkAccessRequests(t *testing.T, emu *awsemu.Emulator, cluster string, viewers []string, notKiln ...string) map[string][]string {
	t.Helper()
	created := map[string][]string{}
	for _, r := range emu.AccessRequests() {
		p, _ := r.Body["principalArn"].(string)
		if r.Cluster != cluster || slices.Contains(notKiln, p) || slices.Contains(notKiln, r.Principal) {
			continue
		}
		switch r.Op {
		case "CreateAccessEntry":
			if !iamPrincipalRule.MatchString(p) || r.Body["type"] != "STANDARD" {
				t.Errorf("CreateAccessEntry breaks API_CreateAccessEntry: %v", r.Body)
			}
			groups, _ := r.Body["kubernetesGroups"].([]any)
			for _, g := range groups {
				if strings.HasPrefix(g.(string), "system:") {
					t.Errorf("CreateAccessEntry with a system: group: %v", r.Body)
				}
			}
			tags, _ := r.Body["tags"].(map[string]any)
			kind, _ := tags[awsprovider.TagAccess].(string)
			if tags[awsprovider.TagCluster] != cluster || tags[awsprovider.TagManagedBy] != "kiln" || (kind != "admin" && kind != "viewer") {
				t.Errorf("CreateAccessEntry without kiln's tags: %v", r.Body)
			}
			if kind == "viewer" && (len(groups) != 1 || groups[0] != awsprovider.SupportGroup) {
				t.Errorf("viewer entry not in group %s: %v", awsprovider.SupportGroup, r.Body)
			}
			if kind == "admin" && len(groups) != 0 {
				t.Errorf("admin entry with groups: %v", r.Body)
			}
			created[kind] = append(created[kind], p)
		case "AssociateAccessPolicy":
			scope, _ := r.Body["accessScope"].(map[string]any)
			ns, _ := scope["namespaces"].([]any)
			if r.Body["policyArn"] != adminPolicy || scope["type"] != "cluster" || len(ns) != 0 {
				t.Errorf("AssociateAccessPolicy breaks API_AssociateAccessPolicy/API_AccessScope or is not the admin policy: %v", r.Body)
			}
			if slices.Contains(viewers, r.Principal) {
				t.Errorf("a viewer (%s) got access policy %v", r.Principal, r.Body["policyArn"])
			}
		}
	}
	return created
}

// accessOf is the emulator's entries of cluster, as "principal: groups/policies",
// the node role's entry (which EKS makes for the node group) as "NODE ROLE".
func accessOf(emu *awsemu.Emulator, region, cluster string) []string {
	var out []string
	for p, v := range emu.AccessEntries(region, cluster) {
		if strings.HasSuffix(p, ":role/kiln-"+cluster+"-node") {
			p = "NODE ROLE"
		}
		out = append(out, p+": "+strings.Join(v, ","))
	}
	sort.Strings(out)
	return out
}

// TestAWSAccessEntries: kiln create aws sets authentication mode
// API_AND_CONFIG_MAP with the creator as bootstrap admin
// (API_CreateAccessConfigRequest.html) and makes --admin and --viewer
// entries; the viewers' group is bound to the kiln-support ClusterRole;
// status lists every entry (kind, kiln's or not); upgrade adds one and
// removes one, never touches an entry kiln did not create, keeps the
// entries when the flags are left out, removes all of a kind with
// --viewer none; a bad ARN is exit 2 naming flag and value, nothing
// written; an upgrade killed between an entry's creation and its policy
// association converges when run again.
func TestAWSAccessEntries(t *testing.T) {
	e, emu := awsEnv(t)
	const name, region = "awsacc", "us-east-1"
	const (
		admin1 = "arn:aws:iam::123456789012:role/ci-deployer"
		admin2 = "arn:aws:iam::123456789012:role/team/platform-admin"
		admin3 = "arn:aws:iam::123456789012:user/oncall@example.com"
		viewer = "arn:aws:iam::123456789012:role/support"
		other  = "arn:aws:iam::123456789012:role/hand-made"
	)
	t.Cleanup(func() {
		if r := e.aws("destroy", "aws", name, "--region", region, "--yes", "--headless"); r.code != 0 && r.code != 2 {
			t.Errorf("cleanup destroy: %s", r)
		}
		waitNamespaceGone(t, clusterB.Client, "kiln-system")
	})

	t.Run("bad ARN is exit 2 naming flag and value, nothing written", func(t *testing.T) {
		writes := emu.Writes(region)
		for _, bad := range [][]string{
			{"--admin", "arn:aws:iam::1234:role/x"},
			{"--viewer", "arn:aws:sts::123456789012:assumed-role/support/jane"},
			{"--admin", "support"},
			{"--viewer", "arn:aws:iam::123456789012:group/devs"},
		} {
			r := e.aws(append([]string{"create", "aws", name, "--region", region, "--headless"}, bad...)...)
			expect(t, r, 2)
			if out := r.stdout + r.stderr; !strings.Contains(out, bad[0]) || !strings.Contains(out, bad[1]) {
				t.Errorf("%v: the message does not name the flag and the value:\n%s", bad, r)
			}
		}
		if w := emu.Writes(region); w != writes {
			t.Errorf("a refused ARN wrote to AWS: %d writes", w-writes)
		}
	})

	r := e.aws("create", "aws", name, "--region", region, "--headless", "-o", "json", "--admin", admin1, "--viewer", viewer)
	expect(t, r, 0)
	cfg, err := emu.Config(context.Background(), region)
	if err != nil {
		t.Fatal(err)
	}
	c := eks.NewFromConfig(cfg)
	d, err := c.DescribeCluster(context.Background(), &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if ac := d.Cluster.AccessConfig; ac == nil || ac.AuthenticationMode != ekstypes.AuthenticationModeApiAndConfigMap || !aws.ToBool(ac.BootstrapClusterCreatorAdminPermissions) {
		t.Errorf("accessConfig = %+v, want API_AND_CONFIG_MAP with the creator as bootstrap admin", ac)
	}
	created := checkAccessRequests(t, emu, name, []string{viewer})
	if !slices.Equal(created["admin"], []string{admin1}) || !slices.Equal(created["viewer"], []string{viewer}) {
		t.Errorf("created %v, want admin %s and viewer %s", created, admin1, viewer)
	}
	want := []string{
		admin1 + ": " + adminPolicy,
		viewer + ": " + awsprovider.SupportGroup,
		awsemu.CreatorARN + ": " + adminPolicy,
		"NODE ROLE: ",
	}
	sort.Strings(want)
	if got := accessOf(emu, region, name); !slices.Equal(got, want) {
		t.Errorf("entries after create:\n%v\nwant\n%v", got, want)
	}
	b, err := clusterB.Client.RbacV1().ClusterRoleBindings().Get(context.Background(), awsprovider.SupportBinding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.RoleRef.Name != awsprovider.SupportRole || len(b.Subjects) != 1 || b.Subjects[0].Kind != "Group" || b.Subjects[0].Name != awsprovider.SupportGroup {
		t.Errorf("binding %s: %+v %+v", b.Name, b.RoleRef, b.Subjects)
	}
	if _, err := clusterB.Client.RbacV1().ClusterRoles().Get(context.Background(), awsprovider.SupportRole, metav1.GetOptions{}); err != nil {
		t.Errorf("ClusterRole %s: %v", awsprovider.SupportRole, err)
	}

	// An entry made by hand: listed, never touched.
	if _, err := c.CreateAccessEntry(context.Background(), &eks.CreateAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(other), KubernetesGroups: []string{"devs"}}); err != nil {
		t.Fatal(err)
	}

	// status: the entries by principal; the node role's entry, which EKS
	// made and kiln never touches, must be there every time, as "node".
	status := func(t *testing.T) map[string]map[string]any {
		t.Helper()
		r := e.aws("status", "aws", name, "--region", region, "-o", "json")
		expect(t, r, 0)
		ev := r.last(t, "access")
		if ev["authentication_mode"] != "API_AND_CONFIG_MAP" {
			t.Errorf("access event: %v", ev)
		}
		out := map[string]map[string]any{}
		node := false
		for _, en := range ev["entries"].([]any) {
			m := en.(map[string]any)
			p := m["principal"].(string)
			if strings.HasSuffix(p, ":role/kiln-"+name+"-node") {
				node = m["kind"] == "node" && m["kiln"] == false && m["type"] == "EC2_LINUX"
				continue
			}
			out[p] = m
		}
		if !node {
			t.Errorf("status lacks the node role's entry (kind node, not kiln's): %v", ev)
		}
		return out
	}
	t.Run("status lists the entries", func(t *testing.T) {
		got := status(t)
		for p, w := range map[string][2]any{admin1: {"admin", true}, viewer: {"viewer", true}, awsemu.CreatorARN: {"admin", false}, other: {"other", false}} {
			if got[p] == nil || got[p]["kind"] != w[0] || got[p]["kiln"] != w[1] {
				t.Errorf("status entry %s = %v, want kind %v, kiln %v", p, got[p], w[0], w[1])
			}
		}
		r := e.aws("status", "aws", name, "--region", region)
		expect(t, r, 0)
		for _, s := range []string{"Access    authentication mode API_AND_CONFIG_MAP, 5 access entries", "admin  " + admin1 + " (made by kiln)", "viewer " + viewer + " (made by kiln, groups kiln:support)", "other  " + other + " (not kiln's"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("status text lacks %q:\n%s", s, r.stdout)
			}
		}
	})

	up := func(extra ...string) result {
		t.Helper()
		return e.aws(append([]string{"upgrade", "aws", name, "--region", region, "--headless", "-o", "json"}, extra...)...)
	}
	t.Run("flags left out keep the entries; nothing written", func(t *testing.T) {
		writes := emu.Writes(region)
		expect(t, up("--yes"), 0)
		if w := emu.Writes(region); w != writes {
			t.Errorf("an upgrade without access flags wrote to AWS: %d writes", w-writes)
		}
		if got := status(t); len(got) != 4 {
			t.Errorf("entries after a no-op upgrade: %v", got)
		}
	})

	t.Run("upgrade adds one admin and removes one", func(t *testing.T) {
		writes := emu.Writes(region)
		r := up("--admin", admin2, "--dry-run")
		expect(t, r, 0)
		if got, want := planOrder(t, r), []string{"create AccessEntry " + admin2, "delete AccessEntry " + admin1}; !slices.Equal(got, want) {
			t.Errorf("plan %v, want %v", got, want)
		}
		if w := emu.Writes(region); w != writes {
			t.Errorf("dry run wrote to AWS: %d writes", w-writes)
		}
		expect(t, up("--admin", admin2, "--yes"), 0)
		got := status(t)
		if got[admin1] != nil || got[admin2] == nil || got[admin2]["kind"] != "admin" || got[viewer] == nil || got[other] == nil || got[awsemu.CreatorARN] == nil {
			t.Errorf("after the upgrade: %v", got)
		}
		checkAccessRequests(t, emu, name, []string{viewer}, other)
	})

	t.Run("an entry kiln did not create is refused, not adopted", func(t *testing.T) {
		r := up("--viewer", viewer, "--viewer", other, "--yes")
		expect(t, r, 2)
		if !strings.Contains(r.stdout+r.stderr, other) {
			t.Errorf("refusal does not name %s:\n%s", other, r)
		}
	})

	t.Run("killed between entry and policy, converges", func(t *testing.T) {
		r := e.kilnWith([]string{testhooks.CrashEnv + "=aws-access-entry-created"}, "upgrade", "aws", name, "--region", region,
			"--admin", admin2, "--admin", admin3, "--yes", "--headless", "--regions", strings.Join(awsRegions, ","))
		if !r.killed {
			t.Fatalf("not killed after creating the access entry:\n%s", r)
		}
		expect(t, up("--admin", admin2, "--admin", admin3, "--yes"), 0)
		if v := emu.AccessEntries(region, name)[admin3]; !slices.Equal(v, []string{adminPolicy}) {
			t.Errorf("%s after the rerun: %v, want %s", admin3, v, adminPolicy)
		}
		if p := planOrder(t, up("--admin", admin2, "--admin", admin3, "--dry-run")); len(p) != 0 {
			t.Errorf("not converged: plan %v", p)
		}
	})

	t.Run("kiln's viewer that gained the admin policy loses it", func(t *testing.T) {
		if _, err := c.AssociateAccessPolicy(context.Background(), &eks.AssociateAccessPolicyInput{ClusterName: aws.String(name), PrincipalArn: aws.String(viewer),
			PolicyArn: aws.String(adminPolicy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}}); err != nil {
			t.Fatal(err)
		}
		r := up("--viewer", viewer, "--dry-run")
		expect(t, r, 0)
		if got := planOrder(t, r); !slices.Equal(got, []string{"update AccessEntry " + viewer}) {
			t.Errorf("plan %v, want the viewer's policy removed", got)
		}
		expect(t, up("--viewer", viewer, "--yes"), 0)
		if v := emu.AccessEntries(region, name)[viewer]; !slices.Equal(v, []string{awsprovider.SupportGroup}) {
			t.Errorf("viewer after the upgrade: %v, want only group %s", v, awsprovider.SupportGroup)
		}
	})

	t.Run("--viewer none removes kiln's viewers only", func(t *testing.T) {
		expect(t, up("--viewer", "none", "--yes"), 0)
		got := status(t)
		if got[viewer] != nil || got[admin2] == nil || got[admin3] == nil || got[other] == nil || got[awsemu.CreatorARN] == nil {
			t.Errorf("after --viewer none: %v", got)
		}
	})

	t.Run("create --continue converges the same way", func(t *testing.T) {
		expect(t, e.aws("create", "aws", name, "--region", region, "--continue", "--headless", "--admin", admin2, "--viewer", viewer), 0)
		got := status(t)
		if got[admin3] != nil || got[admin2] == nil || got[viewer] == nil || got[viewer]["kind"] != "viewer" || got[other] == nil {
			t.Errorf("after create --continue: %v", got)
		}
	})
}

// TestAWSKilledCreateWithAccessConverges: a create with --admin and
// --viewer killed at each access checkpoint (before the entries, between
// an entry and its policy, after the entries, around the viewers' RBAC)
// and run again ends with exactly the entries asked, each complete.
func TestAWSKilledCreateWithAccessConverges(t *testing.T) {
	e, emu := awsEnv(t)
	const region = "ap-northeast-1"
	const (
		admin  = "arn:aws:iam::123456789012:role/ci"
		viewer = "arn:aws:iam::123456789012:user/helpdesk"
	)
	for i, at := range []string{"before-aws-accessentry", "aws-access-entry-created", "after-aws-accessentry", "before-aws-supportrbac", "after-aws-supportrbac"} {
		t.Run(at, func(t *testing.T) {
			name := "awsacckill" + string(rune('a'+i))
			t.Cleanup(func() {
				p := &awsprovider.Provider{LoadConfig: emu.Config}
				if _, err := p.DestroyInfrastructure(context.Background(), name, region, nil); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			})
			args := []string{"create", "aws", name, "--region", region, "--regions", strings.Join(awsRegions, ","), "--headless", "--admin", admin, "--viewer", viewer}
			if r := e.kilnWith([]string{testhooks.CrashEnv + "=" + at}, args...); !r.killed {
				t.Fatalf("not killed at %s:\n%s", at, r)
			}
			if r := e.kilnWith([]string{testhooks.CrashEnv + "=after-infrastructure"}, args...); !r.killed {
				t.Fatalf("rerun did not reach the end of the infrastructure phase:\n%s", r)
			}
			want := []string{admin + ": " + adminPolicy, awsemu.CreatorARN + ": " + adminPolicy, viewer + ": " + awsprovider.SupportGroup, "NODE ROLE: "}
			sort.Strings(want)
			if got := accessOf(emu, region, name); !slices.Equal(got, want) {
				t.Errorf("entries after the rerun:\n%v\nwant\n%v", got, want)
			}
			checkAccessRequests(t, emu, name, []string{viewer})
			if _, err := clusterB.Client.RbacV1().ClusterRoleBindings().Get(context.Background(), awsprovider.SupportBinding, metav1.GetOptions{}); err != nil {
				t.Errorf("binding after the rerun: %v", err)
			}
		})
	}
}
