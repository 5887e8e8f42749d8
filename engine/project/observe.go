// Over 400 lines on purpose: one snapshot read and the derivation of every
// project state and reason from it (DESIGN.md §10) belong together, so a
// state is never computed from objects read at different times.

package project

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/kubeapi"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
)

// ObjectStatus is one live object of a project.
type ObjectStatus struct {
	Kind      string       `json:"kind"`
	Namespace string       `json:"namespace"`
	Name      string       `json:"name"`
	Status    event.Status `json:"status"`
	Message   string       `json:"message"`
}

// Status is a project's observed state, computed from its live objects.
type Status struct {
	Tenant    string   `json:"tenant"`
	Project   string   `json:"project"`
	Namespace string   `json:"namespace"`
	Stack     string   `json:"stack"`
	Host      string   `json:"host"`
	Desired   string   `json:"desired"`
	State     string   `json:"state"`
	Reasons   []string `json:"reasons"`
	// Operation is the holder of the project's lease while one runs.
	Operation string         `json:"operation,omitempty"`
	Objects   []ObjectStatus `json:"objects"`
	Revision  int64          `json:"revision"`
	// TokenSync says whether the Deployment runs the token in force (one of
	// the TokenSync* constants), judged from the live Deployment and what
	// kiln recorded on the spec ConfigMap: no Secret is read.
	TokenSync string `json:"token_sync"`
	// Pods are the statuses of the project's pods (restarts, last
	// termination), by name.
	Pods []PodInfo `json:"pods"`
	// Events are the Kubernetes Events of the project's objects and pods,
	// newest first (at most MaxEvents); only inspect reads them.
	Events []EventInfo `json:"events,omitempty"`
	// TokenSyncReason says why TokenSync is unknown or out of sync.
	TokenSyncReason string `json:"token_sync_reason,omitempty"`
	// Created is when the project's spec ConfigMap was created.
	Created time.Time `json:"-"`
}

// Token sync of a project (Status.TokenSync).
const (
	// TokenInSync: the Deployment references the Secret's token in force
	// and its pod template carries that token's hash.
	TokenInSync = "in-sync"
	// TokenOutOfSync: the Deployment runs another token than the one in
	// force, or the Secret holds no token in force.
	TokenOutOfSync = "out-of-sync"
	// TokenUnknown: there is no Deployment, so nothing runs a token; or
	// the spec ConfigMap does not record the token in force yet (a project
	// an older kiln made; its next operation records it).
	TokenUnknown = "unknown"
)

// snapshot is every project object of one scope, read with one LIST per
// kind (DefaultPageSize; past a page of Ops.PageSize objects when set,
// one more request per kind and page): answering for 1 or 10,000
// projects costs the same 8 requests. The routes are one LIST of
// kiln-system's Ingresses by label, whatever the number of tenants.
// Secrets are read as metadata only (never their data): the row of a
// project's Secret says whether it exists and which key it holds in
// force. A role that may not list Secrets sees every other row, and the
// Secret's as Unknown, "not permitted to read secrets".
//
// Each object is reduced as it is read: the snapshot keeps the spec
// ConfigMaps (without managedFields) and of every other object a row of
// what observe reads: a Deployment's, Service's or route's readiness
// (judged then) and the few strings it also reads, a pod's reported
// status and waiting reasons, a Secret's deletion and key, a Lease's
// holder and expiry, a ready count per Service instead of its
// EndpointSlices. Memory grows with the projects by about 3.5 KB each
// (11 KB with the trimmed objects before), and each decoded object is
// overwritten by the next.
type snapshot struct {
	specs []corev1.ConfigMap
	// secrets are the Secrets' metadata; secretsErr why they could not
	// be listed (then every Secret row is Unknown, saying so).
	secrets    map[string]*secRow
	secretsErr error
	deps       map[string]*depRow
	svcs       map[string]*svcRow
	ings       map[string]*ingRow
	leases     map[string]*leaseRow
	ready      map[string]int      // ready endpoints, by namespace/service
	pods       map[string][]podRow // by namespace/project
}

