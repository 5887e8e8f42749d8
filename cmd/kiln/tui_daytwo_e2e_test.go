package main

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/creds"
)

// TestWizardUpgradeAndRotateKeyInTmux drives the wizard's day-2 actions
// in a real terminal against the local control plane, on a cluster made
// with the CLI: u opens the upgrade screen; the plan of a config that adds
// tenant staging is shown as a diff; Cancel there changes nothing (every
// resourceVersion and the Lease compared); Apply applies it (namespace
// and token there). Then K explains a rotation; a wrong typed name is
// refused, the right one rotates the key (kiln-auth trusts only the new
// key, which the token dir holds).
func TestWizardUpgradeAndRotateKeyInTmux(t *testing.T) {
	needTmux(t)
	skipShort(t)
	const name, kctx = "wizday2", "kiln-b"
	e := newEnv(t)
	cleanup(t, e, name, kctx)
	cs := clusterB.Client
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "--headless"), 0)
	next := writeConfig(t, twoTenants)
	keysBefore := authKeys(t, cs)

	x := startWizard(t, e, 100, 30)
	x.waitFor(30*time.Second, "Kiln clusters", "> kube   "+name, "u upgrade", "K rotate key")

	plan := func() string {
		x.keys("u")
		x.waitFor(10*time.Second, "Upgrade kiln platform "+name)
		x.text(next)
		x.waitFor(10*time.Second, "✓ valid cluster config")
		x.keys("Enter", "Enter", "Enter", "Enter") // past the options to Plan
		return x.waitFor(2*time.Minute, "Plan for kiln platform "+name, "[ Apply ", "[ Cancel ]")
	}

	// The plan, then Cancel: nothing changes, said neutrally.
	before := world(t, cs)
	shown := plan()
	t.Logf("upgrade plan at 100x30:\n%s", shown)
	for _, want := range []string{"Tenant staging", "+ create Token staging",
		"~ update ConfigMap kiln-system/kiln-auth", "~ update ConfigMap kiln-system/kiln-config", "spec.tenants: [default] (cluster) vs"} {
		if !strings.Contains(shown, want) {
			t.Errorf("plan screen lacks %q:\n%s", want, shown)
		}
	}
	fitsWidth(t, shown, 100)
	// The rest of the plan (the tenant table and the gateway's roll make
	// it longer than one screen at 30 lines) is a page down.
	x.keys("NPage")
	fitsWidth(t, x.waitFor(10*time.Second, "+ create Namespace kiln-tenant-staging"), 100)
	x.keys("Enter") // Cancel has the focus
	cancelled := x.waitFor(time.Minute, "cancelled — nothing was changed", "esc back")
	if strings.Contains(cancelled, "✗") {
		t.Errorf("Cancel on the plan is shown as a failure:\n%s", cancelled)
	}
	if after := world(t, cs); !reflect.DeepEqual(before, after) {
		t.Errorf("a cancelled upgrade changed the cluster:\nbefore %v\nafter  %v", before, after)
	}
	x.keys("Escape")
	x.waitFor(30*time.Second, "Kiln clusters", "> kube   "+name)

	// The plan again, then Apply.
	plan()
	x.keys("Left", "Enter")
	x.waitFor(3*time.Minute, "✓ platform "+name+" upgraded", "esc back")
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "kiln-tenant-staging", metav1.GetOptions{}); err != nil {
		t.Errorf("tenant namespace after the wizard's upgrade: %v", err)
	}
	td, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatal(err)
	}
	if !td.Manifest.HasTenant("staging") {
		t.Errorf("token dir tenants after the wizard's upgrade: %v", td.Manifest.Tenants)
	}
	x.keys("Escape")
	x.waitFor(30*time.Second, "Kiln clusters", "> kube   "+name)

	// Rotate key: explained, confirmed by typing the cluster name.
	x.keys("K")
	x.waitFor(time.Minute, "Rotate the signing key of kiln cluster "+name, "What happens", "[ Continue ]")
	x.keys("Enter", "Enter") // Keep old key empty, then Continue
	x.waitFor(time.Minute, "Type the cluster name to confirm")
	x.text("wrong")
	x.keys("Enter")
	x.waitFor(10*time.Second, "type the cluster name exactly")
	for range len("wrong") {
		x.keys("BSpace")
	}
	x.text(name)
	x.keys("Enter")
	x.waitFor(3*time.Minute, "✓ key of "+name+" rotated to", "esc back")
	keysAfter := authKeys(t, cs)
	rotated := trustedDir(t, cs, e.tokenDir(name))
	if _, old := keysBefore[rotated.Manifest.KeyID]; len(keysAfter) != 1 || old {
		t.Errorf("after the wizard's rotate key kiln-auth trusts %v, token dir key %s (before: %v)", keyIDs(keysAfter), rotated.Manifest.KeyID, keyIDs(keysBefore))
	}
	if len(rotated.Tokens) != 2 {
		t.Errorf("token dir after the rotation holds %d tokens, want 2", len(rotated.Tokens))
	}
	x.keys("Escape")
	x.waitFor(30*time.Second, "Kiln clusters")
	x.keys("q")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := x.run("has-session", "-t", x.session); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kiln did not exit on q; screen:\n%s", x.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
