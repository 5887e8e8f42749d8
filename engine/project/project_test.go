package project

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m, testcluster.Options{}, &cluster)) }

// logReporter reports to the test log.
type logReporter struct {
	t *testing.T
	w *readiness.Watcher
}

func (r *logReporter) Phase(ctx context.Context, name event.Phase, run func(context.Context) error) error {
	err := run(ctx)
	r.t.Logf("phase %s: %v", name, err)
	return err
}
func (r *logReporter) Resource(kind, ns, name string, status event.Status, msg string) {}
func (r *logReporter) Logf(level event.Level, format string, args ...any) {
	r.t.Logf(string(level)+": "+format, args...)
}
func (r *logReporter) Watcher() *readiness.Watcher { return r.w }

// newOps makes a cluster config with one tenant of its own (so tests do not
// share namespaces) and its namespace.
func newOps(t *testing.T, tenant string) (*Ops, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cs := cluster.Client
	cfg := config.Default("unit")
	cfg.Spec.Tenants = []string{tenant}
	// The namespace kiln installs: Pod Security restricted, enforced.
	if _, err := platform.Ensure(ctx, cs, platform.TenantObjects("unit", []string{tenant})[0]); err != nil {
		t.Fatal(err)
	}
	ensureGateway(t, ctx, cs, cfg)
	return &Ops{Client: cs, Cluster: "unit", Config: cfg, Timeout: time.Minute, R: &logReporter{t: t, w: &readiness.Watcher{Client: cs}}}, ctx
}

// ensureGateway installs kiln-system and the gateway (kwok runs its pods),
// which the projects' routes point at, and waits until it is ready.
func ensureGateway(t *testing.T, ctx context.Context, cs kubernetes.Interface, cfg *config.ClusterConfig) {
	t.Helper()
	objs := append([]platform.Object{platform.NamespaceObject("unit")}, platform.GatewayObjects("unit", cfg, "dev")...)
	var refs []readiness.Ref
	for _, obj := range objs {
		if _, err := platform.Ensure(ctx, cs, obj); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, obj.Ref)
	}
	if _, err := (&readiness.Watcher{Client: cs}).Until(ctx, refs, readiness.Ready); err != nil {
		t.Fatalf("gateway not ready: %v", err)
	}
}

