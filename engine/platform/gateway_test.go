package platform

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/kilnctl/kiln/engine/config"
)

func gatewayDeployment(t *testing.T, cfg *config.ClusterConfig, version string) *appsac.DeploymentApplyConfiguration {
	t.Helper()
	for _, o := range GatewayObjects("dev1", cfg, version) {
		if d, ok := o.Apply.(*appsac.DeploymentApplyConfiguration); ok {
			return d
		}
	}
	t.Fatal("no Deployment among the gateway objects")
	return nil
}

func TestGatewayImage(t *testing.T) {
	for version, want := range map[string]string{
		"v1.2.3":              "ghcr.io/kilnctl/kiln:1.2.3",
		"1.2.3":               "ghcr.io/kilnctl/kiln:1.2.3",
		"v0.4.0-3-gabc-dirty": "ghcr.io/kilnctl/kiln:0.4.0-3-gabc-dirty",
		"dev":                 "ghcr.io/kilnctl/kiln:dev",
		"":                    "ghcr.io/kilnctl/kiln:dev",
		"(devel)":             "ghcr.io/kilnctl/kiln:devel-",
		"1.0+build.5":         "ghcr.io/kilnctl/kiln:1.0-build.5",
	} {
		if got := GatewayImage(version); got != want {
			t.Errorf("GatewayImage(%q) = %s, want %s", version, got, want)
		}
	}
}

func TestGatewayDeployment(t *testing.T) {
	cfg := config.Default("dev1")
	d := gatewayDeployment(t, cfg, "v1.2.3")
	c := d.Spec.Template.Spec.Containers[0]
	if *c.Image != "ghcr.io/kilnctl/kiln:1.2.3" {
		t.Errorf("default image %s, want kiln's at the version", *c.Image)
	}
	want := []string{"gateway", "--listen=:8080", "--metrics-listen=:9090", "--auth-dir=/etc/kiln/auth", "--cluster=dev1", "--domain=dev1.kiln.test"}
	if !slices.Equal(c.Args, want) {
		t.Errorf("args %q, want %q", c.Args, want)
	}
	if c.Command != nil {
		t.Errorf("command %q: the image's entrypoint must run", c.Command)
	}
	sc := c.SecurityContext
	if !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !slices.Contains(sc.Capabilities.Drop, "ALL") || string(*sc.SeccompProfile.Type) != "RuntimeDefault" {
		t.Errorf("security context %+v does not pass Pod Security restricted", sc)
	}
	if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("limits %v", c.Resources.Limits)
	}
	if *c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe path %s", *c.ReadinessProbe.HTTPGet.Path)
	}

	// A newer kiln rolls the gateway: only the image changes.
	if img := *gatewayDeployment(t, cfg, "v1.3.0").Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/kilnctl/kiln:1.3.0" {
		t.Errorf("image at v1.3.0: %s", img)
	}
	// The old nginx default counts as unset.
	legacy := config.Default("dev1")
	legacy.Spec.Gateway.Image = config.LegacyGatewayImage
	if img := *gatewayDeployment(t, legacy, "v1.2.3").Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/kilnctl/kiln:1.2.3" {
		t.Errorf("legacy default image: %s, want kiln's", img)
	}
	// An override keeps its image and gets the same args.
	custom := config.Default("dev1")
	custom.Spec.Gateway.Image = "registry.example.test/mirror/kiln@sha256:0123"
	cc := gatewayDeployment(t, custom, "v1.2.3").Spec.Template.Spec.Containers[0]
	if *cc.Image != custom.Spec.Gateway.Image || !slices.Equal(cc.Args, want) {
		t.Errorf("override: image %s args %q", *cc.Image, cc.Args)
	}
}

func TestGatewayServiceAndTLS(t *testing.T) {
	for expose, want := range map[string]corev1.ServiceType{
		config.ExposeLoadBalancer: corev1.ServiceTypeLoadBalancer,
		config.ExposeNodePort:     corev1.ServiceTypeNodePort,
		config.ExposeIngress:      corev1.ServiceTypeClusterIP,
		config.ExposeNone:         corev1.ServiceTypeClusterIP,
		"":                        corev1.ServiceTypeClusterIP,
	} {
		cfg := config.Default("dev1")
		cfg.Spec.Gateway.Expose = expose
		var svc *corev1ac.ServiceApplyConfiguration
		for _, o := range GatewayObjects("dev1", cfg, "v1") {
			if s, ok := o.Apply.(*corev1ac.ServiceApplyConfiguration); ok {
				svc = s
			}
		}
		if svc == nil || *svc.Spec.Type != want {
			t.Errorf("expose %q: Service type %v, want %s", expose, svc.Spec.Type, want)
		}
		if p := svc.Spec.Ports[0]; *p.Name != "http" || *p.Port != 80 || p.AppProtocol != nil {
			t.Errorf("expose %q: port %+v, want http 80 without appProtocol", expose, p)
		}
	}

	cfg := config.Default("dev1")
	cfg.Spec.Gateway.TLS = &config.GatewayTLS{SecretName: "dev1-tls"}
	d := gatewayDeployment(t, cfg, "v1")
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--tls-cert=/etc/kiln/tls/tls.crt") || !slices.Contains(c.Args, "--tls-key=/etc/kiln/tls/tls.key") {
		t.Errorf("args %q lack the TLS pair", c.Args)
	}
	var mounted, volume bool
	for _, m := range c.VolumeMounts {
		mounted = mounted || (*m.Name == "tls" && *m.MountPath == "/etc/kiln/tls" && m.SubPath == nil)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volume = volume || (v.Secret != nil && *v.Secret.SecretName == "dev1-tls")
	}
	if !mounted || !volume {
		t.Errorf("TLS Secret mounted %v (as a directory), volume %v", mounted, volume)
	}
	for _, o := range GatewayObjects("dev1", cfg, "v1") {
		if s, ok := o.Apply.(*corev1ac.ServiceApplyConfiguration); ok && (s.Spec.Ports[0].AppProtocol == nil || *s.Spec.Ports[0].AppProtocol != "https") {
			t.Errorf("TLS Service port %+v, want appProtocol https", s.Spec.Ports[0])
		}
	}
}