// The rows below are what observe reads of a Deployment, a Service and a
// route, computed as each page is read: the objects themselves are
// garbage with their page. At 10,000 projects the trimmed Deployments
// alone held about 3 KB each; a row holds a judgement and a few strings.

// depRow is a Deployment's readiness and the token its pods run.
type depRow struct {
	res       readiness.Result
	tokenKey  string // the Secret key its token volume mounts
	tokenHash string // the token hash on its pod template
}

func newDepRow(d *appsv1.Deployment) *depRow {
	return &depRow{res: judge(readiness.KindDeployment, d), tokenKey: deploymentTokenKey(d), tokenHash: d.Spec.Template.Annotations[AnnotationToken]}
}

// svcRow is a Service's readiness (before its endpoints are counted).
type svcRow struct{ res readiness.Result }

// ingRow is a route's readiness and what decides where its traffic goes.
type ingRow struct {
	res      readiness.Result
	backends []string // the Services of its backends
	hosts    []string // the hosts of its rules
}

func newIngRow(ing *networkingv1.Ingress) *ingRow {
	x := routeOf(ing)
	x.res = judge(readiness.KindIngress, ing)
	return x
}

// routeOf is where ing sends traffic (a row without a judgement).
func routeOf(ing *networkingv1.Ingress) *ingRow {
	x := &ingRow{backends: readiness.IngressBackends(ing)}
	for _, rule := range ing.Spec.Rules {
		x.hosts = append(x.hosts, rule.Host)
	}
	return x
}

// secRow is what observe reads of a project's Secret (never its data):
// whether it is being deleted and the key it holds in force.
type secRow struct {
	deleting bool
	key      string
}

// leaseRow is who holds a project's Lease, and until when.
type leaseRow struct {
	holder string
	until  time.Time // zero: not held (no holder, renewal or duration)
}

func newLeaseRow(l *coordinationv1.Lease) *leaseRow {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return &leaseRow{}
	}
	return &leaseRow{holder: *s.HolderIdentity, until: s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)}
}

// judge is readiness.Judge, its error a Failed result.
func judge(kind string, obj runtime.Object) readiness.Result {
	res, err := readiness.Judge(kind, obj)
	if err != nil {
		return readiness.Result{Status: readiness.Failed, Message: err.Error()}
	}
	return res
}

func key(ns, name string) string { return ns + "/" + name }

// DefaultPageSize is how many objects each of a snapshot's LISTs asks for
// at a time (limit and continue) unless Ops.PageSize says otherwise: 0,
// every object of a kind in one LIST, read and decoded as it arrives
// (protoItems), so kiln's memory does not grow with the answer. Pages
// cost the API server more than the objects they hold: it serves a
// consistent LIST from its watch cache, but the pages after the first
// from etcd whenever the cache holds no snapshot at the first page's
// revision (it takes one only on a change of that kind, and none in its
// first minutes), decoding and converting every object again. At 2,000
// projects, pages of 1,000 cost the API server 350-450 ms of CPU and etcd
// 50 ms per `project list`, one LIST per kind 200-290 ms and 6-8 ms
// (docs/benchmarks.md). The number of requests stays one per kind and
// tenant whatever the number of projects.
const DefaultPageSize = 0

func (o *Ops) pageSize() int64 {
	if o.PageSize > 0 {
		return o.PageSize
	}
	return DefaultPageSize
}

