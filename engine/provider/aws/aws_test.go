package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/provider/kube"
	"github.com/kilnctl/kiln/internal/testenv/awsemu"
)

// uniq makes a cluster name unique in this process: kumo keeps route
// tables it cannot delete, and -count=N reuses one emulator.
func uniq(name string) string {
	return fmt.Sprintf("%s-%d", name, seq.Add(1))
}

var seq atomic.Int64

var testRegions = []string{"us-east-1", "eu-west-1", "ap-northeast-1"}

var (
	emuOnce sync.Once
	emu     *awsemu.Emulator
	emuErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if emu != nil {
		_ = emu.Close()
	}
	if benchEmu != nil {
		_ = benchEmu.Close()
	}
	os.Exit(code)
}

// emulator starts the multi-region kumo once for the package's tests.
func emulator(t testing.TB) *awsemu.Emulator {
	t.Helper()
	emuOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		emu, emuErr = awsemu.Start(ctx, awsemu.Options{Regions: testRegions})
	})
	if emuErr != nil {
		t.Fatalf("start AWS emulator: %v", emuErr)
	}
	return emu
}

// newTestProvider maps every EKS endpoint to a kubeconfig context whose
// server refuses connections: these tests exercise AWS only (the platform
// on a real control plane is covered by cmd/kiln's e2e tests).
func newTestProvider(t testing.TB, e *awsemu.Emulator) *Provider {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.AuthInfos["dead"] = &clientcmdapi.AuthInfo{Token: "unused"}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "dead"}
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	return &Provider{
		SearchRegions: e.Regions(),
		LoadConfig:    e.Config,
		Timeout:       5 * time.Second,
		// The dead API of KubeOverride is judged unreachable within this.
		Limits: Limits{APIProbe: 3 * time.Second},
		KubeOverride: func() (*rest.Config, kubernetes.Interface, error) {
			return kube.New(kc, "dead").Client("dead")
		},
	}
}

// events collects what a provider emits.
type events struct {
	mu  sync.Mutex
	evs []engine.Event
	on  func(engine.Event)
}

func (s *events) Emit(ev engine.Event) {
	s.mu.Lock()
	s.evs = append(s.evs, ev)
	on := s.on
	s.mu.Unlock()
	if on != nil {
		on(ev)
	}
}

// rep is a Reporter to s, as the engine gives a provider.
func (s *events) rep() *event.Reporter { return event.NewReporter(s, nil) }

// resOf is ev's resource payload (zero for another type).
func resOf(ev engine.Event) event.ResourceEvent {
	r, _ := ev.Payload.(event.ResourceEvent)
	return r
}

func (s *events) has(kind string, status event.Status) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.evs {
		if resOf(ev).Kind == kind && resOf(ev).Status == status {
			return true
		}
	}
	return false
}

func (s *events) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, ev := range s.evs {
		fmt.Fprintf(&b, "%s %s %s %s %s\n", ev.Type(), resOf(ev).Kind, resOf(ev).Name, resOf(ev).Status, event.MessageOf(ev.Payload))
	}
	return b.String()
}

var allKinds = []string{KindVPC, KindSubnet, KindInternetGateway, KindRouteTable, KindSecurityGroup, KindIAMRole, KindEKSCluster, KindLaunchTemplate, KindNodegroup}

// wantCounts is one complete cluster's inventory.
var wantCounts = map[string]int{
	KindVPC: 1, KindSubnet: 2, KindInternetGateway: 1, KindRouteTable: 1,
	KindSecurityGroup: 1, KindIAMRole: 2, KindEKSCluster: 1, KindLaunchTemplate: 1, KindNodegroup: 1,
}

func checkComplete(t *testing.T, p *Provider, name, region string) {
	t.Helper()
	inv, err := p.Inventory(context.Background(), name, region)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range allKinds {
		if got := len(inv[k]); got != wantCounts[k] {
			t.Errorf("%s: %d tagged %s=%s, want %d (inventory: %s)", k, got, TagCluster, name, wantCounts[k], inv)
		}
	}
}

