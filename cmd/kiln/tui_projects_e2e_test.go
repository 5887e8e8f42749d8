package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cliWords are words of the CLI that no wizard screen may show: a flag
// (--context, --stack …) or a command to type (the engine's hints quote
// them: `kiln …`). A lease holder's identity ("kiln project create T/P by
// user@host pid N") names what holds it, not what to type, and may show.
var cliWords = regexp.MustCompile("(^|[\\s(`'\"])--[a-z][a-z-]+|`kiln ")

// TestWizardProjectLifecycleInTmux drives a project's whole life through
// the wizard only, in a real terminal against the local control plane
// (issue #28): n creates default/blog from the new project form (tenant
// and stack from the platform's config, the name checked as typed); the
// filter keeps the selection; p suspends it (its Deployment gone), s
// starts it again, t rotates its token (the pod template's token hash
// changes), x deletes it after its name is typed (its spec ConfigMap
// gone). No screen the user was shown names a CLI flag or command.
func TestWizardProjectLifecycleInTmux(t *testing.T) {
	// The check below can fail: it finds the words of a CLI hint.
	for _, s := range []string{"none; kiln project create kube d default/PROJECT --context c adds one", "run `kiln status kube d` first"} {
		if !cliWords.MatchString(s) {
			t.Fatalf("cliWords misses the CLI in %q", s)
		}
	}
	needTmux(t)
	skipShort(t)
	const name, kctx, ns = "wizproj", "kiln-a", "kiln-tenant-default"
	e := newEnv(t)
	cleanup(t, e, name, kctx)
	cs := clusterA.Client
	ctx := context.Background()
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", writeConfig(t, projectConfig), "--headless"), 0)
	// A second project, made with the CLI: the filter has something to
	// hide.
	expect(t, e.kiln("project", "create", "kube", name, "staging/shop", "--context", kctx), 0)

	x := startWizard(t, e, 100, 30)
	x.waitFor(30*time.Second, "Kiln clusters", "> kube   "+name)
	x.keys("i")
	x.waitFor(time.Minute, "Projects (1)", "staging/shop", "[n] new project")

	// n: the form, the name checked as it is typed.
	x.keys("n")
	form := x.waitFor(10*time.Second, "New project on kiln cluster "+name, "‹ web ›")
	if !strings.Contains(form, "> Name") || !strings.Contains(form, "‹ staging ›") {
		// The form starts on the name, in the selected project's tenant.
		t.Fatalf("the new project form, opened with staging/shop selected:\n%s", form)
	}
	if strings.Contains(form, "✗") || !strings.Contains(form, "lowercase letters, digits") {
		t.Fatalf("the name field is not empty when the form opens:\n%s", form)
	}
	x.keys("Up", "Left") // tenant default
	x.waitFor(10*time.Second, "‹ default ›")
	x.keys("Down")
	x.text("Blog")
	x.waitFor(10*time.Second, `✗ name "Blog": must contain only lowercase letters`)
	for range 4 {
		x.keys("BSpace")
	}
	x.text("blog")
	x.waitFor(10*time.Second, "✓ default/blog is free")
	x.keys("Tab", "Tab", "Enter") // Stack web, then Create
	x.waitFor(3*time.Minute, "✓ project default/blog created and running", "esc back")
	x.keys("Escape")
	x.waitFor(time.Minute, "Projects (2)", "> default/blog")
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{}); err != nil {
		t.Fatalf("Deployment blog after the wizard's create: %v", err)
	}

	// The filter hides the selected project and says so; clearing it
	// brings the same project back selected.
	x.keys("/")
	x.text("shop")
	x.waitFor(10*time.Second, "default/blog is selected but hidden by the filter /shop")
	x.keys("Enter")
	x.keys("Escape")
	x.waitFor(10*time.Second, "> default/blog")

	// p suspends: the Deployment is gone.
	x.keys("p")
	x.waitFor(10*time.Second, "Suspend project default/blog?")
	x.keys("y")
	x.waitFor(3*time.Minute, "✓ project default/blog suspended", "esc back")
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment blog after the wizard's suspend: %v, want NotFound", err)
	}
	x.keys("Escape")
	x.waitFor(time.Minute, "> default/blog", "suspended")

	// s starts it again.
	x.keys("s")
	x.waitFor(10*time.Second, "Start project default/blog?")
	x.keys("y")
	x.waitFor(3*time.Minute, "✓ project default/blog running", "esc back")
	x.keys("Escape")
	x.waitFor(time.Minute, "> default/blog")
	dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Deployment blog after the wizard's start: %v", err)
	}
	hashBefore := dep.Spec.Template.Annotations["kiln.dev/token-sha256"]

	// t rotates the token: the Deployment runs a new one.
	x.keys("t")
	x.waitFor(10*time.Second, "Rotate the token of project default/blog?")
	x.keys("y")
	x.waitFor(3*time.Minute, "✓ project default/blog token rotated", "esc back")
	dep, err = cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Deployment blog after the wizard's rotate token: %v", err)
	}
	if h := dep.Spec.Template.Annotations["kiln.dev/token-sha256"]; h == "" || h == hashBefore {
		t.Errorf("the pod template's token hash after rotate token is %q (before %q): not a new token", h, hashBefore)
	}
	x.keys("Escape")
	x.waitFor(time.Minute, "> default/blog")

	// x deletes, after the name is typed.
	x.keys("x")
	x.waitFor(10*time.Second, "Delete project default/blog", "Type the project name (blog) to confirm")
	x.text("shop")
	x.keys("Enter")
	x.waitFor(10*time.Second, "type the project name (blog) exactly")
	for range 4 {
		x.keys("BSpace")
	}
	x.text("blog")
	x.keys("Enter")
	x.waitFor(3*time.Minute, "✓ project default/blog deleted", "esc back")
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kiln-project-blog", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap kiln-project-blog after the wizard's delete: %v, want NotFound", err)
	}
	x.keys("Escape")
	x.waitFor(time.Minute, "Projects (1)", "staging/shop")
	x.keys("Escape")
	x.waitFor(30*time.Second, "Kiln clusters")

	// The wizard speaks wizard: no screen named a CLI flag or command.
	bad := 0
	for _, s := range x.seen {
		if loc := cliWords.FindStringIndex(s); loc != nil && bad < 3 {
			bad++
			t.Errorf("a wizard screen names the CLI (%q):\n%s", strings.TrimSpace(s[loc[0]:loc[1]]), s)
		}
	}
	t.Logf("%d distinct screens checked for CLI words", len(x.seen))
}
