package project

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/config"
)

// restrictedPod is a pod spec that passes Pod Security restricted, bound to
// a node nobody runs (its status is the test's to set).
func restrictedPod(name, image string) corev1.PodSpec {
	no, yes := false, true
	return corev1.PodSpec{
		NodeName: "nowhere",
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   &yes,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{Name: name, Image: image, SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}}},
	}
}

// A tenant namespace as kiln installs it enforces Pod Security restricted:
// a pod that violates it is refused by the API server, while kiln's own
// project pods are admitted (kwok runs them) with the token as a read-only
// file, never in the environment, and the stack's writable paths.
func TestPodSecurityRestrictedEnforced(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "psa")
	st := config.DefaultStack()
	st.Name, st.WritablePaths = "rw", []string{"/tmp", "/var/cache/nginx"}
	o.Config.Spec.Stacks = append(o.Config.Spec.Stacks, st)
	r := Ref{Tenant: "psa", Project: "shop"}
	cs := o.Client

	bad := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rooted", Namespace: r.Namespace()},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}},
	}
	_, err := cs.CoreV1().Pods(r.Namespace()).Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
		t.Fatalf("a pod violating restricted in a kiln tenant namespace: err = %v, want Forbidden by PodSecurity", err)
	}

	if err := o.Create(ctx, r, "rw"); err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods(r.Namespace()).List(ctx, metav1.ListOptions{LabelSelector: LabelProject + "=" + r.Project})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no project pod was admitted")
	}
	p := pods.Items[0]
	c := p.Spec.Containers[0]
	if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
		t.Errorf("project container has environment %v %v: the token must be a file only", c.Env, c.EnvFrom)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if m, ok := mounts["/var/run/kiln"]; !ok || !m.ReadOnly {
		t.Errorf("token mount %+v (found %v), want /var/run/kiln read-only", m, ok)
	}
	for _, w := range st.WritablePaths {
		if _, ok := mounts[w]; !ok {
			t.Errorf("writable path %s not mounted: %v", w, mounts)
		}
	}
	var tokenItems []corev1.KeyToPath
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil {
			if v.Secret.SecretName != SecretName(r.Project) {
				t.Errorf("secret volume of %s", v.Secret.SecretName)
			}
			tokenItems = v.Secret.Items
		}
	}
	if len(tokenItems) != 1 || tokenItems[0].Key != "token-1" || tokenItems[0].Path != "project-token" ||
		tokenItems[0].Mode == nil || *tokenItems[0].Mode != 0o400 {
		t.Errorf("token volume items %+v, want token-1 as project-token, mode 0400", tokenItems)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("root filesystem not read-only: %+v", sc)
	}
	if lim := c.Resources.Limits; lim.Cpu().IsZero() || lim.Memory().IsZero() {
		t.Errorf("limits %v: want cpu and memory", lim)
	}

	// Rotation switches the key the pods mount, and records it.
	if err := o.RotateToken(ctx, r); err != nil {
		t.Fatal(err)
	}
	d, err := o.getDeployment(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if k := deploymentTokenKey(d); k != "token-2" {
		t.Errorf("after rotation the deployment mounts %q, want token-2", k)
	}
	ins, err := o.Inspect(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if ins.TokenSync != TokenInSync || ins.Revision != 2 {
		t.Errorf("after rotation: token sync %q (%s), revision %d; want in-sync, 2", ins.TokenSync, ins.TokenSyncReason, ins.Revision)
	}
}

// A project whose spec records no token in force (made by an older kiln)
// shows token sync unknown with a reason, not a guess; its next operation
// records it without counting as a second spec write.
func TestTokenSyncUnrecordedUntilNextOperation(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "legacy")
	r := Ref{Tenant: "legacy", Project: "old"}
	if err := o.Create(ctx, r, ""); err != nil {
		t.Fatal(err)
	}
	cms := o.Client.CoreV1().ConfigMaps(r.Namespace())
	cm, err := cms.Get(ctx, SpecName(r.Project), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(cm.Annotations, AnnotationSpecKey)
	delete(cm.Annotations, AnnotationToken)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err := o.Inspect(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if st.TokenSync != TokenUnknown || !strings.Contains(st.TokenSyncReason, "not recorded") {
		t.Errorf("unrecorded: token sync %q (%q), want unknown with a reason", st.TokenSync, st.TokenSyncReason)
	}
	if st.State != StateRunning {
		t.Errorf("unrecorded token is not a fault: state %s %v", st.State, st.Reasons)
	}
	if err := o.Start(ctx, r); err != nil {
		t.Fatal(err)
	}
	if st, err = o.Inspect(ctx, r); err != nil {
		t.Fatal(err)
	}
	if st.TokenSync != TokenInSync || st.Revision != 2 {
		t.Errorf("after start: token sync %q (%q), revision %d; want in-sync, 2", st.TokenSync, st.TokenSyncReason, st.Revision)
	}
}
