package aws

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/internal/testenv/testhooks"
)

// kubectl runs the real kubectl on the kubeconfig at path.
func kubectl(t *testing.T, path string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: these tests check kiln's writes against it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", path}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectlWorks runs kubectl config view and use-context on path and
// returns the contexts kubectl sees.
func kubectlWorks(t *testing.T, path, useContext string) map[string]bool {
	t.Helper()
	out, err := kubectl(t, path, "config", "view", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl config view: %v\n%s", err, out)
	}
	var view struct {
		Contexts []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(out), &view); err != nil {
		t.Fatalf("kubectl config view output: %v\n%s", err, out)
	}
	names := map[string]bool{}
	for _, c := range view.Contexts {
		names[c.Name] = true
	}
	if out, err := kubectl(t, path, "config", "use-context", useContext); err != nil {
		t.Fatalf("kubectl config use-context %s: %v\n%s", useContext, err, out)
	}
	if out, err := kubectl(t, path, "config", "current-context"); err != nil || strings.TrimSpace(out) != useContext {
		t.Fatalf("kubectl current-context after use-context %s: %q %v", useContext, out, err)
	}
	return names
}

var testCA = base64.StdEncoding.EncodeToString([]byte("not a real CA"))

func entry(cluster string) KubeconfigEntry {
	return KubeconfigEntry{Cluster: cluster, Region: "eu-west-1", Endpoint: "https://" + cluster + ".example", CAData: testCA, KilnPath: "/usr/bin/kiln"}
}

// userKubeconfig writes a user's own kubeconfig (context "mine") at
// target with mode, reached through a symlink; it returns the link.
func userKubeconfig(t *testing.T, mode os.FileMode) (link, target string) {
	t.Helper()
	d := t.TempDir()
	target = filepath.Join(d, "real", "config")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["mine"] = &clientcmdapi.Cluster{Server: "https://mine.example"}
	cfg.AuthInfos["mine"] = &clientcmdapi.AuthInfo{Token: "keep-me"}
	cfg.Contexts["mine"] = &clientcmdapi.Context{Cluster: "mine", AuthInfo: "mine"}
	cfg.CurrentContext = "mine"
	if err := clientcmd.WriteToFile(*cfg, target); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, mode); err != nil {
		t.Fatal(err)
	}
	link = filepath.Join(d, "home", ".kube", "config")
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link, target
}

func noLeftovers(t *testing.T, link, target string) {
	t.Helper()
	if _, err := os.Lstat(link + ".lock"); err == nil {
		t.Errorf("%s.lock left behind", link)
	}
	for _, dir := range []string{filepath.Dir(link), filepath.Dir(target)} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), ".kiln-") {
				t.Errorf("leftover %s in %s", e.Name(), dir)
			}
		}
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s is no longer a symlink (%v)", link, err)
	}
}

func TestKubeconfigWritesKeepKubectlWorking(t *testing.T) {
	link, target := userKubeconfig(t, 0o640)
	for _, c := range []string{"one", "two", "one"} {
		warnings, err := WriteKubeconfig(t.Context(), link, entry(c))
		if err != nil || len(warnings) > 0 {
			t.Fatalf("write %s: %v %v", c, err, warnings)
		}
		noLeftovers(t, link, target)
		names := kubectlWorks(t, link, ContextName(c))
		if !names["mine"] || !names[ContextName(c)] {
			t.Fatalf("kubectl sees contexts %v after writing %s", names, c)
		}
		// kubectl wrote current-context through the link: kiln's next
		// write keeps it.
		if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("target mode %v, want 0640 kept (%v)", fi.Mode().Perm(), err)
		}
	}
	cfg, err := clientcmd.LoadFromFile(target)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != ContextName("one") || cfg.AuthInfos["mine"].Token != "keep-me" || len(cfg.Contexts) != 3 {
		t.Errorf("after kiln and kubectl writes: current %s, contexts %d", cfg.CurrentContext, len(cfg.Contexts))
	}
}

func TestKubeconfigNewFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube", "config")
	if _, err := WriteKubeconfig(t.Context(), path, entry("fresh")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new kubeconfig mode %v, want 0600 (%v)", fi.Mode().Perm(), err)
	}
	if names := kubectlWorks(t, path, ContextName("fresh")); !names[ContextName("fresh")] {
		t.Errorf("kubectl sees %v", names)
	}
}