func TestDiscoveryFindsTheClusterOnlyInItsRegion(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	name := uniq("disco")
	if _, _, err := p.EnsureInfrastructure(ctx, name, "eu-west-1", nil); err != nil {
		t.Fatal(err)
	}
	// A region the emulator does not serve stands for an opt-in region that
	// refuses: reported, not fatal.
	p.SearchRegions = append(e.Regions(), "sa-east-1")
	locs, err := p.Discover(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(locs) != 4 {
		t.Fatalf("want 4 locations, got %+v", locs)
	}
	for _, l := range locs {
		switch l.Name {
		case "eu-west-1":
			if l.Cluster != name || l.Infra != engine.InfraPresent {
				t.Errorf("eu-west-1: want cluster disco present, got %q %s (err %v)", l.Cluster, l.Infra, l.Err)
			}
		case "sa-east-1":
			if l.Err == nil || l.Infra != engine.InfraUnreachable || !strings.Contains(l.Err.Error(), "sa-east-1") {
				t.Errorf("sa-east-1 (not served): want an unreachable location naming the region, got %+v", l)
			}
		default:
			if l.Cluster != "" || l.Err != nil || l.Infra != engine.InfraAbsent {
				t.Errorf("%s: want nothing, got cluster %q infra %s err %v", l.Name, l.Cluster, l.Infra, l.Err)
			}
		}
	}
}

func TestPartialInfraIsDiscovered(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	name := uniq("halfway")
	if stopped, err := ensureUntil(p, name, "ap-northeast-1", KindInternetGateway, engine.StatusInProgress, &events{}); !stopped {
		t.Fatalf("not stopped at the internet gateway: %v", err)
	}
	locs, err := p.Discover(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range locs {
		if l.Name == "ap-northeast-1" && (l.Cluster != name || l.Infra != engine.InfraPartial) {
			t.Errorf("ap-northeast-1: want partial infra of halfway, got %q %s", l.Cluster, l.Infra)
		}
	}
}

// stop is panicked by a sink to stop a run at an exact point, like a kill:
// no request is in flight and nothing after it runs.
type stop struct{}

// ensureUntil runs EnsureInfrastructure and stops it when the sink sees
// the event kind/status; it reports whether it was stopped there.
func ensureUntil(p *Provider, name, region, kind string, status event.Status, sink *events) (stopped bool, err error) {
	sink.on = func(ev engine.Event) {
		if resOf(ev).Kind == kind && resOf(ev).Status == status {
			panic(stop{})
		}
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stop); !ok {
				panic(r)
			}
			stopped = true
		}
	}()
	_, _, err = p.EnsureInfrastructure(context.Background(), name, region, sink.rep())
	return false, err
}

// TestInterruptedStepsConverge stops a create just before and just after
// every step (at the step's first and last event), then runs it again:
// exactly one of each resource. The real SIGKILL version, through the
// binary and the engine's crash hook, is in cmd/kiln.
func TestInterruptedStepsConverge(t *testing.T) {
	e := emulator(t)
	for i, kind := range allKinds {
		for _, when := range []event.Status{engine.StatusInProgress, engine.StatusCurrent} {
			name := uniq(fmt.Sprintf("intr%d-%s", i, strings.ToLower(string(when[:2]))))
			t.Run(kind+"/"+string(when), func(t *testing.T) {
				p := newTestProvider(t, e)
				sink := &events{}
				stopped, err := ensureUntil(p, name, "us-east-1", kind, when, sink)
				if !stopped {
					t.Fatalf("the run never reached %s %s (err %v):\n%s", kind, when, err, sink)
				}
				again := &events{}
				if _, _, err := p.EnsureInfrastructure(context.Background(), name, "us-east-1", again.rep()); err != nil {
					t.Fatalf("rerun: %v\n%s", err, again)
				}
				checkComplete(t, p, name, "us-east-1")
				destroy(t, p, name, "us-east-1")
			})
		}
	}
}

