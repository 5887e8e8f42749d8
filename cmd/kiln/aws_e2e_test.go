package main

// End-to-end tests of `kiln … aws …` against the multi-region kumo emulator
// (internal/testenv/awsemu) with the platform phase on the kiln-b control plane
// through the endpoint mapping (KILN_AWS_KUBE_CONTEXT /
// --kube-context-override). The tests run one after another (no
// t.Parallel): kiln-b hosts one aws cluster's platform at a time.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/internal/testenv/awsemu"
	"github.com/kilnctl/kiln/internal/testenv/testhooks"
)

var awsRegions = []string{"us-east-1", "eu-west-1", "ap-northeast-1"}

var (
	awsOnce sync.Once
	awsEmu  *awsemu.Emulator
	awsErr  error
)

// emulator starts kumo once for the test binary; its children exit with it
// (their stdin pipe closes), so TestMain needs no change.
func emulator(t *testing.T) *awsemu.Emulator {
	t.Helper()
	awsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		awsEmu, awsErr = awsemu.Start(ctx, awsemu.Options{Regions: awsRegions})
	})
	if awsErr != nil {
		t.Fatalf("start AWS emulator: %v", awsErr)
	}
	return awsEmu
}

// awsEnv is a user's machine pointed at the emulator: only the emulator's
// credentials, no profile files, no instance metadata.
func awsEnv(t *testing.T) (*env, *awsemu.Emulator) {
	t.Helper()
	skipShort(t)
	emu := emulator(t)
	e := newEnv(t)
	d := t.TempDir()
	e.vars = append(e.vars,
		"AWS_ENDPOINT_URL="+emu.Endpoint(),
		"AWS_ACCESS_KEY_ID="+awsemu.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY="+awsemu.SecretAccessKey,
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_REGION=",
		"AWS_DEFAULT_REGION=",
		"AWS_CONFIG_FILE="+filepath.Join(d, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(d, "aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"KUBECONFIG="+filepath.Join(d, "user-kubeconfig"),
		awsprovider.KubeContextEnv+"=kiln-b",
	)
	return e, emu
}

// aws runs kiln with the emulator's regions to search.
func (e *env) aws(args ...string) result {
	e.t.Helper()
	return e.kiln(append(args, "--regions", strings.Join(awsRegions, ","))...)
}

// inventory counts what is tagged for name in region, through the real SDK.
func inventory(t *testing.T, emu *awsemu.Emulator, name, region string) awsprovider.Inventory {
	t.Helper()
	p := &awsprovider.Provider{LoadConfig: emu.Config}
	inv, err := p.Inventory(context.Background(), name, region)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

var completeInventory = map[string]int{
	awsprovider.KindVPC: 1, awsprovider.KindSubnet: 2, awsprovider.KindInternetGateway: 1,
	awsprovider.KindRouteTable: 1, awsprovider.KindSecurityGroup: 1, awsprovider.KindIAMRole: 2,
	awsprovider.KindEKSCluster: 1, awsprovider.KindLaunchTemplate: 1, awsprovider.KindNodegroup: 1,
}

func expectComplete(t *testing.T, inv awsprovider.Inventory) {
	t.Helper()
	for k, n := range completeInventory {
		if len(inv[k]) != n {
			t.Errorf("%s: %d tagged, want exactly %d (inventory: %s)", k, len(inv[k]), n, inv)
		}
	}
}

// expectDestroyed: nothing tagged is left except the route table kumo
// cannot delete (no DeleteRouteTable), which destroy reports.
func expectDestroyed(t *testing.T, inv awsprovider.Inventory) {
	t.Helper()
	if !inv.Empty(awsprovider.KindRouteTable) {
		t.Errorf("destroy left tagged resources: %s", inv)
	}
}

func TestAWSCreateWaitStatusDestroy(t *testing.T) {
	e, emu := awsEnv(t)
	const name, region = "awscycle", "eu-west-1"
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	keep := clientcmdapi.NewConfig()
	keep.Clusters["mine"] = &clientcmdapi.Cluster{Server: "https://mine.example"}
	keep.AuthInfos["mine"] = &clientcmdapi.AuthInfo{Token: "keep-me"}
	keep.Contexts["mine"] = &clientcmdapi.Context{Cluster: "mine", AuthInfo: "mine"}
	keep.CurrentContext = "mine"
	if err := clientcmd.WriteToFile(*keep, kc); err != nil {
		t.Fatal(err)
	}
	e.vars = append(e.vars, "KUBECONFIG="+kc)
	t.Cleanup(func() {
		r := e.aws("destroy", "aws", name, "--region", region, "--yes", "--headless")
		if r.code != 0 && r.code != 2 {
			t.Errorf("cleanup destroy: %s", r)
		}
		waitNamespaceGone(t, clusterB.Client, "kiln-system")
	})

	r := e.aws("create", "aws", name, "--region", region, "--headless", "-o", "json",
		"--kube-context-override", "kiln-b", "--write-kubeconfig", "--nodes", "3", "--instance-type", "m6i.large")
	expect(t, r, 0)
	seen := map[string]bool{}
	for _, ev := range r.events(t) {
		if ev["type"] == "resource" && ev["status"] == "Current" {
			seen[fmt.Sprint(ev["kind"])] = true
		}
		if ev["type"] == "discovery" {
			for _, c := range ev["clusters"].([]any) {
				m := c.(map[string]any)
				if m["name"] == name {
					t.Errorf("discovery before create found %s in %v", name, m["location"])
				}
			}
		}
	}
	for k := range completeInventory {
		if !seen[k] {
			t.Errorf("no Current resource event for %s", k)
		}
	}
	expectComplete(t, inventory(t, emu, name, region))
	for _, other := range []string{"us-east-1", "ap-northeast-1"} {
		if inv := inventory(t, emu, name, other); !inv.Empty(awsprovider.KindIAMRole) {
			t.Errorf("%s: resources of %s created outside its region: %s", other, name, inv)
		}
	}

	// The kubeconfig got an exec-credential entry and kept the user's own.
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "mine" || cfg.AuthInfos["mine"] == nil || cfg.AuthInfos["mine"].Token != "keep-me" {
		t.Errorf("--write-kubeconfig changed the existing entry: %+v", cfg)
	}
	u := cfg.AuthInfos[awsprovider.ContextName(name)]
	if u == nil || u.Exec == nil || u.Token != "" || len(u.ClientKeyData) > 0 {
		t.Fatalf("kubeconfig user for %s is not an exec credential: %+v", name, u)
	}
	if got := strings.Join(u.Exec.Args, " "); got != "aws token --cluster "+name+" --region "+region {
		t.Errorf("exec args: %q", got)
	}

	// Again without --continue: the platform is installed, nothing changes.
	expect(t, e.aws("create", "aws", name, "--region", region, "--headless"), 3)
	expectComplete(t, inventory(t, emu, name, region))

	// The front door on aws is a LoadBalancer Service. The emulated EKS has
	// no load-balancer controller: wait says what it waits for and ends
	// with exit 5 naming it, until an address is published on the
	// Service's status, as AWS's controller does.
	svc, err := clusterB.Client.CoreV1().Services("kiln-system").Get(context.Background(), "kiln-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("gateway Service type %s on aws, want LoadBalancer", svc.Spec.Type)
	}
	r = e.aws("wait", "aws", name, "--headless", "--timeout", "3s")
	expect(t, r, 5)
	if !strings.Contains(r.stderr, "waiting for a load-balancer address on Service kiln-system/kiln-gateway") || !strings.Contains(r.stderr, "no load-balancer controller has published one") {
		t.Errorf("wait without a load-balancer address does not say what is missing:\n%s", r.stderr)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "k8s-kiln-a1b2.elb." + region + ".amazonaws.com"}}
	if _, err := clusterB.Client.CoreV1().Services("kiln-system").UpdateStatus(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = e.aws("wait", "aws", name, "--headless", "--timeout", "2m")
	expect(t, r, 0)
	if want := "DNS record to create: *." + name + ".kiln.test CNAME k8s-kiln-a1b2.elb." + region + ".amazonaws.com"; !strings.Contains(r.stderr, want) {
		t.Errorf("wait does not name the DNS record %q:\n%s", want, r.stderr)
	}
	expect(t, e.aws("status", "aws", name, "--region", region, "--headless"), 0)

	// kiln list aws finds it by its tag, without a NAME, in its region only.
	r = e.aws("list", "aws", "-o", "json")
	expect(t, r, 0)
	var listed []map[string]any
	for _, ev := range r.events(t) {
		if ev["type"] == "cluster" && ev["name"] == name {
			listed = append(listed, ev)
		}
	}
	if len(listed) != 1 || listed[0]["location"] != region || listed[0]["platform"] != "installed" || listed[0]["projects"] != float64(0) || listed[0]["provider"] != "aws" {
		t.Errorf("kiln list aws: want %s once in %s, installed with 0 projects; got %v\n%s", name, region, listed, r)
	}

	// The wrong region is bad input that names the right one.
	for _, cmd := range [][]string{
		{"status", "aws", name, "--region", "us-east-1"},
		{"create", "aws", name, "--region", "us-east-1"},
	} {
		r := e.aws(append(cmd, "--headless")...)
		expect(t, r, 2)
		if !strings.Contains(r.stderr, "eu-west-1") {
			t.Errorf("%v: the message does not name eu-west-1:\n%s", cmd, r)
		}
	}
	if inv := inventory(t, emu, name, "us-east-1"); !inv.Empty(awsprovider.KindIAMRole) {
		t.Errorf("create with the wrong --region created resources in us-east-1: %s", inv)
	}

	r = e.aws("destroy", "aws", name, "--headless", "--yes", "-o", "json")
	expect(t, r, 0)
	gone := map[string]bool{}
	for _, ev := range r.events(t) {
		if ev["type"] == "resource" && ev["status"] == "NotFound" {
			gone[fmt.Sprint(ev["kind"])] = true
		}
	}
	for _, k := range []string{"VPC", "Subnet", "InternetGateway", "SecurityGroup", "IAMRole", "EKSCluster", "Nodegroup"} {
		if !gone[k] {
			t.Errorf("destroy did not confirm %s gone", k)
		}
	}
	expectDestroyed(t, inventory(t, emu, name, region))
	waitNamespaceGone(t, clusterB.Client, "kiln-system")
	// Destroy removed the kubeconfig entries it wrote, and only those.
	cfg, err = clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	ctxName := awsprovider.ContextName(name)
	if cfg.Contexts[ctxName] != nil || cfg.Clusters[ctxName] != nil || cfg.AuthInfos[ctxName] != nil {
		t.Errorf("destroy left %s in the kubeconfig", ctxName)
	}
	if cfg.CurrentContext != "mine" || cfg.AuthInfos["mine"] == nil {
		t.Errorf("destroy changed the user's own entries: %+v", cfg)
	}
	if _, err := os.Stat(kc + ".lock"); err == nil {
		t.Errorf("%s.lock left behind", kc)
	}
	// Destroyed means not found any more.
	expect(t, e.aws("status", "aws", name, "--headless"), 2)
}

// awsCrashPoints are the crash hook's names of the infrastructure steps.
var awsCrashPoints = func() []string {
	var out []string
	for _, k := range []string{"vpc", "subnet", "internetgateway", "routetable", "securitygroup", "iamrole", "ekscluster", "launchtemplate", "nodegroup"} {
		out = append(out, "before-aws-"+k, "after-aws-"+k)
	}
	// Killed between CreateLaunchTemplate and anything else: the rerun
	// finds the template by tag and creates no second one.
	return append(out, "aws-launchtemplate-created")
}()

func TestAWSKilledCreateConverges(t *testing.T) {
	e, emu := awsEnv(t)
	const region = "ap-northeast-1"
	for i, at := range awsCrashPoints {
		t.Run(at, func(t *testing.T) {
			name := fmt.Sprintf("awskill%d", i)
			t.Cleanup(func() {
				p := &awsprovider.Provider{LoadConfig: emu.Config}
				if _, err := p.DestroyInfrastructure(context.Background(), name, region, nil); err != nil {
					t.Errorf("cleanup: %v", err)
				}
				// The platform runs on kiln-b: a run killed after it began
				// leaves this NAME's kiln-system there, which would make
				// kiln-b "host another NAME" for every later test.
				ns, err := clusterB.Client.CoreV1().Namespaces().Get(context.Background(), "kiln-system", metav1.GetOptions{})
				if err == nil && ns.Labels["kiln.dev/cluster"] == name {
					if err := clusterB.Client.CoreV1().Namespaces().Delete(context.Background(), "kiln-system", metav1.DeleteOptions{}); err != nil {
						t.Errorf("cleanup: delete kiln-system on kiln-b: %v", err)
					}
					waitNamespaceGone(t, clusterB.Client, "kiln-system")
				}
			})
			r := e.kilnWith([]string{testhooks.CrashEnv + "=" + at}, "create", "aws", name, "--region", region,
				"--regions", strings.Join(awsRegions, ","), "--headless")
			if !r.killed {
				t.Fatalf("not killed at %s:\n%s", at, r)
			}
			// Run again up to the end of the infrastructure phase (the
			// platform on kiln-b is covered by the cycle test).
			r = e.kilnWith([]string{testhooks.CrashEnv + "=after-infrastructure"}, "create", "aws", name, "--region", region,
				"--regions", strings.Join(awsRegions, ","), "--headless")
			if !r.killed {
				t.Fatalf("rerun did not reach the end of the infrastructure phase:\n%s", r)
			}
			expectComplete(t, inventory(t, emu, name, region))
		})
	}
}

// TestAWSDestroyWithoutPlatform: a create stopped before the platform
// phase leaves only infrastructure; destroy finds it by tag and removes it,
// with or without the EKS cluster.
func TestAWSDestroyWithoutPlatform(t *testing.T) {
	e, emu := awsEnv(t)
	const region = "us-east-1"
	for i, at := range []string{"after-aws-securitygroup", "after-infrastructure"} {
		t.Run(at, func(t *testing.T) {
			name := fmt.Sprintf("awspart%d", i)
			r := e.kilnWith([]string{testhooks.CrashEnv + "=" + at}, "create", "aws", name, "--region", region,
				"--regions", strings.Join(awsRegions, ","), "--headless")
			if !r.killed {
				t.Fatalf("not killed at %s:\n%s", at, r)
			}
			if inv := inventory(t, emu, name, region); len(inv[awsprovider.KindVPC]) != 1 {
				t.Fatalf("no VPC after the stopped create: %s", inv)
			}
			// Without --yes nothing is removed.
			expect(t, e.aws("destroy", "aws", name, "--headless"), 3)
			if inv := inventory(t, emu, name, region); len(inv[awsprovider.KindVPC]) != 1 {
				t.Fatalf("destroy without --yes removed something: %s", inv)
			}
			expect(t, e.aws("destroy", "aws", name, "--headless", "--yes"), 0)
			expectDestroyed(t, inventory(t, emu, name, region))
			// Nothing left to find.
			expect(t, e.aws("destroy", "aws", name, "--headless", "--yes"), 2)
		})
	}
}

func TestAWSDiscoveryAndBadInput(t *testing.T) {
	e, emu := awsEnv(t)
	const name = "awsbad"
	t.Cleanup(func() {
		p := &awsprovider.Provider{LoadConfig: emu.Config}
		if _, err := p.DestroyInfrastructure(context.Background(), name, "us-east-1", nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	// Infrastructure only (stopped after the infrastructure phase): the
	// cluster is found in us-east-1 and nowhere else.
	r := e.kilnWith([]string{testhooks.CrashEnv + "=after-infrastructure"}, "create", "aws", name, "--region", "us-east-1",
		"--regions", strings.Join(awsRegions, ","), "--headless")
	if !r.killed {
		t.Fatalf("create did not reach the end of the infrastructure phase:\n%s", r)
	}
	r = e.aws("status", "aws", name, "--headless", "-o", "json")
	locs := map[string]string{}
	for _, ev := range r.events(t) {
		if ev["type"] != "discovery" {
			continue
		}
		for _, c := range ev["clusters"].([]any) {
			m := c.(map[string]any)
			locs[fmt.Sprint(m["location"])] = fmt.Sprint(m["name"])
		}
	}
	for _, reg := range awsRegions {
		want := ""
		if reg == "us-east-1" {
			want = name
		}
		if locs[reg] != want {
			t.Errorf("discovery: %s holds %q, want %q (all: %v)", reg, locs[reg], want, locs)
		}
	}

	for _, tc := range []struct {
		args  []string
		extra []string
		field string
	}{
		{[]string{"--region", "mars"}, nil, "--region"},
		{[]string{"--region", "xx-nowhere-1"}, nil, "--region"},
		{[]string{"--region", "eu-west-1", "--instance-type", "huge"}, nil, "--instance-type"},
		{[]string{"--region", "eu-west-1", "--nodes", "0"}, nil, "--nodes"},
		{[]string{"--region", "eu-west-1", "--nodes", "1000"}, nil, "--nodes"},
		{[]string{"--region", "eu-west-1"}, []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="}, "credentials"},
	} {
		args := append([]string{"create", "aws", "awsinput"}, tc.args...)
		if tc.field != "--region" {
			args = append(args, "--regions", strings.Join(awsRegions, ","))
		}
		r := e.kilnWith(tc.extra, append(args, "--headless")...)
		expect(t, r, 2)
		if !strings.Contains(r.stderr, tc.field) {
			t.Errorf("%v: message does not name %s:\n%s", tc.args, tc.field, r)
		}
	}
	for _, reg := range awsRegions {
		if inv := inventory(t, emu, "awsinput", reg); !inv.Empty() {
			t.Errorf("bad input created resources in %s: %s", reg, inv)
		}
	}
	// aws flags on the kube provider are bad input too.
	expect(t, e.kiln("create", "kube", "x", "--nodes", "3", "--headless"), 2)
}

func TestAWSTokenCommand(t *testing.T) {
	e, _ := awsEnv(t)
	// Run directly, not through e.kiln: this stdout is the one place a token
	// may appear, so it must not join the outputs the secret scan checks.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := e.command(ctx, nil, "aws", "token", "--cluster", "tokcluster", "--region", "eu-west-1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kiln aws token: %v\n%s", err, stderr.String())
	}
	var cred struct {
		Kind, APIVersion string
		Status           struct {
			Token               string
			ExpirationTimestamp time.Time
		}
	}
	if err := json.Unmarshal(out, &cred); err != nil {
		t.Fatalf("not JSON: %v: %s", err, out)
	}
	if cred.Kind != "ExecCredential" || cred.APIVersion != "client.authentication.k8s.io/v1beta1" {
		t.Errorf("not an ExecCredential: %s", out)
	}
	if d := time.Until(cred.Status.ExpirationTimestamp); d < 10*time.Minute || d > 15*time.Minute {
		t.Errorf("expires in %s", d)
	}
	tok := cred.Status.Token
	outputsMu.Lock()
	secrets[tok] = true // from now on, no other output may contain it
	outputsMu.Unlock()
	if !strings.HasPrefix(tok, "k8s-aws-v1.") {
		t.Fatalf("token prefix: %.20s…", tok)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "k8s-aws-v1."))
	if err != nil {
		t.Fatalf("not unpadded base64url: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("Action") != "GetCallerIdentity" {
		t.Errorf("action %q", q.Get("Action"))
	}
	if q.Get("X-Amz-Expires") != "60" {
		t.Errorf("X-Amz-Expires %q, want 60 (EKS refuses a token without it)", q.Get("X-Amz-Expires"))
	}
	if !strings.HasSuffix(q.Get("X-Amz-Credential"), "/eu-west-1/sts/aws4_request") {
		t.Errorf("credential scope %q is not eu-west-1 sts", q.Get("X-Amz-Credential"))
	}
	if !strings.Contains(";"+q.Get("X-Amz-SignedHeaders")+";", ";x-k8s-aws-id;") {
		t.Errorf("x-k8s-aws-id is not signed: %q", q.Get("X-Amz-SignedHeaders"))
	}
	if q.Get("X-Amz-Signature") == "" {
		t.Error("no signature")
	}

	// --profile: region and credentials from the shared files.
	d := t.TempDir()
	conf, credsFile := filepath.Join(d, "config"), filepath.Join(d, "credentials")
	writeFile(t, conf, "[profile emu]\nregion = ap-northeast-1\n")
	writeFile(t, credsFile, "[emu]\naws_access_key_id = "+awsemu.AccessKeyID+"\naws_secret_access_key = "+awsemu.SecretAccessKey+"\n")
	profEnv := []string{"AWS_CONFIG_FILE=" + conf, "AWS_SHARED_CREDENTIALS_FILE=" + credsFile, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="}
	cmd = e.command(ctx, profEnv, "aws", "token", "--cluster", "tokcluster", "--profile", "emu")
	stderr.Reset()
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("kiln aws token --profile emu: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(out, &cred); err != nil {
		t.Fatal(err)
	}
	outputsMu.Lock()
	secrets[cred.Status.Token] = true
	outputsMu.Unlock()
	raw, err = base64.RawURLEncoding.DecodeString(strings.TrimPrefix(cred.Status.Token, "k8s-aws-v1."))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "%2Fap-northeast-1%2Fsts%2Faws4_request") {
		t.Errorf("--profile emu: the token is not for the profile's region ap-northeast-1")
	}
	r := e.kilnWith(profEnv, "aws", "token", "--cluster", "tokcluster", "--profile", "nosuch")
	expect(t, r, 2)
	if !strings.Contains(r.stderr, "--profile") {
		t.Errorf("unknown profile: message does not name --profile:\n%s", r)
	}

	// Missing --cluster is bad input naming the flag.
	r = e.kiln("aws", "token", "--region", "eu-west-1")
	expect(t, r, 2)
	if !strings.Contains(r.stderr, "--cluster") {
		t.Errorf("message does not name --cluster:\n%s", r)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// signingKey reads the signing key of an env's aws token dir ("" if none).
func signingKey(e *env, name string) string {
	data, _ := os.ReadFile(filepath.Join(e.state, "kiln", "aws", name, "tokens", "signing-key.pem"))
	return string(data)
}

// TestAWSConcurrentCreatesOneHost: two `kiln create aws NAME` at once on
// one host (a retried pipeline): the second exits 4 naming the first,
// before it writes anything — its token dir and AWS are untouched.
func TestAWSConcurrentCreatesOneHost(t *testing.T) {
	e, emu := awsEnv(t)
	const name, region = "awstwin", "us-east-1"
	t.Cleanup(func() {
		p := &awsprovider.Provider{LoadConfig: emu.Config}
		if _, err := p.DestroyInfrastructure(context.Background(), name, region, nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	vars := e.vars
	e.vars = append(e.vars, testhooks.CrashEnv+"=after-infrastructure")
	first := e.startPaused("after-token-dir-pending", "create", "aws", name, "--region", region,
		"--regions", strings.Join(awsRegions, ","), "--headless")
	e.vars = vars
	key := signingKey(e, name)
	if key == "" {
		t.Fatal("the first create wrote no token dir before its pause")
	}
	r := e.aws("create", "aws", name, "--region", region, "--headless")
	expect(t, r, 4)
	if !strings.Contains(r.stderr, "kiln create "+name+" by ") || !strings.Contains(r.stderr, fmt.Sprintf("pid %d", first.cmd.Process.Pid)) {
		t.Errorf("the message does not name the first create as holder:\n%s", r)
	}
	if signingKey(e, name) != key {
		t.Error("the second create changed the first one's token dir")
	}
	if inv := inventory(t, emu, name, region); !inv.Empty() {
		t.Errorf("AWS resources exist while the first create is paused before its infrastructure: %s", inv)
	}
	r = first.resume()
	if !r.killed {
		t.Fatalf("the first create did not reach the end of its infrastructure phase:\n%s", r)
	}
	expectComplete(t, inventory(t, emu, name, region))
	if signingKey(e, name) != key {
		t.Error("the token dir's key changed")
	}
}

// TestAWSConcurrentCreatesTwoHosts: creates of one NAME from two hosts
// (own token dirs, own host names in the claim) never both create
// infrastructure: while host-a holds the claim host-b exits 4 naming it,
// and in the end there is exactly one of each resource.
func TestAWSConcurrentCreatesTwoHosts(t *testing.T) {
	a, emu := awsEnv(t)
	b, _ := awsEnv(t)
	a.vars = append(a.vars, testhooks.HostEnv+"=host-a")
	b.vars = append(b.vars, testhooks.HostEnv+"=host-b")
	const name, region = "awshosts", "eu-west-1"
	t.Cleanup(func() {
		p := &awsprovider.Provider{LoadConfig: emu.Config}
		if _, err := p.DestroyInfrastructure(context.Background(), name, region, nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		// host-b's second run took the cluster lock on kiln-b (its
		// kiln-system namespace) before it was stopped.
		_ = clusterB.Client.CoreV1().Namespaces().Delete(context.Background(), "kiln-system", metav1.DeleteOptions{})
		waitNamespaceGone(t, clusterB.Client, "kiln-system")
	})
	vars := a.vars
	a.vars = append(a.vars, testhooks.CrashEnv+"=after-infrastructure")
	first := a.startPaused("after-aws-claim", "create", "aws", name, "--region", region,
		"--regions", strings.Join(awsRegions, ","), "--headless")
	a.vars = vars
	for _, reg := range []string{region, "us-east-1"} {
		r := b.aws("create", "aws", name, "--region", reg, "--headless")
		expect(t, r, 4)
		if !strings.Contains(r.stderr, "@host-a pid") || !strings.Contains(r.stderr, "kiln-"+name+"-claim") {
			t.Errorf("host-b in %s: the message does not name host-a's claim:\n%s", reg, r)
		}
		if inv := inventory(t, emu, name, reg); !inv.Empty() {
			t.Errorf("%s: resources created while host-a holds the claim: %s", reg, inv)
		}
	}
	if r := first.resume(); !r.killed {
		t.Fatalf("host-a did not reach the end of its infrastructure phase:\n%s", r)
	}
	expectComplete(t, inventory(t, emu, name, region))
	// host-b again, now that the claim is free: it continues the same
	// infrastructure (found by tag) and creates no second VPC.
	r := b.kilnWith([]string{testhooks.CrashEnv + "=after-infrastructure"}, "create", "aws", name, "--region", region,
		"--regions", strings.Join(awsRegions, ","), "--headless")
	if !r.killed {
		t.Fatalf("host-b's create did not reach the end of its infrastructure phase:\n%s", r)
	}
	expectComplete(t, inventory(t, emu, name, region))
}
