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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kilnctl/kiln/engine/event"
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
// kind: answering for 1 or 1,000 projects costs the same 7 requests. The
// routes are one LIST of kiln-system's Ingresses by label, whatever the
// number of tenants.
// Secrets are read as metadata only (an eighth LIST, never their data):
// the row of a project's Secret says whether it exists and which key it
// holds in force. A role that may not list Secrets sees every other row,
// and the Secret's as Unknown, "not permitted to read secrets".
type snapshot struct {
	specs []corev1.ConfigMap
	// secrets are the Secrets' metadata; secretsErr why they could not
	// be listed (then every Secret row is Unknown, saying so).
	secrets    map[string]*metav1.PartialObjectMetadata
	secretsErr error
	deps       map[string]*appsv1.Deployment
	svcs       map[string]*corev1.Service
	ings       map[string]*networkingv1.Ingress
	leases     map[string]*coordinationv1.Lease
	slices     map[string][]discoveryv1.EndpointSlice // by namespace/service
	pods       map[string][]corev1.Pod                // by namespace/project
}

func key(ns, name string) string { return ns + "/" + name }

// read lists the project objects in namespace ("" for every namespace)
// matching selector, and their routes in kiln-system (of tenant, when
// set).
//
// Every namespace is each tenant namespace of o.Config in turn, never a
// cluster-wide LIST: kiln's roles grant reading only in kiln's namespaces
// (docs/rbac-operator.yaml, docs/rbac-support.yaml).
func (o *Ops) read(ctx context.Context, namespace, tenant, selector string) (*snapshot, error) {
	if namespace == "" {
		var all *snapshot
		for _, t := range o.tenants() {
			s, err := o.read(ctx, Ref{Tenant: t}.Namespace(), tenant, selector)
			if o.notYet(ctx, Ref{Tenant: t}.Namespace(), err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			all = all.merge(s)
		}
		if all == nil {
			return newSnapshot(), nil
		}
		return all, nil
	}
	opts := metav1.ListOptions{LabelSelector: selector}
	routeOpts := opts
	if tenant != "" {
		routeOpts.LabelSelector += "," + LabelTenant + "=" + tenant
	}
	return o.readScope(ctx, namespace, scope{cms: opts, deps: opts, svcs: opts, ings: routeOpts, leases: opts, slices: opts, pods: opts, secrets: opts})
}

// scope is what each of a snapshot's LISTs asks for: the options of each
// kind's LIST (the routes' in kiln-system, the rest in one namespace).
type scope struct {
	cms, deps, svcs, ings, leases, slices, pods, secrets metav1.ListOptions
}

// readScope reads the snapshot of namespace that sc selects: eight LISTs,
// in parallel.
func (o *Ops) readScope(ctx context.Context, namespace string, sc scope) (*snapshot, error) {
	cs := o.Client
	s := newSnapshot()
	// The lists are independent: they run in parallel (one round trip of
	// latency, not seven), then are read in a fixed order.
	var (
		cms    *corev1.ConfigMapList
		deps   *appsv1.DeploymentList
		svcs   *corev1.ServiceList
		ings   *networkingv1.IngressList
		leases *coordinationv1.LeaseList
		slices *discoveryv1.EndpointSliceList
		pods   *corev1.PodList
		secs   *metav1.PartialObjectMetadataList
		errs   [8]error
		wg     sync.WaitGroup
	)
	list := func(i int, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f()
		}()
	}
	list(0, func() (err error) { cms, err = cs.CoreV1().ConfigMaps(namespace).List(ctx, sc.cms); return err })
	list(1, func() (err error) { deps, err = cs.AppsV1().Deployments(namespace).List(ctx, sc.deps); return err })
	list(2, func() (err error) { svcs, err = cs.CoreV1().Services(namespace).List(ctx, sc.svcs); return err })
	list(3, func() (err error) {
		ings, err = cs.NetworkingV1().Ingresses(platform.Namespace).List(ctx, sc.ings)
		return err
	})
	list(4, func() (err error) {
		leases, err = cs.CoordinationV1().Leases(namespace).List(ctx, sc.leases)
		return err
	})
	list(5, func() (err error) {
		slices, err = cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, sc.slices)
		return err
	})
	list(6, func() (err error) { pods, err = cs.CoreV1().Pods(namespace).List(ctx, sc.pods); return err })
	list(7, func() (err error) { secs, err = listSecretMetadata(ctx, cs, namespace, sc.secrets); return err })
	wg.Wait()
	wrap := func(what string, o metav1.ListOptions, err error) error {
		sel := o.LabelSelector
		if o.FieldSelector != "" {
			sel += "; " + o.FieldSelector
		}
		return fmt.Errorf("list %s (%s): %w", what, sel, err)
	}
	if err := errs[0]; err != nil {
		return nil, wrap("configmaps", sc.cms, err)
	}
	for _, cm := range cms.Items {
		if strings.HasPrefix(cm.Name, specPrefix) {
			s.specs = append(s.specs, cm)
		}
	}
	if err := errs[1]; err != nil {
		return nil, wrap("deployments", sc.deps, err)
	}
	for i := range deps.Items {
		x := &deps.Items[i]
		s.deps[key(x.Namespace, x.Name)] = x
	}
	if err := errs[2]; err != nil {
		return nil, wrap("services", sc.svcs, err)
	}
	for i := range svcs.Items {
		x := &svcs.Items[i]
		s.svcs[key(x.Namespace, x.Name)] = x
	}
	if err := errs[3]; err != nil {
		return nil, wrap("ingresses in "+platform.Namespace, sc.ings, err)
	}
	for i := range ings.Items {
		x := &ings.Items[i]
		s.ings[key(x.Namespace, x.Name)] = x
	}
	if err := errs[4]; err != nil {
		return nil, wrap("leases", sc.leases, err)
	}
	for i := range leases.Items {
		x := &leases.Items[i]
		s.leases[key(x.Namespace, x.Name)] = x
	}
	// EndpointSlices carry their Service's labels (the controller copies
	// them), so the same selector finds them.
	if err := errs[5]; err != nil {
		return nil, wrap("endpointslices", sc.slices, err)
	}
	for _, x := range slices.Items {
		k := key(x.Namespace, x.Labels[discoveryv1.LabelServiceName])
		s.slices[k] = append(s.slices[k], x)
	}
	if err := errs[6]; err != nil {
		return nil, wrap("pods", sc.pods, err)
	}
	for _, x := range pods.Items {
		k := key(x.Namespace, x.Labels[LabelProject])
		s.pods[k] = append(s.pods[k], x)
	}
	switch err := errs[7]; {
	case apierrors.IsForbidden(err):
		s.secretsErr = errors.New("not permitted to read secrets")
	case err != nil:
		return nil, wrap("secrets (metadata)", sc.secrets, err)
	default:
		for i := range secs.Items {
			x := &secs.Items[i]
			s.secrets[key(x.Namespace, x.Name)] = x
		}
	}
	return s, nil
}