func TestEnsureTwiceCreatesNothingNew(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	first := &events{}
	name := uniq("twice")
	if _, _, err := p.EnsureInfrastructure(ctx, name, "us-east-1", first.rep()); err != nil {
		t.Fatal(err)
	}
	for _, k := range allKinds {
		if !first.has(k, engine.StatusInProgress) || !first.has(k, engine.StatusCurrent) {
			t.Errorf("%s: want InProgress and Current events on a fresh create:\n%s", k, first)
		}
	}
	second := &events{}
	if _, _, err := p.EnsureInfrastructure(ctx, name, "us-east-1", second.rep()); err != nil {
		t.Fatal(err)
	}
	for _, ev := range second.evs {
		if resOf(ev).Status == engine.StatusInProgress {
			t.Errorf("second run created something: %s %s %s", resOf(ev).Kind, resOf(ev).Name, event.MessageOf(ev.Payload))
		}
	}
	checkComplete(t, p, name, "us-east-1")
	destroy(t, p, name, "us-east-1")
}

// destroy removes a test's cluster (and checks destroy on the way).
func destroy(t *testing.T, p *Provider, name, region string) {
	t.Helper()
	if _, err := p.DestroyInfrastructure(context.Background(), name, region, nil); err != nil {
		t.Errorf("destroy %s: %v", name, err)
	}
}