// Writes to the spec carry the resourceVersion they read: twenty writers
// racing without any lease lose no update.
func TestWriteSpecLosesNoUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "race")
	r := Ref{Tenant: "race", Project: "p"}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			_, err := o.writeSpec(ctx, r, "test", fmt.Sprint("writer ", i), func(cur *Spec) (*Spec, error) {
				if cur == nil {
					return &Spec{Stack: config.DefaultStack(), State: DesiredRunning}, nil
				}
				return cur, nil
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, _, err := o.readSpec(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if s.Revision != 20 {
		t.Errorf("revision %d after 20 writes: an update was lost", s.Revision)
	}
}

// Pod statuses the Deployment does not summarize (crash loops, image pulls)
// show as degraded reasons, as does a token the Deployment is out of sync with.
func TestObserveReadsPodProblemsAndTokenSync(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "observe")
	r := Ref{Tenant: "observe", Project: "shop"}
	if err := o.Create(ctx, r, ""); err != nil {
		t.Fatal(err)
	}
	st, err := o.Inspect(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateRunning || len(st.Reasons) != 0 {
		t.Fatalf("after create: %+v", st)
	}
	if st.TokenSync != TokenInSync || st.Created.IsZero() {
		t.Errorf("after create: token sync %q, created %v; want in-sync and the spec's creation time", st.TokenSync, st.Created)
	}
	// A pod bound to a node nobody runs keeps the status the test gives it.
	cs := o.Client
	for i, reason := range []string{"CrashLoopBackOff", "ImagePullBackOff"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("shop-broken-%d", i), Namespace: r.Namespace(), Labels: o.labels(r)},
			Spec:       restrictedPod("app", "x"),
		}
		created, err := cs.CoreV1().Pods(r.Namespace()).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "x", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}
		if _, err := cs.CoreV1().Pods(r.Namespace()).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The token in force is another than the Deployment runs (as when a
	// rotation committed behind its back): kiln judges this from what it
	// recorded on the spec ConfigMap, without reading the Secret.
	spec, err := cs.CoreV1().ConfigMaps(r.Namespace()).Get(ctx, SpecName(r.Project), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Annotations[AnnotationSpecKey] != "token-1" || len(spec.Annotations[AnnotationToken]) != 64 {
		t.Fatalf("spec annotations after create %v: the token in force is not recorded", spec.Annotations)
	}
	spec.Annotations[AnnotationToken] = TokenHash([]byte("another token"))
	if _, err := cs.CoreV1().ConfigMaps(r.Namespace()).Update(ctx, spec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err = o.Inspect(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(st.Reasons, "; ")
	for _, want := range []string{"crash looping", "image pull failing", "token out of sync"} {
		if !strings.Contains(got, want) {
			t.Errorf("reasons %q lack %q", got, want)
		}
	}
	if st.State != StateDegraded {
		t.Errorf("state %s, want degraded", st.State)
	}
	if st.TokenSync != TokenOutOfSync {
		t.Errorf("token sync %q after the token changed, want %q", st.TokenSync, TokenOutOfSync)
	}
	waiting := map[string]string{}
	for _, p := range st.Pods {
		waiting[p.Name] = p.Waiting
	}
	if waiting["shop-broken-0"] != "CrashLoopBackOff" || waiting["shop-broken-1"] != "ImagePullBackOff" {
		t.Errorf("pods' waiting reasons %v", waiting)
	}
	list, err := o.List(ctx, "observe")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].State != StateDegraded {
		t.Errorf("list = %+v", list)
	}
	// The Secret holds another key than the spec records: its row says
	// so (from the Secret's metadata, never its data).
	sec, err := cs.CoreV1().Secrets(r.Namespace()).Get(ctx, SecretName(r.Project), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Annotations[AnnotationKey] = "token-9"
	if _, err := cs.CoreV1().Secrets(r.Namespace()).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another operation holds the project's Lease: the status names who,
	// and a held Lease whose renewal lapsed names nobody.
	holder, renew, secs := "alice@laptop [pid 7]", metav1.NewMicroTime(time.Now()), int32(60)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName(r.Project), Namespace: r.Namespace()},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renew, LeaseDurationSeconds: &secs},
	}
	cur, err := cs.CoordinationV1().Leases(r.Namespace()).Get(ctx, lease.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		cur.Spec = lease.Spec
		_, err = cs.CoordinationV1().Leases(r.Namespace()).Update(ctx, cur, metav1.UpdateOptions{})
	case apierrors.IsNotFound(err):
		_, err = cs.CoordinationV1().Leases(r.Namespace()).Create(ctx, lease, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	if st, err = o.Inspect(ctx, r); err != nil {
		t.Fatal(err)
	}
	if st.Operation != "alice@laptop" {
		t.Errorf("operation %q while the Lease is held, want alice@laptop", st.Operation)
	}
	secRow := ""
	for _, obj := range st.Objects {
		if obj.Kind == readiness.KindSecret {
			secRow = string(obj.Status) + " " + obj.Message
		}
	}
	if want := `InProgress holds key "token-9" in force, the spec records "token-1"`; secRow != want {
		t.Errorf("secret row %q, want %q", secRow, want)
	}
	cur, err = cs.CoordinationV1().Leases(r.Namespace()).Get(ctx, lease.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// (A second's duration: suspend below then waits only that long for
	// the Lease, which kiln's lock judges by its own clock.)
	old, one := metav1.NewMicroTime(time.Now().Add(-2*time.Minute)), int32(1)
	cur.Spec.RenewTime, cur.Spec.LeaseDurationSeconds = &old, &one
	if _, err := cs.CoordinationV1().Leases(r.Namespace()).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err = o.Inspect(ctx, r); err != nil {
		t.Fatal(err)
	}
	if st.Operation != "" {
		t.Errorf("operation %q after the Lease's renewal lapsed, want none", st.Operation)
	}
	// Without a Deployment nothing runs a token: sync is unknown, never
	// claimed.
	if err := o.Suspend(ctx, r); err != nil {
		t.Fatal(err)
	}
	if st, err = o.Inspect(ctx, r); err != nil {
		t.Fatal(err)
	}
	if st.TokenSync != TokenUnknown {
		t.Errorf("token sync %q when suspended, want %q", st.TokenSync, TokenUnknown)
	}
}

// Bad input is refused (exit 2) before anything is written.
func TestBadInputWritesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "bad")
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"unknown stack", func() error { return o.Create(ctx, Ref{"bad", "p"}, "nope") }},
		{"missing project", func() error { return o.Start(ctx, Ref{"bad", "ghost"}) }},
		{"restack without stack", func() error { return o.Restack(ctx, Ref{"bad", "ghost"}, "") }},
		{"unknown tenant", func() error { _, err := o.Parse("other/p"); return err }},
		{"bad name", func() error { _, err := o.Parse("bad/P_x"); return err }},
	} {
		if err := c.run(); failure.Of(err) != failure.Input {
			t.Errorf("%s: want exit 2, got %v", c.name, err)
		}
	}
	cms, _ := o.Client.CoreV1().ConfigMaps("kiln-tenant-bad").List(ctx, metav1.ListOptions{LabelSelector: LabelProject})
	leases, _ := o.Client.CoordinationV1().Leases("kiln-tenant-bad").List(ctx, metav1.ListOptions{})
	if len(cms.Items)+len(leases.Items) != 0 {
		t.Errorf("bad input wrote %d configmaps and %d leases", len(cms.Items), len(leases.Items))
	}
}