// read lists the project objects in namespace ("" for every namespace)
// matching selector, and their routes in kiln-system (of tenant, when
// set).
//
// Every namespace is each tenant namespace of o.Config in turn, never a
// cluster-wide LIST: kiln's roles grant reading only in kiln's namespaces
// (docs/rbac-operator.yaml, docs/rbac-support.yaml).
func (o *Ops) read(ctx context.Context, namespace, tenant, selector string) (*snapshot, error) {
	opts := metav1.ListOptions{LabelSelector: selector}
	routeOpts := opts
	if tenant != "" {
		routeOpts.LabelSelector += "," + LabelTenant + "=" + tenant
	}
	if namespace != "" {
		return o.readScope(ctx, namespace, scope{cms: opts, deps: opts, svcs: opts, ings: &routeOpts, leases: opts, slices: opts, pods: opts, secrets: opts})
	}
	// Every tenant's namespace, side by side, and the routes of them all
	// with one LIST of kiln-system beside them (not one per tenant: each
	// would answer with every tenant's routes).
	ts := o.tenants()
	snaps := make([]*snapshot, len(ts))
	errs := make([]error, len(ts))
	var routes *snapshot
	var routesErr error
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			ns := Ref{Tenant: t}.Namespace()
			s, err := o.readScope(ctx, ns, scope{cms: opts, deps: opts, svcs: opts, leases: opts, slices: opts, pods: opts, secrets: opts})
			if o.notYet(ctx, ns, err) {
				return
			}
			snaps[i], errs[i] = s, err
		})
	}
	if len(ts) > 0 {
		wg.Go(func() { routes, routesErr = o.readScope(ctx, "", scope{ings: &routeOpts}) })
	}
	wg.Wait()
	var all *snapshot
	for i := range ts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if snaps[i] != nil {
			all = all.merge(snaps[i])
		}
	}
	if all == nil {
		return newSnapshot(), nil
	}
	if routesErr != nil {
		return nil, routesErr
	}
	return all.merge(routes), nil
}

// scope is what each of a snapshot's LISTs asks for: the options of each
// kind's LIST (the routes' in kiln-system, the rest in one namespace).
// With namespace "" only the routes are read; with ings nil, no routes.
type scope struct {
	cms, deps, svcs, leases, slices, pods, secrets metav1.ListOptions
	ings                                           *metav1.ListOptions
}

// pages lists with opts size objects at a time (all at once when size is
// 0), following the continue token: list reads one LIST, handing on its
// objects as it decodes them, and returns its list metadata. A continue
// token that expired (410: the read took longer than the API server
// keeps its snapshot) starts over with one unpaginated LIST, after reset
// drops what the pages gave so far, as kubectl does. An answer cut short
// (kubeapi.CutError: the API server gone in the middle of it) starts the
// whole read over the same way, as kiln's transport retries any other
// failed request (kubeapi.RetryCut).
func pages(ctx context.Context, opts metav1.ListOptions, size int64, list func(context.Context, metav1.ListOptions) (*metav1.ListMeta, error), reset func()) error {
	tries := 0
	return kubeapi.RetryCut(ctx, func() error {
		if tries++; tries > 1 {
			reset()
		}
		opts := opts
		opts.Limit = size
		for {
			l, err := list(ctx, opts)
			if err != nil && opts.Continue != "" && apierrors.IsResourceExpired(err) {
				reset()
				opts.Limit, opts.Continue = 0, ""
				l, err = list(ctx, opts)
			}
			if err != nil {
				return err
			}
			if opts.Continue = l.GetContinue(); opts.Continue == "" || opts.Limit == 0 {
				return nil
			}
		}
	})
}

