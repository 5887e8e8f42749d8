package main

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"

	"github.com/kilnctl/kiln/internal/testenv/awsemu"
	"github.com/kilnctl/kiln/internal/testenv/testhooks"
)

// eksView is what EKS reports of a kiln cluster: the control plane's
// version and status, and each node group's type, size, version and
// status (read through the real SDK, so through the emulation's overlay).
type eksView struct {
	Version, Status string
	Groups          map[string]string // name → "N × TYPE, VERSION, STATUS"
}

func (v eksView) String() string { return fmt.Sprintf("%s %s %v", v.Version, v.Status, v.Groups) }

func describeEKS(t *testing.T, emu *awsemu.Emulator, name, region string) eksView {
	t.Helper()
	ctx := context.Background()
	cfg, err := emu.Config(ctx, region)
	if err != nil {
		t.Fatal(err)
	}
	c := eks.NewFromConfig(cfg)
	out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	v := eksView{Version: aws.ToString(out.Cluster.Version), Status: string(out.Cluster.Status), Groups: map[string]string{}}
	ngs, err := c.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ngs.Nodegroups {
		g, err := c.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(n)})
		if err != nil {
			t.Fatal(err)
		}
		ng := g.Nodegroup
		v.Groups[n] = fmt.Sprintf("%d × %s, %s, %s", aws.ToInt32(ng.ScalingConfig.DesiredSize), strings.Join(ng.InstanceTypes, ","), aws.ToString(ng.Version), ng.Status)
	}
	return v
}

// planOrder returns the plan events of r, in order, as "action kind name".
func planOrder(t *testing.T, r result) []string {
	t.Helper()
	var out []string
	for _, ev := range r.events(t) {
		if ev["type"] == "plan" {
			out = append(out, fmt.Sprintf("%s %s %s", ev["action"], ev["kind"], ev["name"]))
		}
	}
	return out
}