// countingTransport counts requests.
type countingTransport struct {
	rt       http.RoundTripper
	mu       sync.Mutex
	requests int
	lists    int
	secrets  int
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.requests++
	// The listed kinds are collections: their paths end in the plural
	// resource name (…/configmaps, …/endpointslices).
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "s") {
		c.lists++
	}
	// A Secret read that could carry data: anything but a metadata-only
	// list (Accept …;as=PartialObjectMetadataList).
	if strings.Contains(req.URL.Path, "/secrets") && !strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadataList") {
		c.secrets++
	}
	c.mu.Unlock()
	return c.rt.RoundTrip(req)
}

// List answers from a constant number of LIST requests, however many
// projects there are.
func TestListUsesConstantRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "many")
	counts := map[int]int{}
	for _, n := range []int{1, 25} {
		for i := len(counts) * 1000; i < len(counts)*1000+n; i++ {
			r := Ref{Tenant: "many", Project: fmt.Sprintf("p%d", i)}
			if _, err := o.writeSpec(ctx, r, "test", "test", func(*Spec) (*Spec, error) {
				return &Spec{Stack: config.DefaultStack(), State: DesiredSuspended}, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		cfg := rest.CopyConfig(cluster.RESTConfig)
		ct := &countingTransport{}
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { ct.rt = rt; return ct })
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		counted := *o
		counted.Client = cs
		list, err := counted.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) < n {
			t.Fatalf("listed %d projects, want at least %d", len(list), n)
		}
		if ct.requests != ct.lists {
			t.Errorf("%d requests, of which %d LISTs: List should only list", ct.requests, ct.lists)
		}
		if ct.secrets != 0 {
			t.Errorf("List made %d requests for Secrets that were not metadata-only: health must not read Secret data", ct.secrets)
		}
		counts[len(list)] = ct.lists
	}
	var seen []int
	for _, c := range counts {
		seen = append(seen, c)
	}
	if len(seen) != 2 || seen[0] != seen[1] || seen[0] != 8 {
		t.Errorf("LIST requests by number of projects: %v, want 8 each (7 kinds and the Secrets' metadata)", counts)
	}
}

