// Package platform builds, applies, reads and removes the in-cluster objects
// kiln installs (DESIGN.md §5): namespace kiln-system, the kiln-auth and
// kiln-config ConfigMaps, tenant namespaces and the gateway.
package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds/tenanttable"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/readiness"
)

// Names of the platform objects (contract).
const (
	Namespace     = "kiln-system"
	ConfigMapName = "kiln-config"
	ConfigKey     = "config.yaml"
	AuthName      = "kiln-auth"
	AuthKey       = "keys.json"
	// AuthTenantsKey is kiln-auth's tenant table (tenanttable.File).
	AuthTenantsKey = tenanttable.File
	GatewayName    = "kiln-gateway"
	// GatewayServicePort is the port of Service kiln-gateway, which the
	// projects' routes point at.
	GatewayServicePort = 80
	LockName           = "kiln-lock"

	FieldManager    = "kiln"
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	LabelCluster    = "kiln.dev/cluster"
	LabelTenant     = "kiln.dev/tenant"
	LabelName       = "app.kubernetes.io/name"
	gatewayPort     = 8080
	authMountPath   = "/etc/kiln/auth"
	tlsMountPath    = "/etc/kiln/tls"
	tenantNamespace = "kiln-tenant-"
)

// TenantNamespace is the namespace of a tenant.
func TenantNamespace(tenant string) string { return tenantNamespace + tenant }

func labels(cluster string) map[string]string {
	return map[string]string{LabelManagedBy: "kiln", LabelCluster: cluster}
}

// Pod Security admission labels: every namespace kiln creates enforces the
// restricted profile, and warns and audits at the same level.
const (
	PodSecurityLevel = "restricted"
	labelPodSecurity = "pod-security.kubernetes.io/"
)

// namespaceLabels are kiln's labels plus the Pod Security ones.
func namespaceLabels(cluster string) map[string]string {
	l := labels(cluster)
	for _, mode := range []string{"enforce", "warn", "audit"} {
		l[labelPodSecurity+mode] = PodSecurityLevel
		l[labelPodSecurity+mode+"-version"] = "latest"
	}
	return l
}

// Object is one desired platform object: a server-side apply configuration
// and the reference readiness uses to follow it.
type Object struct {
	Ref   readiness.Ref
	Apply any // a client-go apply configuration
}

// NamespaceObject is kiln-system.
func NamespaceObject(cluster string) Object {
	return Object{
		Ref:   readiness.Ref{Kind: readiness.KindNamespace, Name: Namespace},
		Apply: corev1ac.Namespace(Namespace).WithLabels(namespaceLabels(cluster)),
	}
}

// AuthObject is kiln-auth: keys.json, key id -> PEM public key of every
// trusted key, and tenants.json, the tenant table (tenanttable.Table),
// unless table is nil (a platform of an earlier kiln, not migrated yet).
// The apply is forced and owns both keys: every writer of kiln-auth must
// pass the table it read, or the apply would remove it.
func AuthObject(cluster string, keys map[string]string, table *tenanttable.Table) (Object, error) {
	data, err := json.Marshal(keys) // map keys marshal sorted: stable bytes
	if err != nil {
		return Object{}, err
	}
	d := map[string]string{AuthKey: string(data)}
	if table != nil {
		tb, err := table.Marshal()
		if err != nil {
			return Object{}, err
		}
		d[AuthTenantsKey] = string(tb)
	}
	return Object{
		Ref: readiness.Ref{Kind: readiness.KindConfigMap, Namespace: Namespace, Name: AuthName},
		Apply: corev1ac.ConfigMap(AuthName, Namespace).WithLabels(labels(cluster)).
			WithData(d),
	}, nil
}

// AnnotationTenantTable is the gateway pod template's record of the
// tenant table (SHA-256 of tenants.json): a changed table rolls the
// gateway, so once the Deployment is rolled out no gateway pod holds an
// older table than kiln-auth's, whatever the kubelet's ConfigMap sync
// delay. That is what lets upgrade say a removed tenant is refused from
// the moment it reports success.
const AnnotationTenantTable = "kiln.dev/tenants-sha256"