// readScope reads the snapshot of namespace that sc selects: eight
// paginated LISTs (seven without routes, one for the routes only), the
// kinds in parallel, each kind's pages one after another.
func (o *Ops) readScope(ctx context.Context, namespace string, sc scope) (*snapshot, error) {
	cs := o.Client
	size := o.pageSize()
	s := newSnapshot()
	// The kinds are independent: they run in parallel (one round trip of
	// latency per page, not per kind), each filling its own part of s,
	// then the errors are read in a fixed order.
	var (
		errs [8]error
		wg   sync.WaitGroup
	)
	list := func(i int, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f()
		}()
	}
	if sc.ings != nil {
		list(3, func() error {
			return pages(ctx, *sc.ings, size, protoItems(cs.NetworkingV1().RESTClient(), platform.Namespace, "ingresses", ingressItems, func(x *networkingv1.Ingress) {
				s.ings[key(x.Namespace, x.Name)] = newIngRow(x)
			}), func() { clear(s.ings) })
		})
	}
	if namespace == "" {
		// The routes only (read's one LIST of them for every tenant).
		wg.Wait()
		if err := errs[3]; err != nil {
			return nil, fmt.Errorf("list ingresses in %s (%s): %w", platform.Namespace, sc.ings.LabelSelector, err)
		}
		return s, nil
	}
	list(0, func() error {
		return pages(ctx, sc.cms, size, protoItems(cs.CoreV1().RESTClient(), namespace, "configmaps", configMapItems, func(cm *corev1.ConfigMap) {
			if strings.HasPrefix(cm.Name, specPrefix) {
				cm.ManagedFields = nil // left out already when read as protobuf
				s.specs = append(s.specs, *cm)
			}
		}), func() { s.specs = nil })
	})
	list(1, func() error {
		return pages(ctx, sc.deps, size, protoItems(cs.AppsV1().RESTClient(), namespace, "deployments", deploymentItems, func(x *appsv1.Deployment) {
			s.deps[key(x.Namespace, x.Name)] = newDepRow(x)
		}), func() { clear(s.deps) })
	})
	list(2, func() error {
		return pages(ctx, sc.svcs, size, protoItems(cs.CoreV1().RESTClient(), namespace, "services", serviceItems, func(x *corev1.Service) {
			s.svcs[key(x.Namespace, x.Name)] = &svcRow{res: judge(readiness.KindService, x)}
		}), func() { clear(s.svcs) })
	})
	list(4, func() error {
		return pages(ctx, sc.leases, size, protoItems(cs.CoordinationV1().RESTClient(), namespace, "leases", leaseItems, func(y *coordinationv1.Lease) {
			s.leases[key(y.Namespace, y.Name)] = newLeaseRow(y)
		}), func() { clear(s.leases) })
	})
	// EndpointSlices carry their Service's labels (the controller copies
	// them), so the same selector finds them; of each, only its ready
	// endpoints are kept, counted by Service.
	list(5, func() error {
		return pages(ctx, sc.slices, size, protoItems(cs.DiscoveryV1().RESTClient(), namespace, "endpointslices", endpointSliceItems, func(x *discoveryv1.EndpointSlice) {
			k := key(x.Namespace, x.Labels[discoveryv1.LabelServiceName])
			s.ready[k] += readiness.CountReady([]discoveryv1.EndpointSlice{*x})
		}), func() { clear(s.ready) })
	})
	list(6, func() error {
		return pages(ctx, sc.pods, size, protoItems(cs.CoreV1().RESTClient(), namespace, "pods", podItems, func(x *corev1.Pod) {
			k := key(x.Namespace, x.Labels[LabelProject])
			s.pods[k] = append(s.pods[k], newPodRow(x))
		}), func() { clear(s.pods) })
	})
	list(7, func() error {
		return pages(ctx, sc.secrets, size, protoItems(cs.CoreV1().RESTClient(), namespace, "secrets", secretMetadataItems, func(y *metav1.PartialObjectMetadata) {
			s.secrets[key(y.Namespace, y.Name)] = &secRow{deleting: y.DeletionTimestamp != nil, key: y.Annotations[AnnotationKey]}
		}), func() { clear(s.secrets) })
	})
	wg.Wait()
	wrap := func(what string, o metav1.ListOptions, err error) error {
		sel := o.LabelSelector
		if o.FieldSelector != "" {
			sel += "; " + o.FieldSelector
		}
		return fmt.Errorf("list %s (%s): %w", what, sel, err)
	}
	ings := metav1.ListOptions{}
	if sc.ings != nil {
		ings = *sc.ings
	}
	for i, what := range []struct {
		name string
		opts metav1.ListOptions
	}{
		{"configmaps", sc.cms}, {"deployments", sc.deps}, {"services", sc.svcs},
		{"ingresses in " + platform.Namespace, ings}, {"leases", sc.leases},
		{"endpointslices", sc.slices}, {"pods", sc.pods},
	} {
		if errs[i] != nil {
			return nil, wrap(what.name, what.opts, errs[i])
		}
	}
	switch err := errs[7]; {
	case apierrors.IsForbidden(err):
		clear(s.secrets)
		s.secretsErr = errors.New("not permitted to read secrets")
	case err != nil:
		return nil, wrap("secrets (metadata)", sc.secrets, err)
	}
	return s, nil
}