// TestKubeconfigRemoveUndoesWrite: destroy removes the context, cluster
// and user kiln wrote, clears current-context if it named them, and
// leaves everything else.
func TestKubeconfigRemoveUndoesWrite(t *testing.T) {
	link, target := userKubeconfig(t, 0o600)
	for _, c := range []string{"gone", "stays"} {
		if _, err := WriteKubeconfig(t.Context(), link, entry(c)); err != nil {
			t.Fatal(err)
		}
	}
	kubectlWorks(t, link, ContextName("gone"))
	removed, _, err := RemoveKubeconfig(t.Context(), link, "gone")
	if err != nil || !removed {
		t.Fatalf("remove: %v %v", removed, err)
	}
	noLeftovers(t, link, target)
	cfg, err := clientcmd.LoadFromFile(target)
	if err != nil {
		t.Fatal(err)
	}
	n := ContextName("gone")
	if cfg.Contexts[n] != nil || cfg.Clusters[n] != nil || cfg.AuthInfos[n] != nil {
		t.Errorf("entries of %s left: context %v cluster %v user %v", n, cfg.Contexts[n] != nil, cfg.Clusters[n] != nil, cfg.AuthInfos[n] != nil)
	}
	if cfg.CurrentContext != "" {
		t.Errorf("current-context %q still names the removed context", cfg.CurrentContext)
	}
	if cfg.Contexts["mine"] == nil || cfg.Contexts[ContextName("stays")] == nil {
		t.Errorf("other contexts removed: %v", cfg.Contexts)
	}
	names := kubectlWorks(t, link, "mine")
	if names[n] {
		t.Errorf("kubectl still sees %s", n)
	}
	// Nothing to remove: no change, no error; a missing file stays missing.
	if removed, _, err := RemoveKubeconfig(t.Context(), link, "gone"); err != nil || removed {
		t.Errorf("second remove: %v %v", removed, err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, _, err := RemoveKubeconfig(t.Context(), missing, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("remove created a kubeconfig")
	}
}

const childEnv = "KILN_TEST_KUBECONFIG_CHILD"

// TestKubeconfigKilledDuringWrite kills (SIGKILL) a kiln process while it
// holds the lock with the new file half written, then checks what the user
// is left with: the old complete file, readable by kubectl; and the next
// kiln write clears the stale lock and the temp file, after which kubectl
// can change the file again.
func TestKubeconfigKilledDuringWrite(t *testing.T) {
	if p := os.Getenv(childEnv); p != "" {
		e := entry("crash")
		e.Hooks = testhooks.FromEnv()
		_, err := WriteKubeconfig(t.Context(), p, e)
		fmt.Fprintln(os.Stderr, "child finished without being killed:", err)
		os.Exit(3)
	}
	link, target := userKubeconfig(t, 0o600)
	if _, err := WriteKubeconfig(t.Context(), link, entry("before")); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"kubeconfig-locked", "kubeconfig-half-written"} {
		t.Run(at, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestKubeconfigKilledDuringWrite$")
			cmd.Env = append(os.Environ(), childEnv+"="+link, testhooks.CrashEnv+"="+at)
			out, err := cmd.CombinedOutput()
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child not killed at %s: %v\n%s", at, err, out)
			}
			lock, err := os.ReadFile(link + ".lock")
			if err != nil || !strings.HasPrefix(string(lock), "kiln pid=") {
				t.Fatalf("want the killed kiln's lock left behind, got %q %v", lock, err)
			}
			now, err := os.ReadFile(target)
			if err != nil || string(now) != string(before) {
				t.Fatalf("the kubeconfig changed although the write was killed")
			}
			// kubectl reads the old complete file.
			out2, err := kubectl(t, link, "config", "view", "-o", "json")
			if err != nil || !strings.Contains(out2, ContextName("before")) || strings.Contains(out2, ContextName("crash")) {
				t.Fatalf("kubectl config view after the kill: %v\n%s", err, out2)
			}
			// The next kiln write clears what the killed one left.
			warnings, err := WriteKubeconfig(t.Context(), link, entry("after"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(warnings, "\n"), "stale lock") {
				t.Errorf("no warning about the stale lock: %v", warnings)
			}
			noLeftovers(t, link, target)
			if names := kubectlWorks(t, link, ContextName("after")); !names[ContextName("before")] || !names["mine"] {
				t.Errorf("kubectl sees %v", names)
			}
			if _, _, err := RemoveKubeconfig(t.Context(), link, "after"); err != nil {
				t.Fatal(err)
			}
			before, _ = os.ReadFile(target)
		})
	}
}

