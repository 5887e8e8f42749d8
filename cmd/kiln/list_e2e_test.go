package main

import (
	"strings"
	"testing"
)

// kiln list finds every kiln cluster of every context in one run: the
// platform with its project count and trusted token dir, a context without
// kiln left out, and the unreachable context listed with its cause, not
// failing the command. Without AWS set up, AWS is not searched.
func TestListShowsEveryClusterAndEveryUnreachableContext(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "listed", "kiln-b")
	expect(t, e.kiln("create", "kube", "listed", "--context", "kiln-b", "--headless"), 0)
	expect(t, e.kiln("project", "create", "kube", "listed", "default/web", "--headless"), 0)
	expect(t, e.kiln("project", "create", "kube", "listed", "default/api", "--headless"), 0)

	noAWS := []string{"HOME=" + t.TempDir(), "AWS_PROFILE=", "AWS_ACCESS_KEY_ID=", "AWS_CONFIG_FILE=", "AWS_SHARED_CREDENTIALS_FILE=",
		"AWS_WEB_IDENTITY_TOKEN_FILE=", "AWS_CONTAINER_CREDENTIALS_FULL_URI=", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI="}
	r := e.kilnWith(noAWS, "list", "-o", "json")
	expect(t, r, 0)
	var mine, dead map[string]any
	for _, ev := range r.events(t) {
		if ev["type"] != "cluster" {
			continue
		}
		if ev["provider"] == "aws" {
			t.Errorf("AWS searched without AWS set up: %v", ev)
		}
		switch {
		case ev["name"] == "listed":
			mine = ev
		case ev["location"] == "kiln-dead":
			dead = ev
		}
	}
	if mine == nil || mine["location"] != "kiln-b" || mine["platform"] != "installed" || mine["projects"] != float64(2) || mine["token_dir"] != e.tokenDir("listed") {
		t.Errorf("cluster event for listed: %v\n%s", mine, r)
	}
	if dead == nil || dead["error"] == "" || dead["name"] != "" {
		t.Errorf("unreachable context not listed with its cause: %v\n%s", dead, r)
	}
	if res := r.last(t, "result"); res["ok"] != true || !strings.Contains(res["message"].(string), "could not be inspected") {
		t.Errorf("result: %v", res)
	}

	// Text: a table, then the contexts not inspected with their causes.
	r = e.kilnWith(noAWS, "list", "kube")
	expect(t, r, 0)
	for _, want := range []string{"PROVIDER", "listed", "kiln-b", "installed", "not inspected", "kiln-dead"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kiln list kube text lacks %q:\n%s", want, r)
		}
	}
	// Bad input names the flag.
	r = e.kilnWith(noAWS, "list", "--context", "kiln-a")
	expect(t, r, 2)
	if !strings.Contains(r.stderr, "--context") {
		t.Errorf("list --context: %s", r)
	}
}