// A tenant who can write ConfigMaps can plant specs: ones that do not
// decode, that name another project or tenant, or that carry a stack that
// fails validation. Listing skips each with a warning naming it, the real
// project is still listed, and no operation deploys a planted spec.
func TestPlantedSpecsAreSkippedNotTrusted(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "planted")
	var warnings []string
	o.R = &captureReporter{logReporter: logReporter{t: t, w: &readiness.Watcher{Client: o.Client}}, warn: &warnings}
	good := Ref{Tenant: "planted", Project: "real"}
	if err := o.Create(ctx, good, ""); err != nil {
		t.Fatal(err)
	}
	stack := config.DefaultStack()
	badStack := stack
	badStack.Image = "Evil Image"
	plant := map[string]string{
		"notjson":  `{"tenant": "planted", "project":`,
		"other":    specJSON(t, Spec{Tenant: "planted", Project: "real", Stack: stack, State: DesiredRunning}),
		"elsewhre": specJSON(t, Spec{Tenant: "victim", Project: "elsewhre", Stack: stack, State: DesiredRunning}),
		"badstack": specJSON(t, Spec{Tenant: "planted", Project: "badstack", Stack: badStack, State: DesiredRunning}),
		"huge":     strings.Repeat(" ", MaxSpecSize+1),
	}
	for p, data := range plant {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: SpecName(p), Namespace: good.Namespace(), Labels: o.labels(Ref{Tenant: "planted", Project: p})},
			Data: map[string]string{SpecKey: data}}
		if _, err := o.Client.CoreV1().ConfigMaps(good.Namespace()).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := o.List(ctx, "planted") // other tests' projects live in other tenants
	if err != nil {
		t.Fatalf("one planted spec broke the whole list: %v", err)
	}
	if len(list) != 1 || list[0].Project != "real" {
		t.Fatalf("list: want only the real project, got %+v", list)
	}
	for p := range plant {
		found := false
		for _, w := range warnings {
			found = found || strings.Contains(w, SpecName(p))
		}
		if !found {
			t.Errorf("no warning names the planted spec %s: %q", SpecName(p), warnings)
		}
	}
	err = o.Start(ctx, Ref{Tenant: "planted", Project: "badstack"})
	if err == nil || !strings.Contains(err.Error(), "spec.") && !strings.Contains(err.Error(), "image") {
		t.Fatalf("start of a planted spec with a bad stack: %v", err)
	}
	if _, err := o.Client.AppsV1().Deployments(good.Namespace()).Get(ctx, "badstack", metav1.GetOptions{}); err == nil {
		t.Fatal("a planted spec was deployed")
	}
}

// A host P.T.DOMAIN longer than a DNS name is bad input before anything is
// written, not a failure after the Deployment is up.
func TestLongHostIsBadInputUpFront(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "longhost")
	label := strings.Repeat("d", 60)
	o.Config.Spec.Domain = strings.Join([]string{label, label, label, label, "io"}, ".")
	r := Ref{Tenant: "longhost", Project: strings.Repeat("p", 40)}
	err := o.Create(ctx, r, "")
	if failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "253") {
		t.Fatalf("want input naming the 253-character limit, got %v: %v", failure.Of(err), err)
	}
	if _, err := o.Client.CoreV1().ConfigMaps(r.Namespace()).Get(ctx, SpecName(r.Project), metav1.GetOptions{}); err == nil {
		t.Fatal("the spec was written although the host is too long")
	}
}

type captureReporter struct {
	logReporter
	mu   sync.Mutex
	warn *[]string
}

func (r *captureReporter) Logf(level event.Level, format string, args ...any) {
	r.logReporter.Logf(level, format, args...)
	if level == "warn" {
		r.mu.Lock()
		*r.warn = append(*r.warn, fmt.Sprintf(format, args...))
		r.mu.Unlock()
	}
}

func specJSON(t *testing.T, s Spec) string {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