func newSnapshot() *snapshot {
	return &snapshot{
		deps: map[string]*depRow{},
		svcs: map[string]*svcRow{}, ings: map[string]*ingRow{},
		leases: map[string]*leaseRow{}, ready: map[string]int{},
		pods: map[string][]podRow{}, secrets: map[string]*secRow{},
	}
}

// notYet says whether err, from reading namespace ns, only means that ns
// does not exist yet (a tenant an upgrade is adding): kiln's roles may
// read only in namespaces kiln made, so reading one that is not there is
// refused, not empty.
func (o *Ops) notYet(ctx context.Context, ns string, err error) bool {
	if err == nil || !apierrors.IsForbidden(err) {
		return false
	}
	_, gerr := o.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	return apierrors.IsNotFound(gerr)
}

// allTenants are the tenants of o.Config and those of every other
// namespace labelled as a tenant namespace of this cluster (a tenant an
// upgrade is removing), sorted: one LIST of namespaces.
func (o *Ops) allTenants(ctx context.Context) ([]string, error) {
	list, err := o.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=kiln," + LabelCluster + "=" + o.Cluster})
	if err != nil {
		return nil, fmt.Errorf("list namespaces of cluster %s: %w", o.Cluster, err)
	}
	seen := map[string]bool{}
	out := o.tenants()
	for _, t := range out {
		seen[t] = true
	}
	for _, ns := range list.Items {
		if t, ok := strings.CutPrefix(ns.Name, Ref{}.Namespace()); ok && t != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out, nil
}

// tenants are the tenants of o.Config, sorted.
func (o *Ops) tenants() []string {
	if o.Config == nil {
		return nil
	}
	out := append([]string(nil), o.Config.Spec.Tenants...)
	sort.Strings(out)
	return out
}

// merge adds t's objects (another namespace's) to s; a nil s is t.
func (s *snapshot) merge(t *snapshot) *snapshot {
	if s == nil {
		return t
	}
	s.specs = append(s.specs, t.specs...)
	if s.secretsErr == nil {
		s.secretsErr = t.secretsErr
	}
	maps.Copy(s.secrets, t.secrets)
	maps.Copy(s.deps, t.deps)
	maps.Copy(s.svcs, t.svcs)
	maps.Copy(s.ings, t.ings)
	maps.Copy(s.leases, t.leases)
	maps.Copy(s.ready, t.ready)
	maps.Copy(s.pods, t.pods)
	return s
}

func (o *Ops) selector(project string) string {
	sel := LabelCluster + "=" + o.Cluster
	if project != "" {
		return sel + "," + LabelProject + "=" + project
	}
	return sel + "," + LabelProject
}

// Inspect computes one project's observed state from its live objects.
func (o *Ops) Inspect(ctx context.Context, r Ref) (*Status, error) {
	if _, err := o.precheck(ctx, r, true); err != nil {
		return nil, err
	}
	snap, err := o.read(ctx, r.Namespace(), r.Tenant, o.selector(r.Project))
	if err != nil {
		return nil, err
	}
	for _, cm := range snap.specs {
		if cm.Name == SpecName(r.Project) {
			st, err := o.observe(snap, &cm)
			if err != nil {
				return nil, err
			}
			if st.Events, err = o.events(ctx, r); err != nil {
				return nil, err
			}
			return st, nil
		}
	}
	return nil, fmt.Errorf("project %s: spec ConfigMap vanished while reading", r)
}

// List computes the observed state of every project (of tenant, if given),
// from a constant number of LIST requests.
func (o *Ops) List(ctx context.Context, tenant string) ([]Status, error) {
	return o.Prefetch(ctx, tenant)()
}

// Prefetch starts List's reads now, in the background (status reads the
// platform's objects meanwhile), and returns List's answer: a function
// that waits for the reads and derives the states from them, reporting
// then what List reports. Ending ctx stops the reads.
func (o *Ops) Prefetch(ctx context.Context, tenant string) func() ([]Status, error) {
	ns := ""
	if tenant != "" {
		if err := o.checkTenant(tenant); err != nil {
			return func() ([]Status, error) { return nil, err }
		}
		ns = Ref{Tenant: tenant}.Namespace()
	}
	var (
		snap *snapshot
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		snap, err = o.read(ctx, ns, tenant, o.selector(""))
	}()
	return func() ([]Status, error) {
		<-done
		if err != nil {
			return nil, err
		}
		return o.observeAll(snap), nil
	}
}

// observeAll derives every project's state from snap, in List's order.
func (o *Ops) observeAll(snap *snapshot) []Status {
	out := make([]Status, 0, len(snap.specs))
	for i := range snap.specs {
		st, err := o.observe(snap, &snap.specs[i])
		if err != nil {
			// One spec kiln cannot trust (planted, corrupt) must not hide
			// every other project: it is skipped and named.
			o.R.Logf(event.LevelWarn, "skipped: %v", err)
			continue
		}
		out = append(out, *st)
	}
	Sort(out)
	return out
}

// Sort puts projects in List's order: by tenant, then project.
func Sort(ps []Status) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Tenant != ps[j].Tenant {
			return ps[i].Tenant < ps[j].Tenant
		}
		return ps[i].Project < ps[j].Project
	})
}

