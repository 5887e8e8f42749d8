package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"

	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/internal/testenv/testhooks"
)

// TestAWSKubernetesVersion: create aws --kubernetes-version sets the EKS
// control plane's version; a create asking another version of an existing
// cluster is refused (exit 2), never silently ignored.
func TestAWSKubernetesVersion(t *testing.T) {
	e, emu := awsEnv(t)
	const name, region = "awsver", "ap-northeast-1"
	for _, args := range [][]string{
		{"create", "aws", name, "--region", region, "--regions", strings.Join(awsRegions, ","), "--kubernetes-version", "v1.30"},
		{"create", "kube", name, "--context", "kiln-b", "--kubernetes-version", "1.30"},
	} {
		r := e.kiln(append(args, "--headless")...)
		expect(t, r, 2)
		if !strings.Contains(r.stderr, "--kubernetes-version") {
			t.Errorf("%v: message does not name --kubernetes-version:\n%s", args, r.stderr)
		}
	}
	if inv := inventory(t, emu, name, region); !inv.Empty() {
		t.Fatalf("refused creates created resources: %s", inv)
	}
	t.Cleanup(func() {
		if r := e.aws("destroy", "aws", name, "--region", region, "--yes", "--headless"); r.code != 0 {
			t.Errorf("cleanup destroy: %s", r)
		}
	})
	// The infrastructure only (the platform does not matter here).
	r := e.kilnWith([]string{testhooks.CrashEnv + "=after-infrastructure"}, "create", "aws", name, "--region", region,
		"--regions", strings.Join(awsRegions, ","), "--kubernetes-version", "1.30", "--headless")
	if !r.killed {
		t.Fatalf("not killed after the infrastructure:\n%s", r)
	}
	cfg, err := emu.Config(context.Background(), region)
	if err != nil {
		t.Fatal(err)
	}
	out, err := eks.NewFromConfig(cfg).DescribeCluster(context.Background(), &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if v := aws.ToString(out.Cluster.Version); v != "1.30" {
		t.Errorf("EKS cluster runs Kubernetes %s, want 1.30", v)
	}
	r = e.aws("create", "aws", name, "--region", region, "--kubernetes-version", "1.31", "--headless", "-o", "json")
	expect(t, r, 2)
	if res := r.last(t, "result"); !strings.Contains(res["message"].(string), "already runs Kubernetes 1.30") {
		t.Errorf("result = %v", res)
	}
	if inv := inventory(t, emu, name, region); len(inv[awsprovider.KindEKSCluster]) != 1 {
		t.Errorf("inventory after the refusal: %s", inv)
	}
}