// WithTenantTable records table's digest on the gateway Deployment among
// objs (from GatewayObjects); a nil table records nothing.
func WithTenantTable(objs []Object, table *tenanttable.Table) []Object {
	if table == nil {
		return objs
	}
	for _, o := range objs {
		if dep, ok := o.Apply.(*appsac.DeploymentApplyConfiguration); ok && dep.Spec != nil && dep.Spec.Template != nil {
			dep.Spec.Template.WithAnnotations(map[string]string{AnnotationTenantTable: table.Digest()})
		}
	}
	return objs
}

// ConfigObject is kiln-config, the "platform installed" marker.
func ConfigObject(cluster string, cfg *config.ClusterConfig) (Object, error) {
	data, err := cfg.Canonical()
	if err != nil {
		return Object{}, err
	}
	return Object{
		Ref: readiness.Ref{Kind: readiness.KindConfigMap, Namespace: Namespace, Name: ConfigMapName},
		Apply: corev1ac.ConfigMap(ConfigMapName, Namespace).WithLabels(labels(cluster)).
			WithData(map[string]string{ConfigKey: string(data)}),
	}, nil
}

// TenantObjects are the tenant namespaces.
func TenantObjects(cluster string, tenants []string) []Object {
	var out []Object
	for _, t := range tenants {
		l := namespaceLabels(cluster)
		l[LabelTenant] = t
		out = append(out, Object{
			Ref:   readiness.Ref{Kind: readiness.KindNamespace, Name: TenantNamespace(t)},
			Apply: corev1ac.Namespace(TenantNamespace(t)).WithLabels(l),
		})
	}
	return out
}

// GatewayImageRepository is where kiln's gateway image is released
// (goreleaser's kos section): the kiln binary, entrypoint /ko-app/kiln.
const GatewayImageRepository = "ghcr.io/kilnctl/kiln"

// Ports of the gateway container: tenants on http (behind the Service),
// probes and Prometheus on metrics (not behind the Service, so tenants
// cannot read other tenants' request counts).
const (
	gatewayMetricsPort = 9090
	// gatewayUID is the nonroot user of kiln's image (ko's default base).
	gatewayUID = 65532
)

// GatewayImage is kiln's own gateway image at version: the tag is the
// version without a leading "v", as goreleaser tags it; a version that is
// not a valid tag (a dev build's "dev", "(devel)") is made one.
func GatewayImage(version string) string {
	tag := strings.TrimPrefix(version, "v")
	tag = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, tag)
	tag = strings.TrimLeft(tag, ".-")
	if len(tag) > 128 {
		tag = tag[:128]
	}
	if tag == "" {
		tag = "dev"
	}
	return GatewayImageRepository + ":" + tag
}

// GatewayArgs are the container args of the gateway: with the image's
// entrypoint (the kiln binary) they run `kiln gateway`. A custom
// spec.gateway.image receives the same args, so it must be kiln's image
// (a mirror, another version, a digest) or accept them the same way.
// With tls, the gateway serves HTTPS with the mounted Secret's tls.crt and
// tls.key.
func GatewayArgs(cluster, domain string, tls bool) []string {
	args := []string{
		"gateway",
		fmt.Sprintf("--listen=:%d", gatewayPort),
		fmt.Sprintf("--metrics-listen=:%d", gatewayMetricsPort),
		"--auth-dir=" + authMountPath,
		"--cluster=" + cluster,
		"--domain=" + domain,
	}
	if tls {
		args = append(args,
			"--tls-cert="+tlsMountPath+"/"+corev1.TLSCertKey,
			"--tls-key="+tlsMountPath+"/"+corev1.TLSPrivateKeyKey)
	}
	return args
}

// GatewayServiceType is the type of Service kiln-gateway for a front door
// mode (spec.gateway.expose): LoadBalancer and NodePort for those modes,
// ClusterIP otherwise (ingress: the ingress controller reaches it inside
// the cluster; none: port-forward only; unset: a kiln-config written
// before kiln chose a front door, which had a ClusterIP Service).
func GatewayServiceType(expose string) corev1.ServiceType {
	switch expose {
	case config.ExposeLoadBalancer:
		return corev1.ServiceTypeLoadBalancer
	case config.ExposeNodePort:
		return corev1.ServiceTypeNodePort
	}
	return corev1.ServiceTypeClusterIP
}