// observe derives the state of the project whose spec is cm.
func (o *Ops) observe(snap *snapshot, cm *corev1.ConfigMap) (*Status, error) {
	spec, err := decodeSpec(cm)
	if err != nil {
		return nil, err
	}
	r := Ref{Tenant: spec.Tenant, Project: spec.Project}
	ns := cm.Namespace
	st := &Status{
		Tenant: r.Tenant, Project: r.Project, Namespace: ns, Stack: spec.Stack.Name,
		Host: o.Host(r), Desired: spec.State, Revision: spec.Revision, Reasons: []string{},
		Created: cm.CreationTimestamp.Time, Pods: rowInfos(snap.pods[key(ns, r.Project)]),
	}
	addIn := func(ns, kind, name string, present bool, res readiness.Result) {
		if !present {
			res = readiness.Result{Status: readiness.NotFound, Message: "not found"}
		}
		st.Objects = append(st.Objects, ObjectStatus{kind, ns, name, res.Status, res.Message})
	}
	add := func(kind, name string, present bool, res readiness.Result) { addIn(ns, kind, name, present, res) }
	reason := func(format string, args ...any) { st.Reasons = append(st.Reasons, fmt.Sprintf(format, args...)) }
	add(readiness.KindConfigMap, cm.Name, true, readiness.Result{Status: readiness.Current, Message: "desired " + spec.State + ", stack " + spec.Stack.Name})

	dep := snap.deps[key(ns, r.Project)]
	svc := snap.svcs[key(ns, r.Project)]
	ing := snap.ings[key(platform.Namespace, RouteName(r))]

	// The Secret's row is its live metadata (never its data): present,
	// and holding in force the key kiln recorded on the spec.
	curKey, curHash := cm.Annotations[AnnotationSpecKey], cm.Annotations[AnnotationToken]
	recorded := curKey != "" && curHash != ""
	sec, secMissing := snap.secrets[key(ns, SecretName(r.Project))], false
	var secRes readiness.Result
	switch {
	case snap.secretsErr != nil:
		secRes = readiness.Result{Status: StatusUnrecorded, Message: snap.secretsErr.Error()}
	case sec == nil:
		secMissing = true
		secRes = readiness.Result{Status: readiness.NotFound, Message: "not found"}
	case sec.deleting:
		secMissing = true
		secRes = readiness.Result{Status: readiness.Terminating, Message: "being deleted"}
	case !recorded:
		secRes = readiness.Result{Status: StatusUnrecorded, Message: "token in force not recorded (a project made by an older kiln); its next operation records it"}
	case sec.key != curKey:
		secRes = readiness.Result{Status: readiness.InProgress, Message: fmt.Sprintf("holds key %q in force, the spec records %q", sec.key, curKey)}
	default:
		secRes = readiness.Result{Status: readiness.Current, Message: "token " + curKey}
	}
	st.Objects = append(st.Objects, ObjectStatus{readiness.KindSecret, ns, SecretName(r.Project), secRes.Status, secRes.Message})

	var depRes readiness.Result
	if dep != nil {
		depRes = dep.res
	}
	add(readiness.KindDeployment, r.Project, dep != nil, depRes)

	var svcRes readiness.Result
	if svc != nil {
		svcRes = svc.res
		if svcRes.Status == readiness.Current {
			n := snap.ready[key(ns, r.Project)]
			if n == 0 {
				svcRes = readiness.Result{Status: readiness.InProgress, Message: "no ready endpoints"}
			} else {
				svcRes.Message = fmt.Sprintf("%d ready endpoint%s", n, map[bool]string{true: "", false: "s"}[n == 1])
			}
		}
	}
	add(readiness.KindService, r.Project, svc != nil, svcRes)

	var ingRes readiness.Result
	drift := ""
	if ing != nil {
		ingRes = ing.res
		drift = o.drift(r, ing)
		switch {
		case drift != "":
			ingRes = readiness.Result{Status: readiness.InProgress, Message: drift}
		case ingRes.Status != readiness.Current:
		case svcRes.Status != readiness.Current:
			// The gateway is the route's backend; the project behind it
			// must be ready too (the route's upstream), or a Current
			// route would front a dead project.
			ingRes = readiness.Result{Status: readiness.InProgress, Message: "upstream svc/" + ns + "/" + r.Project + " has " + svcRes.Message}
		default:
			ingRes.Message = "host " + o.Host(r) + " via " + platform.GatewayName
		}
	}
	addIn(platform.Namespace, readiness.KindIngress, RouteName(r), ing != nil, ingRes)

	st.TokenSync, st.TokenSyncReason = tokenSync(recorded, curKey, curHash, dep)
	if secMissing {
		st.TokenSync, st.TokenSyncReason = TokenUnknown, "secret "+SecretName(r.Project)+" is missing: no token is in force"
	}

	if l := snap.leases[key(ns, LeaseName(r.Project))]; l != nil && o.now().Before(l.until) {
		st.Operation = lock.Who(l.holder)
	}
	busy := st.Operation != ""

	if spec.State == DesiredSuspended {
		var left []string
		for _, x := range []struct {
			name    string
			present bool
		}{{"route", ing != nil}, {"service", svc != nil}, {"deployment", dep != nil}} {
			if x.present {
				left = append(left, x.name)
			}
		}
		switch {
		case len(left) == 0:
			st.State = StateSuspended
		case busy:
			st.State = StateSuspending
			reason("still present: %s", strings.Join(left, ", "))
		default:
			st.State = StateDegraded
			reason("desired state suspended but still present: %s", strings.Join(left, ", "))
		}
		return st, nil
	}

	// Desired running.
	rolling := false
	if secMissing && !busy {
		reason("secret %s missing (the project's token; pods keep the copy they mounted until they restart)", SecretName(r.Project))
	}
	switch {
	case dep == nil:
		reason("deployment missing")
	default:
		switch depRes.Status {
		case readiness.Failed:
			reason("deployment failed: %s", depRes.Message)
		case readiness.InProgress, readiness.Terminating:
			rolling = true
		}
		if st.TokenSync == TokenOutOfSync && !busy {
			reason("token out of sync")
		}
		for _, p := range podProblems(snap.pods[key(ns, r.Project)]) {
			reason("%s", p)
		}
	}
	switch {
	case svc == nil:
		reason("service missing")
	case svcRes.Status != readiness.Current && !(rolling && dep != nil):
		reason("no ready endpoints")
	}
	switch {
	case ing == nil:
		reason("route missing")
	case drift != "":
		reason("route drifted: %s", drift)
	}
	switch {
	case len(st.Reasons) == 0 && !rolling:
		st.State = StateRunning
	case dep != nil && depRes.Status == readiness.Failed:
		st.State = StateFailed
	case busy:
		st.State = StateStarting
	case len(st.Reasons) == 0 && rolling:
		st.State = StateStarting
	case dep == nil && svc == nil && ing == nil:
		st.State = StateFailed
		reason("nothing is running: run `%s`", o.command("start", r))
	default:
		st.State = StateDegraded
	}
	return st, nil
}