func TestDestroyFindsLeftoversWithoutTheCluster(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	name := uniq("leftover")
	if _, _, err := p.EnsureInfrastructure(ctx, name, "eu-west-1", nil); err != nil {
		t.Fatal(err)
	}
	// Someone removed the EKS cluster by hand: the rest must still go.
	cfg, err := e.Config(ctx, "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	ek := eks.NewFromConfig(cfg)
	if _, err := ek.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(nodegroupName)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ek.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	sink := &events{}
	if _, err := p.DestroyInfrastructure(ctx, name, "eu-west-1", sink.rep()); err != nil {
		t.Fatalf("destroy: %v\n%s", err, sink)
	}
	inv, err := p.Inventory(ctx, name, "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	// kumo has no DeleteRouteTable: the table stays there, reported.
	if !inv.Empty(KindRouteTable) {
		t.Errorf("destroy left tagged resources: %s", inv)
	}
	if len(inv[KindRouteTable]) > 0 && !strings.Contains(sink.String(), "does not implement DeleteRouteTable") {
		t.Errorf("the route table left by the emulator was not reported:\n%s", sink)
	}
	for _, k := range []string{KindVPC, KindSubnet, KindInternetGateway, KindSecurityGroup, KindIAMRole} {
		if !sink.has(k, engine.StatusNotFound) {
			t.Errorf("%s: no NotFound event confirming the deletion:\n%s", k, sink)
		}
	}
	// Idempotent: nothing to do is not an error.
	if _, err := p.DestroyInfrastructure(ctx, name, "eu-west-1", nil); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
}

func TestTokenIsAPresignedGetCallerIdentity(t *testing.T) {
	e := emulator(t)
	ctx := context.Background()
	cfg, err := e.Config(ctx, "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := NewToken(ctx, cfg, "tokentest")
	if err != nil {
		t.Fatal(err)
	}
	u := checkToken(t, tok.Value, "eu-west-1")
	if d := time.Until(tok.Expiration); d < 13*time.Minute || d > 15*time.Minute {
		t.Errorf("expiration in %s, want about 14m", d)
	}
	// The signature covers the cluster id: recomputing it with the
	// emulator's secret key and the same header gives the same signature,
	// and any other cluster id gives another one.
	if got, want := resign(t, u, "eu-west-1", "tokentest"), u.Query().Get("X-Amz-Signature"); got != want {
		t.Errorf("signature does not verify with x-k8s-aws-id=tokentest: %s != %s", got, want)
	}
	if resign(t, u, "eu-west-1", "othercluster") == u.Query().Get("X-Amz-Signature") {
		t.Error("the same signature verifies for another cluster id: the header is not signed")
	}
	cred, err := ExecCredential(tok)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind":"ExecCredential"`, `"apiVersion":"client.authentication.k8s.io/v1beta1"`, `"expirationTimestamp":`, `"token":"k8s-aws-v1.`} {
		if !strings.Contains(string(cred), want) {
			t.Errorf("ExecCredential lacks %s: %s", want, cred)
		}
	}
}

// checkToken decodes an EKS token and checks it is a presigned STS
// GetCallerIdentity for region that signs the cluster id header.
func checkToken(t *testing.T, token, region string) *url.URL {
	t.Helper()
	if !strings.HasPrefix(token, TokenPrefix) {
		t.Fatalf("token does not start with %s", TokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, TokenPrefix))
	if err != nil {
		t.Fatalf("token is not unpadded base64url: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("Action") != "GetCallerIdentity" || q.Get("Version") != "2011-06-15" {
		t.Errorf("not a GetCallerIdentity request: %s", u.RawQuery)
	}
	if cred := q.Get("X-Amz-Credential"); !strings.HasSuffix(cred, "/"+region+"/sts/aws4_request") {
		t.Errorf("credential scope %q is not for %s/sts", cred, region)
	}
	if sh := strings.Split(q.Get("X-Amz-SignedHeaders"), ";"); !contains(sh, ClusterIDHeader) || !contains(sh, "host") {
		t.Errorf("signed headers %v lack %s", sh, ClusterIDHeader)
	}
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || q.Get("X-Amz-Signature") == "" {
		t.Errorf("not SigV4 presigned: %s", u.RawQuery)
	}
	return u
}

// resign presigns the token's request again, as STS would to verify it.
func resign(t *testing.T, u *url.URL, region, cluster string) string {
	t.Helper()
	q := u.Query()
	when, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"X-Amz-Signature", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders"} {
		q.Del(k)
	}
	bare := *u
	bare.RawQuery = q.Encode()
	req, err := http.NewRequest(http.MethodGet, bare.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ClusterIDHeader, cluster)
	creds := aws.Credentials{AccessKeyID: awsemu.AccessKeyID, SecretAccessKey: awsemu.SecretAccessKey}
	const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, emptySHA256, "sts", region, when)
	if err != nil {
		t.Fatal(err)
	}
	su, err := url.Parse(signed)
	if err != nil {
		t.Fatal(err)
	}
	return su.Query().Get("X-Amz-Signature")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestWriteKubeconfigKeepsOtherEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	other := clientcmdapi.NewConfig()
	other.Clusters["mine"] = &clientcmdapi.Cluster{Server: "https://mine.example"}
	other.AuthInfos["mine"] = &clientcmdapi.AuthInfo{Token: "keep-me"}
	other.Contexts["mine"] = &clientcmdapi.Context{Cluster: "mine", AuthInfo: "mine"}
	other.CurrentContext = "mine"
	if err := clientcmd.WriteToFile(*other, path); err != nil {
		t.Fatal(err)
	}
	ca := base64.StdEncoding.EncodeToString([]byte("not a real CA"))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, errs[i] = WriteKubeconfig(t.Context(), path, KubeconfigEntry{Cluster: fmt.Sprintf("c%d", i), Region: "eu-west-1", Endpoint: "https://x.example", CAData: ca, KilnPath: "/usr/bin/kiln"})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Updating an entry replaces it rather than adding another.
	if _, err := WriteKubeconfig(t.Context(), path, KubeconfigEntry{Cluster: "c0", Region: "us-east-1", Endpoint: "https://y.example", CAData: ca}); err != nil {
		t.Fatal(err)
	}
	got, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentContext != "mine" || got.AuthInfos["mine"].Token != "keep-me" || got.Clusters["mine"].Server != "https://mine.example" {
		t.Errorf("the existing entry was changed: %+v", got)
	}
	if len(got.Contexts) != 9 {
		t.Errorf("want 9 contexts (mine + 8 kiln), got %d", len(got.Contexts))
	}
	u := got.AuthInfos[ContextName("c0")]
	if u == nil || u.Exec == nil || u.Token != "" {
		t.Fatalf("c0's user is not an exec credential: %+v", u)
	}
	want := []string{"aws", "token", "--cluster", "c0", "--region", "us-east-1"}
	if strings.Join(u.Exec.Args, " ") != strings.Join(want, " ") || got.Clusters[ContextName("c0")].Server != "https://y.example" {
		t.Errorf("c0 not updated: args %v server %s", u.Exec.Args, got.Clusters[ContextName("c0")].Server)
	}
}

func TestBadInputIsExit2BeforeAnythingIsCreated(t *testing.T) {
	e := emulator(t)
	noCreds := func(ctx context.Context, region string) (aws.Config, error) {
		cfg, err := e.Config(ctx, region)
		cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no credentials in the chain")
		})
		return cfg, err
	}
	for _, tc := range []struct {
		name  string
		p     *Provider
		field string
	}{
		{"instance type", &Provider{InstanceType: "big"}, "--instance-type"},
		{"nodes", &Provider{Nodes: 1000}, "--nodes"},
		{"region spelling", &Provider{Region: "mars"}, "--region"},
		{"unknown region", &Provider{Region: "xx-nowhere-9"}, "--region"},
		{"unknown region outside --regions", &Provider{Region: "xx-nowhere-8"}, "--region"},
		{"credentials", &Provider{Region: "eu-west-1", LoadConfig: noCreds}, "credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.SearchRegions = testRegions
			if p.LoadConfig == nil {
				p.LoadConfig = e.Config
			}
			if tc.name == "unknown region outside --regions" {
				p.SearchRegions = []string{"us-east-1"}
			}
			if tc.name == "unknown region" {
				p.SearchRegions = nil // the built-in list decides
			}
			_, err := p.Discover(context.Background(), "bad")
			if failure.Of(err) != failure.Input || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("want input naming %s, got %v: %v", tc.field, failure.Of(err), err)
			}
			for _, r := range testRegions {
				if inv, err := newTestProvider(t, e).Inventory(context.Background(), "bad", r); err != nil || !inv.Empty() {
					t.Errorf("%s: %s %v", r, inv, err)
				}
			}
		})
	}
}

// Without a NAME, every kiln cluster of every region is found (two in one
// region, one in another), each with its own Location; a region that
// cannot be searched is reported, not fatal; and DiscoverClusters — the
// wizard's home screen — lists them through the same path.
func TestListFindsEveryKilnClusterInEveryRegion(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	want := map[string]string{uniq("lista"): "eu-west-1", uniq("listb"): "eu-west-1", uniq("listc"): "us-east-1"}
	for name, region := range want {
		if _, _, err := p.EnsureInfrastructure(ctx, name, region, nil); err != nil {
			t.Fatal(err)
		}
	}
	p.SearchRegions = append(e.Regions(), "sa-east-1")
	locs, err := p.ListClusters(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.Location{}
	unreachable := false
	for _, l := range locs {
		if l.Cluster != "" {
			got[l.Cluster] = l
		}
		if l.Name == "sa-east-1" && l.Infra == engine.InfraUnreachable && l.Err != nil {
			unreachable = true
		}
	}
	for name, region := range want {
		l, ok := got[name]
		if !ok || l.Name != region || l.Infra != engine.InfraPresent {
			t.Errorf("%s: want listed in %s with its infrastructure present, got %+v (found %v)", name, region, l, ok)
		}
	}
	if !unreachable {
		t.Errorf("sa-east-1 (not served) not reported as unreachable: %+v", locs)
	}
	rows, err := (&engine.Engine{}).DiscoverClusters(ctx, p, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, r := range rows {
		listed[r.Name] = r.Location
	}
	for name, region := range want {
		if listed[name] != region {
			t.Errorf("DiscoverClusters: %s in %q, want %s (rows %+v)", name, listed[name], region, rows)
		}
	}
}

// EKS deletes no cluster that still has node groups: DeleteCluster answers
// ResourceInUseException (API reference, DeleteCluster:
// https://docs.aws.amazon.com/eks/latest/APIReference/API_DeleteCluster.html;
// the emulator answers so, kumo alone does not). A node group someone
// added without kiln's tag must neither hang destroy nor be left behind
// with the cluster: it goes too, named, and the cluster after it.
func TestDestroyRemovesANodegroupKilnDidNotCreate(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	name := uniq("foreign")
	const region = "eu-west-1"
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := e.Config(ctx, region)
	if err != nil {
		t.Fatal(err)
	}
	ek := eks.NewFromConfig(cfg)
	cl, err := ek.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	ng, err := ek.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(nodegroupName)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ek.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
		ClusterName: aws.String(name), NodegroupName: aws.String("gpu-by-hand"),
		NodeRole: ng.Nodegroup.NodeRole, Subnets: cl.Cluster.ResourcesVpcConfig.SubnetIds,
		InstanceTypes: []string{"g5.xlarge"},
	}); err != nil {
		t.Fatal(err)
	}
	// The emulator refuses as EKS does while a node group is attached.
	if _, err := ek.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(name)}); apiCode(err) != "ResourceInUseException" {
		t.Fatalf("DeleteCluster with node groups attached: want ResourceInUseException, got %v", err)
	}
	sink := &events{}
	if _, err := p.DestroyInfrastructure(ctx, name, region, sink.rep()); err != nil {
		t.Fatalf("destroy: %v\n%s", err, sink)
	}
	if !strings.Contains(sink.String(), "gpu-by-hand Terminating deleting: not created by kiln") {
		t.Errorf("the foreign node group's deletion was not named:\n%s", sink)
	}
	if _, err := ek.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)}); apiCode(err) != "ResourceNotFoundException" {
		t.Errorf("the EKS cluster is still there: %v\n%s", err, sink)
	}
}

// Zones are judged by zone ID and by what EKS and EC2 accept, not by name:
// in the emulated us-east-1, us-east-1a is use1-az3 (where EKS creates no
// control plane: EKS User Guide, "View Amazon EKS networking requirements
// for VPC and subnets"; CreateCluster then fails with
// UnsupportedAvailabilityZoneException, API reference CreateCluster) and a
// Local Zone's name sorts first.
func TestSubnetsAvoidZonesEKSAndEC2Refuse(t *testing.T) {
	e := emulator(t)
	ctx := context.Background()
	const region = "us-east-1"
	cfg, err := e.Config(ctx, region)
	if err != nil {
		t.Fatal(err)
	}
	// The emulator refuses a control plane there, as EKS does.
	ec := ec2.NewFromConfig(cfg)
	vpc, err := ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.99.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for i, az := range []string{"us-east-1a", "us-east-1b"} {
		sn, err := ec.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.99.%d.0/24", i)), AvailabilityZone: aws.String(az)})
		if err != nil {
			t.Fatal(err)
		}
		bad = append(bad, aws.ToString(sn.Subnet.SubnetId))
	}
	_, err = eks.NewFromConfig(cfg).CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(uniq("azbad")), RoleArn: aws.String("arn:aws:iam::000000000000:role/x"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: bad}})
	if apiCode(err) != "UnsupportedAvailabilityZoneException" {
		t.Fatalf("CreateCluster with a subnet in use1-az3: want UnsupportedAvailabilityZoneException, got %v", err)
	}

	p := newTestProvider(t, e)
	name := uniq("zones")
	sink := &events{}
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, sink.rep()); err != nil {
		t.Fatalf("create in %s: %v\n%s", region, err, sink)
	}
	t.Cleanup(func() { destroy(t, p, name, region) })
	zones := subnetZones(t, ec, name)
	if slices.Contains(zones, "us-east-1a") || slices.Contains(zones, region+"-lcl-1a") || len(zones) != 2 {
		t.Fatalf("subnets in %v: want two zones EKS accepts (not us-east-1a = use1-az3, not the Local Zone)\n%s", zones, sink)
	}
}

// An instance type a zone does not offer keeps the subnets out of that
// zone; a subnet an earlier run left in a zone EKS refuses is replaced
// while no EKS cluster uses it, so a rerun does not fail the same way
// forever; and a region without two usable zones is a clear error.
func TestSubnetsFollowInstanceTypeOfferingsAndReplaceARefusedZone(t *testing.T) {
	e := emulator(t)
	ctx := context.Background()
	const region = "ap-northeast-1"
	t.Cleanup(func() { e.SetZones(region, awsemu.DefaultZones(region)) })
	cfg, err := e.Config(ctx, region)
	if err != nil {
		t.Fatal(err)
	}
	ec := ec2.NewFromConfig(cfg)
	p := newTestProvider(t, e)
	p.InstanceType = "m7i.large"

	// Zone a (apne1-az4) is fine for now: the first run puts a subnet there.
	e.SetZones(region, []awsemu.Zone{
		{Name: region + "a", ID: "apne1-az1"},
		{Name: region + "b", ID: "apne1-az2", NotOffered: []string{"m7i.large"}},
		{Name: region + "c", ID: "apne1-az4"},
		{Name: region + "d", ID: "apne1-az3"},
	})
	name := uniq("offer")
	sink := &events{}
	stopped, err := ensureUntil(p, name, region, KindInternetGateway, engine.StatusInProgress, sink)
	if !stopped {
		t.Fatalf("the run never reached the internet gateway (err %v):\n%s", err, sink)
	}
	t.Cleanup(func() { destroy(t, p, name, region) })
	if zones := subnetZones(t, ec, name); !slices.Equal(zones, []string{region + "a", region + "d"}) {
		t.Fatalf("subnets in %v: want %sa and %sd (by zone ID, skipping %sb, which does not offer m7i.large)\n%s", zones, region, region, region, sink)
	}

	// Now zone a turns out to be one EKS refuses (as an older kiln's pick
	// by name would): the rerun replaces that subnet before the cluster.
	e.SetZones(region, []awsemu.Zone{
		{Name: region + "a", ID: "use1-az3"},
		{Name: region + "b", ID: "apne1-az2", NotOffered: []string{"m7i.large"}},
		{Name: region + "c", ID: "apne1-az4"},
		{Name: region + "d", ID: "apne1-az3"},
	})
	again := &events{}
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, again.rep()); err != nil {
		t.Fatalf("rerun: %v\n%s", err, again)
	}
	if !strings.Contains(again.String(), "replacing: "+region+"a (use1-az3)") {
		t.Errorf("the refused zone's subnet was not replaced, saying why:\n%s", again)
	}
	if zones := subnetZones(t, ec, name); !slices.Equal(zones, []string{region + "c", region + "d"}) {
		t.Errorf("subnets after the rerun in %v, want %sc and %sd", zones, region, region)
	}
	checkComplete(t, p, name, region)

	// Fewer than two usable zones: exit 1 naming each zone passed over.
	e.SetZones(region, []awsemu.Zone{
		{Name: region + "a", ID: "apne1-az1"},
		{Name: region + "b", ID: "apne1-az2", NotOffered: []string{"m7i.large"}},
	})
	other := uniq("onezone")
	sink = &events{}
	_, _, err = p.EnsureInfrastructure(ctx, other, region, sink.rep())
	t.Cleanup(func() { destroy(t, p, other, region) })
	if err == nil || !strings.Contains(err.Error(), "no second availability zone") || !strings.Contains(err.Error(), region+"b (apne1-az2) does not offer m7i.large") {
		t.Fatalf("one usable zone: %v", err)
	}
	// Fixed by another region or type: the CLI names the flags, the
	// wizard its fields.
	if !strings.Contains(err.Error(), "Choose another region or instance type (--region, --instance-type)") {
		t.Errorf("the CLI's words lack the flags: %v", err)
	}
	if form := input.Render(err, func(in input.Input) string { return "the " + string(in) + " field" }); !strings.Contains(form, "Choose another region or instance type (the region field, the instance-type field)") || strings.Contains(form, "--") {
		t.Errorf("a frontend's words: %q", form)
	}
}

// subnetZones are the zones of cluster name's subnets, in subnet order.
func subnetZones(t *testing.T, ec *ec2.Client, name string) []string {
	t.Helper()
	subs, err := findSubnets(context.Background(), ec, name)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(subs, func(a, b ec2types.Subnet) int {
		return strings.Compare(tagValue(a.Tags, TagRole), tagValue(b.Tags, TagRole))
	})
	var out []string
	for _, s := range subs {
		out = append(out, aws.ToString(s.AvailabilityZone))
	}
	return out
}

// kiln installs vpc-cni (network policy enforcement on), kube-proxy and
// coredns as EKS managed add-ons (DESIGN §17), at the default version EKS
// gives for the cluster's Kubernetes version (DescribeAddonVersions), and
// puts the VPC CNI's configuration back when someone turned enforcement
// off. The emulator applies the API reference's rules: CreateAddon on a
// missing cluster, an incompatible version or configuration values
// outside the add-on's schema are refused.
func TestManagedAddonsWithNetworkPolicyEnforcement(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	ctx := context.Background()
	name := uniq("addons")
	const region = "eu-west-1"
	sink := &events{}
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, sink.rep()); err != nil {
		t.Fatalf("create: %v\n%s", err, sink)
	}
	t.Cleanup(func() { destroy(t, p, name, region) })
	cfg, err := e.Config(ctx, region)
	if err != nil {
		t.Fatal(err)
	}
	ek := eks.NewFromConfig(cfg)
	for _, a := range []string{"vpc-cni", "kube-proxy", "coredns"} {
		v, conf, status := e.AddonStatus(region, name, a)
		if status != "ACTIVE" || v == "" {
			t.Errorf("add-on %s: version %q status %q, want ACTIVE\n%s", a, v, status, sink)
		}
		if a == "vpc-cni" && !sameJSON(conf, `{"enableNetworkPolicy":"true"}`) {
			t.Errorf("vpc-cni configuration %q: network policy enforcement not on", conf)
		}
	}
	if !sink.has(KindAddon, engine.StatusCurrent) {
		t.Errorf("no Current event for the add-ons:\n%s", sink)
	}

	// Someone turns enforcement off: the next run puts it back.
	if _, err := ek.UpdateAddon(ctx, &eks.UpdateAddonInput{ClusterName: aws.String(name), AddonName: aws.String("vpc-cni"), ConfigurationValues: aws.String(`{"enableNetworkPolicy":"false"}`)}); err != nil {
		t.Fatal(err)
	}
	again := &events{}
	if _, _, err := p.EnsureInfrastructure(ctx, name, region, again.rep()); err != nil {
		t.Fatalf("rerun: %v\n%s", err, again)
	}
	if _, conf, _ := e.AddonStatus(region, name, "vpc-cni"); !sameJSON(conf, `{"enableNetworkPolicy":"true"}`) {
		t.Errorf("after the rerun, vpc-cni configuration %q", conf)
	}

	// The emulator refuses what EKS refuses.
	for _, c := range []struct {
		in   *eks.CreateAddonInput
		code string
	}{
		{&eks.CreateAddonInput{ClusterName: aws.String(name + "-nope"), AddonName: aws.String("vpc-cni")}, "ResourceNotFoundException"},
		{&eks.CreateAddonInput{ClusterName: aws.String(name), AddonName: aws.String("vpc-cni")}, "ResourceInUseException"},
		{&eks.CreateAddonInput{ClusterName: aws.String(name), AddonName: aws.String("no-such-addon")}, "InvalidParameterException"},
		{&eks.CreateAddonInput{ClusterName: aws.String(name), AddonName: aws.String("kube-proxy"), AddonVersion: aws.String("v1.0.0-eksbuild.1")}, "InvalidParameterException"},
	} {
		if _, err := ek.CreateAddon(ctx, c.in); apiCode(err) != c.code {
			t.Errorf("CreateAddon %s on %s: %v, want %s", aws.ToString(c.in.AddonName), aws.ToString(c.in.ClusterName), err, c.code)
		}
	}
	if _, err := ek.UpdateAddon(ctx, &eks.UpdateAddonInput{ClusterName: aws.String(name), AddonName: aws.String("vpc-cni"), ConfigurationValues: aws.String(`{"enableNetworkPolicies":"true"}`)}); apiCode(err) != "InvalidParameterException" {
		t.Errorf("UpdateAddon with a key outside the schema: %v, want InvalidParameterException", err)
	}
}