// GatewayObjects are the gateway's ServiceAccount, Deployment and Service
// (its type from spec.gateway.expose, GatewayServiceType).
// The image is spec.gateway.image, or kiln's own at version when unset:
// a kiln of another version applying the platform rolls the gateway to
// its own.
//
// Least privilege: the gateway reads the trusted keys from the mounted
// kiln-auth ConfigMap and finds projects by cluster DNS, so it needs no
// Kubernetes API access at all; its ServiceAccount has no bindings and no
// token is mounted. It passes Pod Security restricted: non-root, no
// privilege escalation, every capability dropped, RuntimeDefault seccomp,
// a read-only root filesystem, and it has limits.
func GatewayObjects(cluster string, cfg *config.ClusterConfig, version string) []Object {
	l := labels(cluster)
	sel := map[string]string{LabelName: GatewayName, LabelCluster: cluster}
	podLabels := labels(cluster)
	podLabels[LabelName] = GatewayName
	image := cfg.Spec.Gateway.Image
	if cfg.Spec.Gateway.IsDefaultImage() {
		image = GatewayImage(version)
	}
	tlsSecret := cfg.Spec.Gateway.TLSSecret()
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName("auth").WithMountPath(authMountPath).WithReadOnly(true),
	}
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName("auth").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(AuthName)),
	}
	if tlsSecret != "" {
		// Mounted as a directory (no subPath), so the kubelet's updates of a
		// renewed certificate reach the gateway, which reloads it.
		mounts = append(mounts, corev1ac.VolumeMount().WithName("tls").WithMountPath(tlsMountPath).WithReadOnly(true))
		volumes = append(volumes, corev1ac.Volume().WithName("tls").WithSecret(corev1ac.SecretVolumeSource().WithSecretName(tlsSecret)))
	}
	sa := corev1ac.ServiceAccount(GatewayName, Namespace).WithLabels(l).WithAutomountServiceAccountToken(false)
	probe := func(path string) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString("metrics"))).
			WithPeriodSeconds(5)
	}
	container := corev1ac.Container().
		WithName("gateway").
		WithImage(image).
		WithArgs(GatewayArgs(cluster, cfg.Spec.Domain, tlsSecret != "")...).
		WithPorts(
			corev1ac.ContainerPort().WithName("http").WithContainerPort(gatewayPort),
			corev1ac.ContainerPort().WithName("metrics").WithContainerPort(gatewayMetricsPort),
		).
		WithVolumeMounts(mounts...).
		// The gateway sets its Go memory limit from the container's
		// (internal/gateway SetMemoryLimit), so it collects before the
		// kernel kills it.
		WithEnv(corev1ac.EnvVar().WithName("KILN_MEMORY_LIMIT").WithValueFrom(corev1ac.EnvVarSource().
			WithResourceFieldRef(corev1ac.ResourceFieldSelector().WithContainerName("gateway").WithResource("limits.memory")))).
		WithReadinessProbe(probe("/readyz")).
		WithLivenessProbe(probe("/healthz").WithFailureThreshold(6)).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    mustQuantity("10m"),
				corev1.ResourceMemory: mustQuantity("32Mi"),
			}).
			WithLimits(corev1.ResourceList{
				corev1.ResourceCPU:    mustQuantity("1"),
				corev1.ResourceMemory: mustQuantity("128Mi"),
			})).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	dep := appsac.Deployment(GatewayName, Namespace).WithLabels(l).
		WithSpec(appsac.DeploymentSpec().
			WithReplicas(cfg.Spec.Gateway.Replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(sel)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(podLabels).
				WithAnnotations(map[string]string{
					"prometheus.io/scrape": "true",
					"prometheus.io/port":   strconv.Itoa(gatewayMetricsPort),
				}).
				WithSpec(corev1ac.PodSpec().
					WithServiceAccountName(GatewayName).
					WithAutomountServiceAccountToken(false).
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithRunAsNonRoot(true).
						WithRunAsUser(gatewayUID).
						WithRunAsGroup(gatewayUID).
						WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					WithContainers(container).
					WithVolumes(volumes...))))
	// Port 80 named http whatever the protocol: the project routes'
	// Ingresses name it. With TLS its appProtocol says the gateway speaks
	// HTTPS there, for ingress controllers and load balancers that read it.
	port := corev1ac.ServicePort().WithName("http").WithPort(GatewayServicePort).WithTargetPort(intstr.FromString("http"))
	if tlsSecret != "" {
		port = port.WithAppProtocol("https")
	}
	svc := corev1ac.Service(GatewayName, Namespace).WithLabels(l).
		WithSpec(corev1ac.ServiceSpec().
			WithType(GatewayServiceType(cfg.Spec.Gateway.Expose)).
			WithSelector(sel).
			WithPorts(port))
	return []Object{
		{Ref: readiness.Ref{Kind: readiness.KindServiceAcc, Namespace: Namespace, Name: GatewayName}, Apply: sa},
		{Ref: readiness.Ref{Kind: readiness.KindDeployment, Namespace: Namespace, Name: GatewayName}, Apply: dep},
		{Ref: readiness.Ref{Kind: readiness.KindService, Namespace: Namespace, Name: GatewayName}, Apply: svc},
	}
}

