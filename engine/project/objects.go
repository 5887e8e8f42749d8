package project

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
)

// Names in the project's pod template.
const (
	tokenVolume  = "project-token"
	writableName = "writable-"
	podFSGroup   = 65532 // the token file's group, so the pod's non-root user reads it
	// tokenFileMode is asked of the kubelet; with the pod's fsGroup it
	// adds group read, so the file is 0440 root:65532 in the container
	// (seen on a real kubelet: cmd/kiln TestKilnOnARealNode).
	tokenFileMode = 0o400
)

// deploymentObject runs the stack with the token from Secret key tokenKey,
// mounted read-only as the file TokenPath; the pod template's
// kiln.dev/token-sha256 annotation is the token's hash, so a token change
// rolls the pods and token sync is checkable.
//
// The pods pass Pod Security "restricted": non-root, seccomp
// RuntimeDefault, no privilege escalation, every capability dropped, and a
// read-only root filesystem with an emptyDir for each of the stack's
// writablePaths. Limits equal requests, so a project cannot take more than
// its stack asks for.
func (o *Ops) deploymentObject(r Ref, st config.Stack, tokenKey, tokenHash string) platform.Object {
	_, ref, _, _, _ := refs(r)
	res := corev1.ResourceList{}
	if q, err := resource.ParseQuantity(st.CPU); err == nil {
		res[corev1.ResourceCPU] = q
	}
	if q, err := resource.ParseQuantity(st.Memory); err == nil {
		res[corev1.ResourceMemory] = q
	}
	tokenDir, tokenFile := path.Split(TokenPath)
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName(tokenVolume).WithMountPath(path.Clean(tokenDir)).WithReadOnly(true),
	}
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName(tokenVolume).WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(SecretName(r.Project)).
			WithDefaultMode(tokenFileMode).
			WithItems(corev1ac.KeyToPath().WithKey(tokenKey).WithPath(tokenFile).WithMode(tokenFileMode))),
	}
	for i, p := range st.WritablePaths {
		name := fmt.Sprintf("%s%d", writableName, i)
		mounts = append(mounts, corev1ac.VolumeMount().WithName(name).WithMountPath(p))
		volumes = append(volumes, corev1ac.Volume().WithName(name).WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	}
	container := corev1ac.Container().
		WithName(containerName).
		WithImage(st.Image).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(st.Port)).
		WithVolumeMounts(mounts...).
		WithResources(corev1ac.ResourceRequirements().WithRequests(res).WithLimits(res)).
		WithSecurityContext(corev1ac.SecurityContext().
			WithRunAsNonRoot(true).
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	dep := appsac.Deployment(r.Project, r.Namespace()).WithLabels(o.labels(r)).
		WithSpec(appsac.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{LabelProject: r.Project})).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(o.labels(r)).
				WithAnnotations(map[string]string{AnnotationToken: tokenHash}).
				WithSpec(corev1ac.PodSpec().
					WithAutomountServiceAccountToken(false).
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithRunAsNonRoot(true).
						WithFSGroup(podFSGroup).
						WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					WithContainers(container).
					WithVolumes(volumes...))))
	return platform.Object{Ref: ref, Apply: dep}
}

func (o *Ops) serviceObject(r Ref) platform.Object {
	_, _, ref, _, _ := refs(r)
	svc := corev1ac.Service(r.Project, r.Namespace()).WithLabels(o.labels(r)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(map[string]string{LabelProject: r.Project}).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(servicePort).WithTargetPort(intstr.FromString("http"))))
	return platform.Object{Ref: ref, Apply: svc}
}

// Host is the project's public host name: P.T.DOMAIN.
func (o *Ops) Host(r Ref) string { return r.Project + "." + r.Tenant + "." + o.Config.Spec.Domain }

// RouteName is the name of a project's route, Ingress kiln-system/T.P
// (tenant "." project: unique across tenants, and no DNS-1123 label
// contains a dot, so two projects never share one).
func RouteName(r Ref) string { return r.Tenant + "." + r.Project }

// routeObject is the project's route (DESIGN.md §5): Ingress
// kiln-system/T.P serving host P.T.DOMAIN through kiln-gateway, which
// checks the tenant token before it forwards to Service P. Its upstream
// annotation names Service P, so the route is judged ready only when the
// project it fronts has ready endpoints (readiness.AnnotationUpstream).
func (o *Ops) routeObject(r Ref) platform.Object {
	_, _, _, ref, _ := refs(r)
	spec := networkingac.IngressSpec().WithRules(networkingac.IngressRule().
		WithHost(o.Host(r)).
		WithHTTP(networkingac.HTTPIngressRuleValue().WithPaths(networkingac.HTTPIngressPath().
			WithPath("/").
			WithPathType(networkingv1.PathTypePrefix).
			WithBackend(networkingac.IngressBackend().WithService(networkingac.IngressServiceBackend().
				WithName(platform.GatewayName).
				WithPort(networkingac.ServiceBackendPort().WithNumber(platform.GatewayServicePort)))))))
	if c := o.Config.Spec.Gateway.IngressClassName; c != "" {
		spec = spec.WithIngressClassName(c)
	}
	ing := networkingac.Ingress(ref.Name, ref.Namespace).WithLabels(o.labels(r)).
		WithAnnotations(map[string]string{readiness.AnnotationUpstream: r.Namespace() + "/" + r.Project}).
		WithSpec(spec)
	return platform.Object{Ref: ref, Apply: ing}
}

// legacyRouteRef is where the previous kiln put a project's route:
// Ingress kiln-tenant-T/P straight to Service P, bypassing the gateway.
// kiln moves it (MigrateRoutes) and never creates one.
func legacyRouteRef(r Ref) readiness.Ref {
	return readiness.Ref{Kind: readiness.KindIngress, Namespace: r.Namespace(), Name: r.Project}
}