// TestKubeconfigNeverRemovesALiveLock: kubectl's lock (an empty file) and
// a live process's kiln lock are waited for, then reported, never removed.
func TestKubeconfigNeverRemovesALiveLock(t *testing.T) {
	host, _ := os.Hostname()
	parent := os.Getppid()
	for name, content := range map[string]string{
		"kubectl":       "",
		"live kiln":     fmt.Sprintf("kiln pid=%d host=%s boot=%s start=%s\n", parent, host, bootID(), processStart(parent)),
		"other host":    "kiln pid=1 host=elsewhere.example boot=x start=1\n",
		"unknown owner": "something else\n",
	} {
		t.Run(name, func(t *testing.T) {
			link, _ := userKubeconfig(t, 0o600)
			if err := os.WriteFile(link+".lock", []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			blocked := entry("blocked")
			blocked.LockWait = 200 * time.Millisecond
			_, err := WriteKubeconfig(t.Context(), link, blocked)
			if err == nil || !strings.Contains(err.Error(), link+".lock") {
				t.Fatalf("want an error naming the lock, got %v", err)
			}
			got, err := os.ReadFile(link + ".lock")
			if err != nil || string(got) != content {
				t.Fatalf("the lock was removed or changed: %q %v", got, err)
			}
		})
	}
	// A lock of a dead kiln of this host is stale.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	link, _ := userKubeconfig(t, 0o600)
	stale := fmt.Sprintf("kiln pid=%d host=%s boot=%s start=1\n", dead.Process.Pid, host, bootID())
	if err := os.WriteFile(link+".lock", []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	freed := entry("freed")
	freed.LockWait = 200 * time.Millisecond
	if _, err := WriteKubeconfig(t.Context(), link, freed); err != nil {
		t.Fatalf("stale lock of a dead kiln not cleared: %v", err)
	}
}

// TestKubeconfigFileList: with a list of files, as in $KUBECONFIG, kiln
// writes where kubectl config set-* does: a new entry to the first
// existing file, an existing one in the file that defines it; remove
// deletes entries from the file that defines them; a missing file of the
// list stays missing. kubectl reads the merged result.
func TestKubeconfigFileList(t *testing.T) {
	d := t.TempDir()
	first, firstTarget := userKubeconfig(t, 0o600) // context "mine", current
	second, missing := filepath.Join(d, "second"), filepath.Join(d, "missing")
	if _, err := WriteKubeconfig(t.Context(), second, entry("old")); err != nil {
		t.Fatal(err)
	}
	list := strings.Join([]string{missing, first, second}, string(filepath.ListSeparator))
	kubectlList := func(args ...string) string {
		t.Helper()
		kubectl(t, first, "version", "--client") // skips without kubectl
		cmd := exec.CommandContext(t.Context(), "kubectl", args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+list)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	load := func(path string) *clientcmdapi.Config {
		t.Helper()
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	kubectlList("config", "set-context", "by-kubectl", "--cluster", "mine")
	if _, err := WriteKubeconfig(t.Context(), list, entry("new")); err != nil {
		t.Fatal(err)
	}
	updated := entry("old")
	updated.Endpoint = "https://moved.example"
	if _, err := WriteKubeconfig(t.Context(), list, updated); err != nil {
		t.Fatal(err)
	}
	a, b := load(first), load(second)
	if a.Contexts["by-kubectl"] == nil {
		t.Fatalf("kubectl wrote its new context elsewhere than %s", first)
	}
	n, o := ContextName("new"), ContextName("old")
	if a.Contexts[n] == nil || a.Clusters[n] == nil || a.AuthInfos[n] == nil || b.Contexts[n] != nil {
		t.Errorf("the new entries are not (only) in the first existing file %s", first)
	}
	if a.Contexts[o] != nil || a.Clusters[o] != nil || a.AuthInfos[o] != nil || b.Clusters[o] == nil || b.Clusters[o].Server != "https://moved.example" {
		t.Errorf("the existing entries were not updated in %s, the file that defines them", second)
	}
	if a.CurrentContext != "mine" || b.CurrentContext != o {
		t.Errorf("current contexts changed: %q %q", a.CurrentContext, b.CurrentContext)
	}
	got := strings.Fields(kubectlList("config", "get-contexts", "-o", "name"))
	slices.Sort(got)
	if want := []string{"by-kubectl", n, o, "mine"}; !slices.Equal(got, want) {
		t.Errorf("kubectl config get-contexts: %v, want %v", got, want)
	}
	if out := kubectlList("config", "view", "--minify", "--context", o, "-o", "jsonpath={.clusters[0].cluster.server}"); out != "https://moved.example" {
		t.Errorf("kubectl sees %s's server as %q", o, out)
	}
	if cur := strings.TrimSpace(kubectlList("config", "current-context")); cur != "mine" {
		t.Errorf("kubectl current-context %q", cur)
	}
	removed, _, err := RemoveKubeconfig(t.Context(), list, "old")
	if err != nil || !removed {
		t.Fatalf("remove: %v %v", removed, err)
	}
	b = load(second)
	if len(b.Contexts)+len(b.Clusters)+len(b.AuthInfos) != 0 || b.CurrentContext != "" {
		t.Errorf("%s still holds %v %v %v %q", second, b.Contexts, b.Clusters, b.AuthInfos, b.CurrentContext)
	}
	if a := load(first); a.Contexts[n] == nil || a.Contexts["mine"] == nil || a.CurrentContext != "mine" {
		t.Errorf("remove changed %s", first)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("%s was created", missing)
	}
	noLeftovers(t, first, firstTarget)
	if _, err := os.Stat(second + ".lock"); err == nil {
		t.Errorf("%s.lock left behind", second)
	}
	// A list of missing files: the last one is created (kubectl's choice too).
	none := strings.Join([]string{filepath.Join(d, "x"), filepath.Join(d, "y")}, string(filepath.ListSeparator))
	if _, err := WriteKubeconfig(t.Context(), none, entry("fresh")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "x")); err == nil {
		t.Error("the first missing file was created")
	}
	if cfg := load(filepath.Join(d, "y")); cfg.CurrentContext != ContextName("fresh") {
		t.Errorf("the last missing file has current-context %q", cfg.CurrentContext)
	}
}