// State is what a cluster's API says about the platform.
type State struct {
	// NamespaceExists: kiln-system exists; Cluster is its kiln.dev/cluster label.
	NamespaceExists bool
	Cluster         string
	// Terminating: kiln-system is being deleted (a destroy under way or
	// interrupted); nothing can be created in it until it is gone.
	Terminating bool
	// Installed: kiln-config exists. Config is its parsed content.
	Installed bool
	Config    *config.ClusterConfig
	ConfigRaw string
	// Keys are kiln-auth's trusted keys (key id -> PEM); nil when absent.
	Keys map[string]string
	// Table is kiln-auth's tenant table; nil when it has none (absent, or
	// written by an earlier kiln).
	Table *tenanttable.Table
	// Version and Schema are the kiln version and platform schema version
	// recorded on kiln-config by the kiln that last installed or upgraded
	// it ("" and 0 when not recorded).
	Version string
	Schema  int
	// RotationOldKey is the key a rotation under way replaces, and
	// OldKeyExpires until when it stays trusted (rotate-key --keep-old);
	// from kiln-auth's annotations ("" and zero when none).
	RotationOldKey string
	OldKeyExpires  time.Time
	// DestroyKeyIDs are the keys the platform trusted when a destroy
	// began (kiln-system's AnnotationDestroyKeyIDs; nil when no destroy
	// began): once kiln-auth is gone they still name the token dir that a
	// rerun of destroy finishes with. DestroyStarted is when it began.
	DestroyKeyIDs  []string
	DestroyStarted time.Time
}

// Annotations destroy puts on kiln-system before it removes anything.
const (
	AnnotationDestroyKeyIDs  = "kiln.dev/destroy-key-ids"
	AnnotationDestroyStarted = "kiln.dev/destroy-started"
)

// PartlyRemoved says a destroy began and did not finish: kiln-system
// still exists, marked by destroy or terminating.
func (s *State) PartlyRemoved() bool {
	return s.NamespaceExists && (s.Terminating || s.DestroyKeyIDs != nil)
}