func newSnapshot() *snapshot {
	return &snapshot{
		deps: map[string]*appsv1.Deployment{},
		svcs: map[string]*corev1.Service{}, ings: map[string]*networkingv1.Ingress{},
		leases: map[string]*coordinationv1.Lease{}, slices: map[string][]discoveryv1.EndpointSlice{},
		pods: map[string][]corev1.Pod{}, secrets: map[string]*metav1.PartialObjectMetadata{},
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
	maps.Copy(s.slices, t.slices)
	maps.Copy(s.pods, t.pods)
	return s
}

// listSecretMetadata lists Secrets as PartialObjectMetadata: names,
// labels and annotations, never their data (which kiln does not need to
// judge a project, and must not hold in memory to print a table).
func listSecretMetadata(ctx context.Context, cs kubernetes.Interface, namespace string, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	out := &metav1.PartialObjectMetadataList{}
	err := cs.CoreV1().RESTClient().Get().
		Namespace(namespace).Resource("secrets").
		VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").
		Do(ctx).Into(out)
	return out, err
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
	ns := ""
	if tenant != "" {
		if err := o.checkTenant(tenant); err != nil {
			return nil, err
		}
		ns = Ref{Tenant: tenant}.Namespace()
	}
	snap, err := o.read(ctx, ns, tenant, o.selector(""))
	if err != nil {
		return nil, err
	}
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
	return out, nil
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
		Created: cm.CreationTimestamp.Time, Pods: podInfos(snap.pods[key(ns, r.Project)]),
	}
	addIn := func(ns, kind, name string, obj runtime.Object, res readiness.Result) {
		if obj == nil {
			res = readiness.Result{Status: readiness.NotFound, Message: "not found"}
		}
		st.Objects = append(st.Objects, ObjectStatus{kind, ns, name, res.Status, res.Message})
	}
	add := func(kind, name string, obj runtime.Object, res readiness.Result) { addIn(ns, kind, name, obj, res) }
	reason := func(format string, args ...any) { st.Reasons = append(st.Reasons, fmt.Sprintf(format, args...)) }
	judge := func(kind string, obj runtime.Object) readiness.Result {
		res, err := readiness.Judge(kind, obj)
		if err != nil {
			return readiness.Result{Status: readiness.Failed, Message: err.Error()}
		}
		return res
	}
	add(readiness.KindConfigMap, cm.Name, cm, readiness.Result{Status: readiness.Current, Message: "desired " + spec.State + ", stack " + spec.Stack.Name})

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
	case sec.DeletionTimestamp != nil:
		secMissing = true
		secRes = readiness.Result{Status: readiness.Terminating, Message: "being deleted"}
	case !recorded:
		secRes = readiness.Result{Status: StatusUnrecorded, Message: "token in force not recorded (a project made by an older kiln); its next operation records it"}
	case sec.Annotations[AnnotationKey] != curKey:
		secRes = readiness.Result{Status: readiness.InProgress, Message: fmt.Sprintf("holds key %q in force, the spec records %q", sec.Annotations[AnnotationKey], curKey)}
	default:
		secRes = readiness.Result{Status: readiness.Current, Message: "token " + curKey}
	}
	st.Objects = append(st.Objects, ObjectStatus{readiness.KindSecret, ns, SecretName(r.Project), secRes.Status, secRes.Message})

	var depRes readiness.Result
	if dep != nil {
		depRes = judge(readiness.KindDeployment, dep)
	}
	add(readiness.KindDeployment, r.Project, objOrNil(dep), depRes)

	var svcRes readiness.Result
	if svc != nil {
		svcRes = judge(readiness.KindService, svc)
		if svcRes.Status == readiness.Current {
			n := readiness.CountReady(snap.slices[key(ns, r.Project)])
			if n == 0 {
				svcRes = readiness.Result{Status: readiness.InProgress, Message: "no ready endpoints"}
			} else {
				svcRes.Message = fmt.Sprintf("%d ready endpoint%s", n, map[bool]string{true: "", false: "s"}[n == 1])
			}
		}
	}
	add(readiness.KindService, r.Project, objOrNil(svc), svcRes)

	var ingRes readiness.Result
	drift := ""
	if ing != nil {
		ingRes = judge(readiness.KindIngress, ing)
		drift = o.routeDrift(r, ing)
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
	addIn(platform.Namespace, readiness.KindIngress, RouteName(r), objOrNil(ing), ingRes)

	st.TokenSync, st.TokenSyncReason = tokenSync(recorded, curKey, curHash, dep)
	if secMissing {
		st.TokenSync, st.TokenSyncReason = TokenUnknown, "secret "+SecretName(r.Project)+" is missing: no token is in force"
	}

	if l := snap.leases[key(ns, LeaseName(r.Project))]; l != nil && leaseHeld(l, o.now()) {
		st.Operation = lock.Who(*l.Spec.HolderIdentity)
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
	for _, b := range readiness.IngressBackends(ing) {
		if b != platform.GatewayName {
			return "backend svc/" + b + " is not " + platform.GatewayName + " (traffic would bypass the gateway's token check)"
		}
	}
	want := o.Host(r)
	for _, rule := range ing.Spec.Rules {
		if rule.Host != want {
			return fmt.Sprintf("host %q is not %s", rule.Host, want)
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
func tokenSync(recorded bool, curKey, curHash string, dep *appsv1.Deployment) (string, string) {
	switch {
	case dep == nil:
		return TokenUnknown, "no deployment runs a token"
	case !recorded:
		return TokenUnknown, "the token in force is not recorded on the spec (a project made by an older kiln): the next operation on it records it"
	case deploymentTokenKey(dep) != curKey:
		return TokenOutOfSync, fmt.Sprintf("the deployment mounts key %q, the key in force is %q", deploymentTokenKey(dep), curKey)
	case dep.Spec.Template.Annotations[AnnotationToken] != curHash:
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

func leaseHeld(l *coordinationv1.Lease, now time.Time) bool {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}

// podProblems reads pod statuses for what the Deployment's status does not
// say: containers crash looping or images that cannot be pulled.
func podProblems(pods []corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			w := cs.State.Waiting
			if w == nil {
				continue
			}
			var what string
			switch w.Reason {
			case "CrashLoopBackOff":
				what = "crash looping"
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				what = "image pull failing"
			default:
				continue
			}
			if !seen[what] {
				seen[what] = true
				out = append(out, fmt.Sprintf("%s (pod %s: %s)", what, p.Name, w.Reason))
			}
		}
	}
	return out
}

// EventType implements event.Payload: a project's observed state.
func (*Status) EventType() event.Type { return event.TypeProject }
