package bundle

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSanitizeKeepsOnlySecretKeyNames(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "app-auth", Namespace: "ns", Annotations: map[string]string{lastApplied: `{"data":{"token-1":"c2VjcmV0"}}`},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kiln"}}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"token-1": []byte("super-secret-value")},
		StringData: map[string]string{"extra": "another-secret"},
	}
	out, ok := Sanitize(s).(*SecretSummary)
	if !ok {
		t.Fatalf("Sanitize(secret) = %T", Sanitize(s))
	}
	if strings.Join(out.Keys, ",") != "extra,token-1" || out.Name != "app-auth" || out.Type != corev1.SecretTypeOpaque {
		t.Errorf("summary %+v", out)
	}
	if s.Data["token-1"] == nil {
		t.Errorf("Sanitize changed its input")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{lastApplied: "x", "keep": "y"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kiln"}}}}
	got := Sanitize(cm).(*corev1.ConfigMap)
	if got.ManagedFields != nil || got.Annotations[lastApplied] != "" || got.Annotations["keep"] != "y" {
		t.Errorf("configmap not sanitized: %+v", got.ObjectMeta)
	}
}

func TestBundleIsOneIndexedPrivateArchive(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.tar.gz")
	b, err := Create(path, "root", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AddJSON("a.json", "thing a", map[string]int{"x": 1}); err != nil {
		t.Fatal(err)
	}
	b.Problem("could not read %s", "y")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", info, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".kiln-support-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	f, _ := os.Open(path)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = string(data)
	}
	idx := files["root/index.txt"]
	for _, want := range []string{"a.json", "thing a", "problems.txt", "index.txt"} {
		if !strings.Contains(idx, want) {
			t.Errorf("index lacks %q:\n%s", want, idx)
		}
	}
	if !strings.Contains(files["root/problems.txt"], "could not read y") {
		t.Errorf("problems.txt: %q", files["root/problems.txt"])
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	b, err := Create(filepath.Join(dir, "b.tar.gz"), "root", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.Abort()
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Errorf("abort left %v", ents)
	}
}

func TestBoundLogKeepsTheLastWholeLines(t *testing.T) {
	lim := Limits{LogLines: 3, LogBytes: 20}
	if out, cut := boundLog([]byte("a\nb\n"), lim); string(out) != "a\nb\n" || cut {
		t.Errorf("short log: %q %v", out, cut)
	}
	if out, cut := boundLog([]byte("1\n2\n3\n4\n5\n"), lim); string(out) != "3\n4\n5\n" || !cut {
		t.Errorf("long log: %q %v", out, cut)
	}
	// Over the byte limit: whole lines from the end of what came.
	if out, cut := boundLog([]byte("0123456789\nabcdefghij\nxyz\n"), lim); string(out) != "abcdefghij\nxyz\n" || !cut {
		t.Errorf("wide log: %q %v", out, cut)
	}
}

func TestSanitizeRedactsEnvironmentValues(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "A", Value: "init-secret"}}}},
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "B", Value: "app-secret"},
			{Name: "C", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}}},
	}}
	got := Sanitize(p).(*corev1.Pod)
	if got.Spec.InitContainers[0].Env[0].Value != Redacted || got.Spec.Containers[0].Env[0].Value != Redacted ||
		got.Spec.Containers[0].Env[1].ValueFrom.SecretKeyRef.Key != "k" || got.Spec.Containers[0].Env[0].Name != "B" {
		t.Errorf("env not redacted as it should be: %+v", got.Spec)
	}
	if p.Spec.Containers[0].Env[0].Value != "app-secret" {
		t.Errorf("Sanitize changed its input")
	}
	cm := &corev1.ConfigMap{Data: map[string]string{"config.yaml": "keep", "password": "hunter2"}, BinaryData: map[string][]byte{"b": []byte("x")}}
	RedactConfigMap(cm, []string{"config.yaml"})
	if cm.Data["config.yaml"] != "keep" || cm.Data["password"] != Redacted || string(cm.BinaryData["b"]) != Redacted {
		t.Errorf("configmap: %+v", cm)
	}
}