// KeyIDs are the trusted key ids, sorted.
func (s *State) KeyIDs() []string {
	ids := make([]string, 0, len(s.Keys))
	for id := range s.Keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Read reads the platform state with three GETs: the namespace, then —
// when it exists — both ConfigMaps together. Every command about a
// cluster starts with it (discovery), so it costs two round trips, not
// three; a cluster without kiln-system gets the one GET.
func Read(ctx context.Context, cs kubernetes.Interface) (*State, error) {
	st := &State{}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("get namespace %s: %w", Namespace, err)
	}
	var (
		wg             sync.WaitGroup
		auth, cm       *corev1.ConfigMap
		authErr, cmErr error
	)
	wg.Go(func() { auth, authErr = cs.CoreV1().ConfigMaps(Namespace).Get(ctx, AuthName, metav1.GetOptions{}) })
	cm, cmErr = cs.CoreV1().ConfigMaps(Namespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
	wg.Wait()
	st.NamespaceExists = true
	st.Cluster = ns.Labels[LabelCluster]
	st.Terminating = ns.DeletionTimestamp != nil
	if v, ok := ns.Annotations[AnnotationDestroyKeyIDs]; ok {
		st.DestroyKeyIDs = []string{}
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				st.DestroyKeyIDs = append(st.DestroyKeyIDs, id)
			}
		}
		st.DestroyStarted, _ = time.Parse(time.RFC3339, ns.Annotations[AnnotationDestroyStarted])
	}
	switch err := authErr; {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("get configmap %s/%s: %w", Namespace, AuthName, err)
	default:
		keys := map[string]string{}
		if raw := auth.Data[AuthKey]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &keys); err != nil {
				return nil, fmt.Errorf("configmap %s/%s key %s is not a JSON object of key id to PEM: %w", Namespace, AuthName, AuthKey, err)
			}
		}
		st.Keys = keys
		if raw := auth.Data[AuthTenantsKey]; raw != "" {
			if st.Table, err = tenanttable.ParseTable([]byte(raw)); err != nil {
				return nil, fmt.Errorf("configmap %s/%s key %s: %w", Namespace, AuthName, AuthTenantsKey, err)
			}
		}
		st.RotationOldKey = auth.Annotations[AnnotationRotationOldKey]
		// A deadline counts only with the rotation it belongs to.
		if v := auth.Annotations[AnnotationOldKeyExpires]; v != "" && st.RotationOldKey != "" {
			if st.OldKeyExpires, err = time.Parse(time.RFC3339, v); err != nil {
				return nil, fmt.Errorf("configmap %s/%s annotation %s: %w", Namespace, AuthName, AnnotationOldKeyExpires, err)
			}
		}
	}
	switch err := cmErr; {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("get configmap %s/%s: %w", Namespace, ConfigMapName, err)
	default:
		st.Installed = true
		st.ConfigRaw = cm.Data[ConfigKey]
		st.Version = cm.Annotations[AnnotationVersion]
		st.Schema, _ = strconv.Atoi(cm.Annotations[AnnotationSchema])
		cfg, err := config.ParseCanonical([]byte(st.ConfigRaw))
		if err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %w", Namespace, ConfigMapName, err)
		}
		st.Config = cfg
		if st.Cluster == "" {
			st.Cluster = cfg.Metadata.Name
		}
	}
	return st, nil
}

// Ensure applies obj with server-side apply (field manager kiln, forced)
// unless it would change nothing: when the object exists, a dry-run apply
// is compared with the live object first. Re-running kiln on a converged
// cluster therefore writes nothing, and drift in fields kiln owns (an image
// changed by hand, say) is put back. It reports whether it wrote.
//
// A Namespace is created, bound (EnsureBindings) and checked for access
// before anything is applied to it (ensureNamespace).
func Ensure(ctx context.Context, cs kubernetes.Interface, obj Object) (bool, error) {
	if a, ok := obj.Apply.(*corev1ac.NamespaceApplyConfiguration); ok {
		return ensureNamespace(ctx, cs, obj, a)
	}
	return ensureApplied(ctx, cs, obj)
}

func ensureApplied(ctx context.Context, cs kubernetes.Interface, obj Object) (bool, error) {
	live, err := getLive(ctx, cs, obj.Ref)
	if err != nil {
		return false, err
	}
	if live != nil {
		dry, err := apply(ctx, cs, obj, true)
		if err != nil {
			return false, err
		}
		if same, err := equivalent(live, dry); err != nil || same {
			return false, err
		}
	}
	if _, err := apply(ctx, cs, obj, false); err != nil {
		return false, err
	}
	return true, nil
}

