package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/kilnctl/kiln/engine/bundle"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/internal/human"
)

// SupportBundleRequest writes a support bundle of cluster Name.
type SupportBundleRequest struct {
	Target
	// Project (TENANT/PROJECT) narrows the tenant part of the bundle to
	// one project; "" takes every tenant's projects.
	Project string
	// File is where the .tar.gz goes (default DefaultBundleFile in the
	// current directory).
	File string
	// KilnVersion is this kiln's version, recorded in versions.json.
	KilnVersion string
	// Encode writes one event as the frontend's NDJSON printer does (the
	// schema of DESIGN.md §8 is the CLI's): the bundle's discovery.ndjson
	// holds this run's discovery events so encoded. nil leaves the file
	// empty.
	Encode func(Event) ([]byte, error)
}

// DefaultBundleFile is the bundle's default file name.
func DefaultBundleFile(name string, now time.Time) string {
	return fmt.Sprintf("kiln-support-%s-%s.tar.gz", name, now.UTC().Format("20060102T150405Z"))
}

// SupportBundle writes one .tar.gz a support engineer can attach to a
// ticket (see engine/bundle): versions, this run's discovery, kiln-config,
// the trusted key ids, every platform and project object with its events,
// pod statuses and bounded logs, Leases, and index.txt. It reads only, and
// what it may not read (a read-only role and Secrets) is listed in
// problems.txt instead of failing. It returns the file written.
func (e *Engine) SupportBundle(ctx context.Context, req SupportBundleRequest) (string, error) {
	ctx = e.traced(ctx)
	file, n, err := e.supportBundle(ctx, req)
	return file, e.finish(err, fmt.Sprintf("support bundle written to %s (%d files)", file, n), "")
}

// recordingSink keeps the events an operation emits and passes them on.
type recordingSink struct {
	mu   sync.Mutex
	next Sink
	evs  []Event
}

func (r *recordingSink) Emit(ev Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
	if r.next != nil {
		r.next.Emit(ev)
	}
}

func (e *Engine) supportBundle(ctx context.Context, req SupportBundleRequest) (string, int, error) {
	if err := config.ValidateName(req.Name); err != nil {
		return "", 0, err
	}
	var ref project.Ref
	if req.Project != "" {
		t, p, err := config.ValidateProjectRef(req.Project)
		if err != nil {
			return "", 0, err
		}
		ref = project.Ref{Tenant: t, Project: p}
	}
	now := e.now()
	file := req.File
	if file == "" {
		file = DefaultBundleFile(req.Name, now)
	}
	if abs, err := filepath.Abs(file); err == nil {
		file = abs
	}

	rec := &recordingSink{next: e.Sink}
	sub := *e
	sub.Sink = rec
	loc, _, err := sub.locate(ctx, req.Target, false)
	if err != nil {
		return file, 0, err
	}
	b, err := bundle.Create(file, strings.TrimSuffix(filepath.Base(file), ".tar.gz"), now)
	if err != nil {
		return file, 0, err
	}
	if err := e.fillBundle(ctx, b, req, ref, loc, rec); err != nil {
		b.Abort()
		return file, 0, err
	}
	if len(b.Problems) > 0 {
		e.logf(LevelWarn, "support bundle: %d thing%s could not be collected (see problems.txt in the bundle): %s", len(b.Problems), human.Plural(len(b.Problems)), b.Problems[0])
	}
	if err := b.Close(); err != nil {
		return file, 0, err
	}
	return file, b.Files(), nil
}