// routeDrift says how a live route differs from what kiln makes in what
// decides where traffic goes: its backend must be kiln-gateway (which
// checks the tenant token) and its host P.T.DOMAIN; "" when it does not
// differ.
func (o *Ops) routeDrift(r Ref, ing *networkingv1.Ingress) string {
	return o.drift(r, routeOf(ing))
}

// drift is routeDrift of a route already read into a row.
func (o *Ops) drift(r Ref, ing *ingRow) string {
	for _, b := range ing.backends {
		if b != platform.GatewayName {
			return "backend svc/" + b + " is not " + platform.GatewayName + " (traffic would bypass the gateway's token check)"
		}
	}
	want := o.Host(r)
	for _, h := range ing.hosts {
		if h != want {
			return fmt.Sprintf("host %q is not %s", h, want)
		}
	}
	return ""
}

// StatusUnrecorded is the status of a project's Secret row when the spec
// ConfigMap records no token in force.
const StatusUnrecorded = "Unknown"

// tokenSync judges whether dep runs the token in force: the Secret key and
// token hash kiln recorded on the spec ConfigMap when it last made a key
// the one in force. Without a Deployment nothing runs a token, and without
// a record nothing says which token is in force: unknown, never claimed in
// sync.
func tokenSync(recorded bool, curKey, curHash string, dep *depRow) (string, string) {
	switch {
	case dep == nil:
		return TokenUnknown, "no deployment runs a token"
	case !recorded:
		return TokenUnknown, "the token in force is not recorded on the spec (a project made by an older kiln): the next operation on it records it"
	case dep.tokenKey != curKey:
		return TokenOutOfSync, fmt.Sprintf("the deployment mounts key %q, the key in force is %q", dep.tokenKey, curKey)
	case dep.tokenHash != curHash:
		return TokenOutOfSync, "the deployment's token hash differs from the token in force"
	}
	return TokenInSync, ""
}

// objOrNil keeps a typed nil pointer from becoming a non-nil interface.
func objOrNil[T runtime.Object](x T) runtime.Object {
	var zero T
	if any(x) == any(zero) {
		return nil
	}
	return x
}

// podProblems reads pod statuses for what the Deployment's status does not
// say: containers crash looping or images that cannot be pulled.
func podProblems(pods []podRow) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		for _, reason := range p.waits {
			var what string
			switch reason {
			case "CrashLoopBackOff":
				what = "crash looping"
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				what = "image pull failing"
			default:
				continue
			}
			if !seen[what] {
				seen[what] = true
				out = append(out, fmt.Sprintf("%s (pod %s: %s)", what, p.info.Name, reason))
			}
		}
	}
	return out
}

// EventType implements event.Payload: a project's observed state.
func (*Status) EventType() event.Type { return event.TypeProject }