func apply(ctx context.Context, cs kubernetes.Interface, obj Object, dryRun bool) (runtime.Object, error) {
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var out runtime.Object
	var err error
	switch a := obj.Apply.(type) {
	case *corev1ac.NamespaceApplyConfiguration:
		out, err = cs.CoreV1().Namespaces().Apply(ctx, a, opts)
	case *corev1ac.ConfigMapApplyConfiguration:
		out, err = cs.CoreV1().ConfigMaps(*a.Namespace).Apply(ctx, a, opts)
	case *corev1ac.SecretApplyConfiguration:
		out, err = cs.CoreV1().Secrets(*a.Namespace).Apply(ctx, a, opts)
	case *corev1ac.ServiceAccountApplyConfiguration:
		out, err = cs.CoreV1().ServiceAccounts(*a.Namespace).Apply(ctx, a, opts)
	case *corev1ac.ServiceApplyConfiguration:
		out, err = cs.CoreV1().Services(*a.Namespace).Apply(ctx, a, opts)
	case *appsac.DeploymentApplyConfiguration:
		out, err = cs.AppsV1().Deployments(*a.Namespace).Apply(ctx, a, opts)
	case *networkingac.IngressApplyConfiguration:
		out, err = cs.NetworkingV1().Ingresses(*a.Namespace).Apply(ctx, a, opts)
	case *networkingac.NetworkPolicyApplyConfiguration:
		out, err = cs.NetworkingV1().NetworkPolicies(*a.Namespace).Apply(ctx, a, opts)
	default:
		return nil, fmt.Errorf("platform: cannot apply %T", obj.Apply)
	}
	if err != nil {
		what := "apply"
		if dryRun {
			what = "dry-run apply"
		}
		return nil, fmt.Errorf("%s %s: %w", what, obj.Ref, err)
	}
	return out, nil
}

// getLive returns the live object, or nil when it does not exist or is
// being deleted (then it must be applied again once gone).
func getLive(ctx context.Context, cs kubernetes.Interface, ref readiness.Ref) (runtime.Object, error) {
	var obj runtime.Object
	var err error
	g := metav1.GetOptions{}
	switch ref.Kind {
	case readiness.KindNamespace:
		obj, err = cs.CoreV1().Namespaces().Get(ctx, ref.Name, g)
	case readiness.KindConfigMap:
		obj, err = cs.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, g)
	case readiness.KindSecret:
		obj, err = cs.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, g)
	case readiness.KindServiceAcc:
		obj, err = cs.CoreV1().ServiceAccounts(ref.Namespace).Get(ctx, ref.Name, g)
	case readiness.KindService:
		obj, err = cs.CoreV1().Services(ref.Namespace).Get(ctx, ref.Name, g)
	case readiness.KindDeployment:
		obj, err = cs.AppsV1().Deployments(ref.Namespace).Get(ctx, ref.Name, g)
	case readiness.KindIngress:
		obj, err = cs.NetworkingV1().Ingresses(ref.Namespace).Get(ctx, ref.Name, g)
	case readiness.KindNetworkPolicy:
		obj, err = cs.NetworkingV1().NetworkPolicies(ref.Namespace).Get(ctx, ref.Name, g)
	default:
		return nil, fmt.Errorf("platform: cannot read %s", ref)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if apierrors.IsForbidden(err) && ref.Namespace != "" {
		// kiln's roles read only in namespaces kiln made: in one that is
		// not there yet (a tenant an upgrade plans to add) a read is
		// refused, and the object is as absent as its namespace.
		if _, gerr := cs.CoreV1().Namespaces().Get(ctx, ref.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	if m, ok := obj.(metav1.Object); ok && m.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	return obj, nil
}

// equivalent compares two versions of an object, ignoring what the server
// maintains by itself (managed fields, resource version, generation, status).
func equivalent(a, b runtime.Object) (bool, error) {
	ma, mb, err := withoutServerFields(a, b)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(ma, mb), nil
}

// withoutServerFields converts a and b to maps without what the server maintains by
// itself (status, managed fields, resource version, generation), for
// equivalent and changedFields.
func withoutServerFields(a, b runtime.Object) (ma, mb map[string]any, err error) {
	if ma, err = runtime.DefaultUnstructuredConverter.ToUnstructured(a); err != nil {
		return nil, nil, err
	}
	if mb, err = runtime.DefaultUnstructuredConverter.ToUnstructured(b); err != nil {
		return nil, nil, err
	}
	for _, m := range []map[string]any{ma, mb} {
		delete(m, "status")
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			delete(md, "resourceVersion")
			delete(md, "generation")
		}
	}
	return ma, mb, nil
}