func (e *Engine) fillBundle(ctx context.Context, b *bundle.Bundle, req SupportBundleRequest, ref project.Ref, loc Location, rec *recordingSink) error {
	cs := loc.Client
	st := loc.State
	if st == nil {
		st = &platform.State{}
	}
	versions := map[string]string{"kiln": req.KilnVersion, "go": runtime.Version(), "os_arch": runtime.GOOS + "/" + runtime.GOARCH}
	if v, err := cs.Discovery().ServerVersion(); err != nil {
		b.Problem("API server version: %v", err)
	} else {
		versions["api_server"] = v.GitVersion
	}
	add := []struct {
		name, what string
		v          any
	}{
		{"versions.json", "kiln's (go, os/arch) and the API server's versions", versions},
		{"cluster.json", "which cluster this is: provider, name, location, infrastructure, platform", map[string]any{
			"provider": req.Provider.Name(), "name": req.Name, "location": loc.Name, "infra": loc.Infra,
			"platform_installed": st.Installed, "namespace_exists": st.NamespaceExists, "project": req.Project,
		}},
		{"key-ids.json", "ids of the signing keys the cluster trusts (kiln-auth; never the keys)", st.KeyIDs()},
	}
	for _, a := range add {
		if err := b.AddJSON(a.name, a.what, a.v); err != nil {
			return err
		}
	}
	rec.mu.Lock()
	var disc []byte
	for _, ev := range rec.evs {
		if req.Encode == nil {
			break
		}
		line, err := req.Encode(ev)
		if err == nil {
			disc = append(append(disc, line...), '\n')
		}
	}
	rec.mu.Unlock()
	if err := b.Add("discovery.ndjson", "this run's discovery: the events of finding the cluster (NDJSON, as -o json)", disc); err != nil {
		return err
	}
	if st.ConfigRaw != "" {
		if err := b.Add("kiln-config.yaml", "the platform's recorded cluster config (ConfigMap kiln-system/kiln-config)", []byte(st.ConfigRaw)); err != nil {
			return err
		}
	} else {
		b.Problem("kiln-config: not installed")
	}

	// Namespaces of the cluster: the platform's and its tenants'. Only
	// kiln's objects go in: those labelled as made by kiln for this
	// cluster (a tenant's own ConfigMaps, pods and logs never do).
	kilns := platform.LabelManagedBy + "=kiln," + platform.LabelCluster + "=" + req.Name
	nsList, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: kilns})
	if err != nil {
		b.Problem("list namespaces of cluster %s: %v", req.Name, err)
		nsList = &corev1.NamespaceList{}
	}
	namespaces := map[string]bool{platform.Namespace: true}
	for i := range nsList.Items {
		ns := bundle.Sanitize(&nsList.Items[i]).(*corev1.Namespace)
		namespaces[ns.Name] = true
		if err := b.AddJSON("objects/"+ns.Name+"/Namespace.json", "Namespace "+ns.Name, ns); err != nil {
			return err
		}
	}
	if st.Config != nil {
		for _, t := range st.Config.Spec.Tenants {
			namespaces[config.TenantNamespace(t)] = true
		}
	}
	var scopes []bundle.Scope
	redactAuth := func(o k8sruntime.Object) k8sruntime.Object {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == platform.AuthName {
			cm.Data = map[string]string{"key_ids": strings.Join(st.KeyIDs(), ",")}
			cm.BinaryData = nil
		}
		return o
	}
	// The values of kiln's own ConfigMaps (kiln-auth is reduced to its key
	// ids below); any other ConfigMap, even one labelled as kiln's, is its
	// key names only.
	platformKeys := func(name string) []string {
		if name == platform.ConfigMapName {
			return []string{platform.ConfigKey}
		}
		return nil
	}
	tenantKeys := func(name string) []string {
		if strings.HasPrefix(name, project.SpecName("")) {
			return []string{project.SpecKey}
		}
		return nil
	}
	scopes = append(scopes, bundle.Scope{Namespace: platform.Namespace, Selector: kilns, Redact: redactAuth, ConfigMapKeys: platformKeys})
	if req.Project != "" {
		scopes = append(scopes, bundle.Scope{Namespace: ref.Namespace(), Selector: kilns + "," + project.LabelProject + "=" + ref.Project,
			Event: func(kind, name string) bool { return project.Owns(ref.Project, kind, name) }, ConfigMapKeys: tenantKeys})
	} else {
		names := make([]string, 0, len(namespaces))
		for ns := range namespaces {
			if ns != platform.Namespace {
				names = append(names, ns)
			}
		}
		sort.Strings(names)
		for _, ns := range names {
			scopes = append(scopes, bundle.Scope{Namespace: ns, Selector: kilns, ConfigMapKeys: tenantKeys})
		}
	}
	for _, s := range scopes {
		if err := b.Collect(ctx, cs, s, bundle.DefaultLimits); err != nil {
			return err
		}
	}

	// Projects' observed states, and Leases: who holds what since when.
	if st.Installed && st.Config != nil {
		ops := e.opsFor(loc, req.Target, 0)
		var projects []ProjectStatus
		if req.Project != "" {
			p, err := ops.Inspect(ctx, ref)
			if err != nil {
				b.Problem("inspect project %s: %v", req.Project, err)
			} else {
				projects = []ProjectStatus{*p}
			}
		} else if projects, err = ops.List(ctx, ""); err != nil {
			b.Problem("list projects: %v", err)
		}
		if projects != nil {
			if err := b.AddJSON("projects.json", "every project's observed state, as kiln project inspect/list computes it", projects); err != nil {
				return err
			}
		}
	}
	var leases []map[string]any
	for _, s := range scopes {
		list, err := cs.CoordinationV1().Leases(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.Selector})
		if err != nil {
			b.Problem("list leases in %s: %v", s.Namespace, err)
			continue
		}
		for _, l := range list.Items {
			leases = append(leases, leaseSummary(&l))
		}
	}
	return b.AddJSON("leases.json", "kiln's Leases (locks): holder, acquired, renewed, duration", leases)
}

func leaseSummary(l *coordinationv1.Lease) map[string]any {
	m := map[string]any{"namespace": l.Namespace, "name": l.Name}
	s := l.Spec
	if s.HolderIdentity != nil {
		m["holder"] = *s.HolderIdentity
	}
	if s.AcquireTime != nil {
		m["acquired"] = s.AcquireTime.UTC().Format(time.RFC3339)
	}
	if s.RenewTime != nil {
		m["renewed"] = s.RenewTime.UTC().Format(time.RFC3339)
	}
	if s.LeaseDurationSeconds != nil {
		m["duration_s"] = *s.LeaseDurationSeconds
	}
	return m
}
