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
