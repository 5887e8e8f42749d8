package aws

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
)

func group(name, typ, version string, size int32, created int) *ngState {
	return &ngState{
		NodegroupName: aws.String(name), InstanceTypes: []string{typ}, Version: aws.String(version),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(size), MinSize: aws.Int32(size), MaxSize: aws.Int32(size)},
		CreatedAt:     aws.Time(time.Unix(int64(created), 0)),
	}
}

// TestPlanUpgrade: the infrastructure plan is a pure function of the
// request and what EKS reports, in EKS's order (control plane, node group
// version, replacement, size, deletions), and refuses what EKS refuses.
func TestPlanUpgrade(t *testing.T) {
	cluster := &ekstypes.Cluster{Version: aws.String("1.30")}
	orig := group("kiln-nodes", "t3.medium", "1.30", 2, 1)
	cases := []struct {
		name    string
		req     Change
		groups  []*ngState
		changes []string // action kind name fields
		kind    failure.Kind
	}{
		{"nothing asked", Change{}, []*ngState{orig}, nil, 0},
		{"same as runs", Change{Nodes: 2, InstanceType: "t3.medium", KubernetesVersion: "1.30"}, []*ngState{orig}, nil, 0},
		{"nodes 2 → 3", Change{Nodes: 3}, []*ngState{orig}, []string{"update Nodegroup kiln-nodes scalingConfig.desiredSize,scalingConfig.maxSize,scalingConfig.minSize"}, 0},
		{"one minor up", Change{KubernetesVersion: "1.31"}, []*ngState{orig}, []string{"update EKSCluster c1 version", "update Nodegroup kiln-nodes version"}, 0},
		{"two minors up", Change{KubernetesVersion: "1.32"}, []*ngState{orig}, nil, failure.Input},
		{"down", Change{KubernetesVersion: "1.29"}, []*ngState{orig}, nil, failure.Input},
		{"instance type", Change{InstanceType: "m6i.large"}, []*ngState{orig}, []string{"create Nodegroup kiln-nodes-m6i-large instanceTypes,scalingConfig,version", "delete Nodegroup kiln-nodes "}, 0},
		{"version, type and size at once", Change{InstanceType: "m6i.large", Nodes: 3, KubernetesVersion: "1.31"}, []*ngState{orig},
			[]string{"update EKSCluster c1 version", "create Nodegroup kiln-nodes-m6i-large instanceTypes,scalingConfig,version", "delete Nodegroup kiln-nodes "}, 0},
		{"replacement interrupted, type asked", Change{InstanceType: "m6i.large"}, []*ngState{orig, group("kiln-nodes-m6i-large", "m6i.large", "1.30", 2, 2)},
			[]string{"delete Nodegroup kiln-nodes "}, 0},
		{"replacement interrupted, nothing asked: the newest stays", Change{}, []*ngState{orig, group("kiln-nodes-m6i-large", "m6i.large", "1.30", 2, 2)},
			[]string{"delete Nodegroup kiln-nodes "}, 0},
		{"node group left behind by an interrupted version upgrade", Change{}, []*ngState{group("kiln-nodes", "t3.medium", "1.29", 2, 1)},
			[]string{"update Nodegroup kiln-nodes version"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := (&Provider{Change: tc.req}).planUpgrade("c1", &infraState{cluster: cluster, groups: tc.groups})
			if tc.kind != 0 {
				if failure.Of(err) != tc.kind || !strings.Contains(err.Error(), "--kubernetes-version") || !strings.Contains(err.Error(), "1.30") {
					t.Fatalf("err = %v (kind %v), want kind %v naming --kubernetes-version and 1.30", err, failure.Of(err), tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range pl.changes {
				got = append(got, c.Action+" "+c.Kind+" "+c.Name+" "+strings.Join(c.Fields, ","))
			}
			if strings.Join(got, "|") != strings.Join(tc.changes, "|") {
				t.Errorf("changes:\n got %q\nwant %q", got, tc.changes)
			}
		})
	}
	// The refusal of a jump names the next allowed step.
	_, err := (&Provider{Change: Change{KubernetesVersion: "1.32"}}).planUpgrade("c1", &infraState{cluster: cluster, groups: []*ngState{orig}})
	if err == nil || !strings.Contains(err.Error(), "1.31 first") {
		t.Errorf("jump refusal does not name the next step: %v", err)
	}
	// The CLI is given the command to run; a frontend with its own words
	// for the input (the wizard's field) is not told to type a flag.
	if !strings.Contains(err.Error(), "(`kiln upgrade aws c1 --kubernetes-version 1.31") {
		t.Errorf("jump refusal gives the CLI no command: %v", err)
	}
	form := input.Render(err, func(in input.Input) string { return "the " + string(in) + " field" })
	if strings.Contains(form, "--") || !strings.Contains(form, "the kubernetes-version field 1.32: ") || !strings.Contains(form, "Upgrade to 1.31 first, then on from there") {
		t.Errorf("jump refusal in a frontend's words: %q", form)
	}
}

func TestChangeValidate(t *testing.T) {
	for _, tc := range []struct {
		c     Change
		field string
	}{
		{Change{}, ""},
		{Change{Nodes: 3, InstanceType: "m6i.large", KubernetesVersion: "1.31"}, ""},
		{Change{Nodes: 101}, "--nodes"},
		{Change{Nodes: -1}, "--nodes"},
		{Change{InstanceType: "big"}, "--instance-type"},
		{Change{KubernetesVersion: "v1.31"}, "--kubernetes-version"},
	} {
		err := (&Provider{Change: tc.c}).ValidateFlags()
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.c, err)
		case tc.field != "" && (failure.Of(err) != failure.Input || !strings.Contains(err.Error(), tc.field)):
			t.Errorf("%+v: err = %v, want exit 2 naming %s", tc.c, err, tc.field)
		}
	}
}