// TestAWSUpgradeInfrastructure: kiln upgrade aws changes the node group's
// size and instance type and the EKS control plane's version (one minor
// step; a jump or a downgrade is refused with exit 2), planned before the
// platform's changes, applied in EKS's order, each shown as resource
// events; --dry-run and a refusal write nothing to AWS; an upgrade killed
// after it asked EKS for a change converges when run again.
func TestAWSUpgradeInfrastructure(t *testing.T) {
	e, emu := awsEnv(t)
	const name, region = "awsup", "us-east-1"
	t.Cleanup(func() {
		if r := e.aws("destroy", "aws", name, "--region", region, "--yes", "--headless"); r.code != 0 {
			t.Errorf("cleanup destroy: %s", r)
		}
		waitNamespaceGone(t, clusterB.Client, "kiln-system")
	})
	base := writeConfig(t, upgradeBase)
	expect(t, e.aws("create", "aws", name, "--region", region, "--kubernetes-version", "1.30", "--nodes", "2", "-c", base, "--headless"), 0)
	up := func(extra ...string) result {
		t.Helper()
		return e.aws(append([]string{"upgrade", "aws", name, "--headless", "-o", "json"}, extra...)...)
	}
	want := eksView{Version: "1.30", Status: "ACTIVE", Groups: map[string]string{"kiln-nodes": "2 × t3.medium, 1.30, ACTIVE"}}
	if got := describeEKS(t, emu, name, region); !reflect.DeepEqual(got, want) {
		t.Fatalf("after create: %s, want %s", got, want)
	}

	t.Run("no-op says no changes and writes nothing to AWS", func(t *testing.T) {
		writes := emu.Writes(region)
		r := up("--yes", "-c", base)
		expect(t, r, 0)
		if p := planOrder(t, r); len(p) != 0 || !strings.Contains(r.last(t, "result")["message"].(string), "no changes") {
			t.Errorf("no-op upgrade: plan %v, result %v", p, r.last(t, "result"))
		}
		if got := emu.Writes(region); got != writes {
			t.Errorf("a no-op upgrade wrote to AWS: %d writes", got-writes)
		}
	})

	t.Run("dry-run plans infrastructure first and changes nothing", func(t *testing.T) {
		before, writes := describeEKS(t, emu, name, region), emu.Writes(region)
		next := writeConfig(t, strings.Replace(upgradeBase, "  stacks:", "  gateway: {replicas: 2}\n  stacks:", 1))
		r := up("--nodes", "3", "--instance-type", "m6i.large", "--kubernetes-version", "1.31", "-c", next, "--dry-run")
		expect(t, r, 0)
		got := planOrder(t, r)
		wantFirst := []string{"update EKSCluster awsup", "create Nodegroup kiln-nodes-m6i-large", "delete Nodegroup kiln-nodes"}
		if len(got) <= len(wantFirst) || !slices.Equal(got[:len(wantFirst)], wantFirst) {
			t.Errorf("plan = %v, want the infrastructure first (%v), then the platform", got, wantFirst)
		}
		if !slices.Contains(got, "update Deployment kiln-gateway") {
			t.Errorf("plan lacks the platform change: %v", got)
		}
		if after := describeEKS(t, emu, name, region); !reflect.DeepEqual(after, before) {
			t.Errorf("dry run changed EKS: %s → %s", before, after)
		}
		if w := emu.Writes(region); w != writes {
			t.Errorf("dry run wrote to AWS: %d writes", w-writes)
		}
	})

	t.Run("a jump of two minors or a downgrade is refused, nothing written", func(t *testing.T) {
		writes := emu.Writes(region)
		for _, v := range []string{"1.32", "1.29"} {
			r := up("--kubernetes-version", v, "--yes")
			expect(t, r, 2)
			msg := r.last(t, "result")["message"].(string)
			if !strings.Contains(msg, "--kubernetes-version") || !strings.Contains(msg, "1.30") || !strings.Contains(msg, v) {
				t.Errorf("refusal of %s does not name the flag and both versions: %s", v, msg)
			}
			if v == "1.32" && !strings.Contains(msg, "1.31 first") {
				t.Errorf("refusal of a jump does not name the next step: %s", msg)
			}
		}
		if got := describeEKS(t, emu, name, region); !reflect.DeepEqual(got, want) {
			t.Errorf("after refusals: %s, want %s", got, want)
		}
		for _, bad := range [][]string{{"--nodes", "0"}, {"--nodes", "101"}, {"--instance-type", "huge"}, {"--kubernetes-version", "v1.31"}} {
			r := up(append(bad, "--yes")...)
			expect(t, r, 2)
			if !strings.Contains(r.stdout+r.stderr, bad[0]) {
				t.Errorf("%v: message does not name %s:\n%s", bad, bad[0], r)
			}
		}
		expect(t, e.kiln("upgrade", "kube", name, "--nodes", "3", "--headless"), 2)
		if w := emu.Writes(region); w != writes {
			t.Errorf("refusals wrote to AWS: %d writes", w-writes)
		}
	})

	t.Run("nodes 2 → 3", func(t *testing.T) {
		r := up("--nodes", "3", "--yes")
		expect(t, r, 0)
		var phases, current []string
		for _, ev := range r.events(t) {
			if ev["type"] == "phase" && ev["state"] == "started" {
				phases = append(phases, ev["phase"].(string))
			}
			if ev["type"] == "resource" && ev["kind"] == "Nodegroup" && ev["status"] == "Current" {
				current = append(current, ev["message"].(string))
			}
		}
		if i, j := slices.Index(phases, "infrastructure"), slices.Index(phases, "platform"); i < 0 || j < i {
			t.Errorf("phases %v: want infrastructure before platform", phases)
		}
		if !slices.Contains(current, "ACTIVE, 3 × t3.medium") {
			t.Errorf("no resource event for the resized node group: %v", current)
		}
		want.Groups["kiln-nodes"] = "3 × t3.medium, 1.30, ACTIVE"
		if got := describeEKS(t, emu, name, region); !reflect.DeepEqual(got, want) {
			t.Errorf("after scaling: %s, want %s", got, want)
		}
	})

	t.Run("version 1.30 → 1.31, killed after the request, converges", func(t *testing.T) {
		r := e.kilnWith([]string{testhooks.CrashEnv + "=aws-upgrade-cluster-requested"}, "upgrade", "aws", name, "--kubernetes-version", "1.31", "--yes", "--headless",
			"--regions", strings.Join(awsRegions, ","))
		if !r.killed {
			t.Fatalf("not killed after asking EKS for the version update:\n%s", r)
		}
		r = up("--kubernetes-version", "1.31", "--yes")
		expect(t, r, 0)
		want = eksView{Version: "1.31", Status: "ACTIVE", Groups: map[string]string{"kiln-nodes": "3 × t3.medium, 1.31, ACTIVE"}}
		if got := describeEKS(t, emu, name, region); !reflect.DeepEqual(got, want) {
			t.Errorf("after the version upgrade: %s, want %s", got, want)
		}
		expect(t, up("--kubernetes-version", "1.31", "--yes"), 0)
		if p := planOrder(t, up("--kubernetes-version", "1.31", "--dry-run")); len(p) != 0 {
			t.Errorf("the upgrade did not converge: plan %v", p)
		}
		// The managed add-ons follow the control plane: each at the
		// version EKS gives as default for 1.31 (DescribeAddonVersions).
		for _, a := range []string{"vpc-cni", "kube-proxy", "coredns"} {
			if v, _, status := emu.AddonStatus(region, name, a); status != "ACTIVE" || v == "" {
				t.Errorf("add-on %s after the upgrade to 1.31: %q %s", a, v, status)
			}
		}
		if v, _, _ := emu.AddonStatus(region, name, "kube-proxy"); v != "v1.31.0-eksbuild.2" {
			t.Errorf("kube-proxy after the upgrade to 1.31: %q, want the default for 1.31 (v1.31.0-eksbuild.2)", v)
		}
	})

	// EKS reports a node group whose instances cannot be launched as
	// CREATE_FAILED with a health issue (API reference: Nodegroup.status,
	// NodegroupHealth.issues — https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html).
	// A replacement that ends so must never be taken as done: the working
	// group keeps running, and the rerun deletes the failed group and
	// creates it again.
	t.Run("a replacement that ends CREATE_FAILED deletes nothing; the rerun recreates it", func(t *testing.T) {
		emu.RefuseCapacity("c5.large", true)
		r := up("--instance-type", "c5.large", "--yes")
		expect(t, r, 1)
		msg := r.last(t, "result")["message"].(string)
		for _, part := range []string{"kiln-nodes-c5-large", "CREATE_FAILED", "AsgInstanceLaunchFailures", "kiln-nodes keeps running", "nothing was deleted"} {
			if !strings.Contains(msg, part) {
				t.Errorf("the failed upgrade's message lacks %q: %s", part, msg)
			}
		}
		got := describeEKS(t, emu, name, region)
		if got.Groups["kiln-nodes"] != want.Groups["kiln-nodes"] {
			t.Fatalf("the working node group was touched: %s, want kiln-nodes %s", got, want.Groups["kiln-nodes"])
		}
		// The plan of the rerun deletes the failed group and creates it
		// again; the working group goes only once that one is ACTIVE.
		p := planOrder(t, up("--instance-type", "c5.large", "--dry-run"))
		if !slices.Contains(p, "delete Nodegroup kiln-nodes-c5-large") || !slices.Contains(p, "create Nodegroup kiln-nodes-c5-large") {
			t.Errorf("plan after a failed replacement: %v", p)
		}
		emu.RefuseCapacity("c5.large", false)
		expect(t, up("--instance-type", "c5.large", "--yes"), 0)
		got = describeEKS(t, emu, name, region)
		if len(got.Groups) != 1 || !strings.Contains(got.Groups["kiln-nodes-c5-large"], "c5.large") || !strings.HasSuffix(got.Groups["kiln-nodes-c5-large"], "ACTIVE") {
			t.Fatalf("after the rerun with capacity back: %s", got)
		}
		// Back to the type the rest of the test expects.
		expect(t, up("--instance-type", "t3.medium", "--yes"), 0)
		want = eksView{Version: "1.31", Status: "ACTIVE", Groups: map[string]string{"kiln-nodes-t3-medium": "3 × t3.medium, 1.31, ACTIVE"}}
		if got := describeEKS(t, emu, name, region); !reflect.DeepEqual(got, want) {
			t.Errorf("back on t3.medium: %s, want %s", got, want)
		}
	})

	t.Run("instance type change, killed after the replacement was asked for, converges", func(t *testing.T) {
		r := e.kilnWith([]string{testhooks.CrashEnv + "=aws-upgrade-nodegroup-requested"}, "upgrade", "aws", name, "--instance-type", "m6i.large", "--yes", "--headless",
			"--regions", strings.Join(awsRegions, ","))
		if !r.killed {
			t.Fatalf("not killed after asking for the replacement node group:\n%s", r)
		}
		r = up("--instance-type", "m6i.large", "--yes")
		expect(t, r, 0)
		want = eksView{Version: "1.31", Status: "ACTIVE", Groups: map[string]string{"kiln-nodes-m6i-large": "3 × m6i.large, 1.31, ACTIVE"}}
		if got := describeEKS(t, emu, name, region); !reflect.DeepEqual(got, want) {
			t.Errorf("after the instance type change: %s, want %s", got, want)
		}
		// Nothing asked now: the replacement is the node group kiln keeps.
		if p := planOrder(t, up("--dry-run")); len(p) != 0 {
			t.Errorf("plan after the replacement: %v", p)
		}
		// create --continue finds the replacement: no second node group.
		expect(t, e.aws("create", "aws", name, "--region", region, "--continue", "-c", base, "--headless"), 0)
		if got := describeEKS(t, emu, name, region); !reflect.DeepEqual(got, want) {
			t.Errorf("after create --continue: %s, want %s", got, want)
		}
	})

	t.Run("text plan", func(t *testing.T) {
		r := e.aws("upgrade", "aws", name, "--nodes", "4", "--dry-run", "--headless")
		expect(t, r, 0)
		if !strings.Contains(r.stderr, "~ update nodegroup kiln-nodes-m6i-large: scalingConfig.desiredSize") || !strings.Contains(r.stderr, "3 → 4 nodes") {
			t.Errorf("text plan:\n%s", r.stderr)
		}
	})

	// Killed at every checkpoint of the infrastructure steps, with a
	// version step, an instance type and a size change at once, the same
	// command run again converges.
	minor, nodes, typ := 31, 3, "m6i.large"
	for _, point := range []string{
		"after-aws-claim", "after-aws-upgrade-cluster", "after-aws-upgrade-nodegroup-version", "aws-upgrade-nodegroup-requested",
		"after-aws-upgrade-nodegroup-create", "after-aws-upgrade-nodegroup-size", "after-aws-upgrade-nodegroup-delete", "upgrade-after-infrastructure",
	} {
		minor++
		nodes = 5 - nodes // 3, 2, 3, …
		typ = map[string]string{"m6i.large": "t3.large", "t3.large": "m6i.large"}[typ]
		version := fmt.Sprintf("1.%d", minor)
		t.Run("killed at "+point, func(t *testing.T) {
			args := []string{"upgrade", "aws", name, "--kubernetes-version", version, "--nodes", fmt.Sprint(nodes), "--instance-type", typ, "--yes", "--headless"}
			r := e.kilnWith([]string{testhooks.CrashEnv + "=" + point}, append(args, "--regions", strings.Join(awsRegions, ","))...)
			if !r.killed {
				t.Fatalf("not killed at %s:\n%s", point, r)
			}
			expect(t, e.aws(args...), 0)
			ng := "kiln-nodes-" + strings.ReplaceAll(typ, ".", "-")
			want := eksView{Version: version, Status: "ACTIVE", Groups: map[string]string{ng: fmt.Sprintf("%d × %s, %s, ACTIVE", nodes, typ, version)}}
			if got := describeEKS(t, emu, name, region); !reflect.DeepEqual(got, want) {
				t.Errorf("after the rerun: %s, want %s", got, want)
			}
			if p := planOrder(t, up("--kubernetes-version", version, "--nodes", fmt.Sprint(nodes), "--instance-type", typ, "--dry-run")); len(p) != 0 {
				t.Errorf("not converged: plan %v", p)
			}
		})
	}
}
