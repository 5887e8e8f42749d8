package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kilnctl/kiln/engine/bundle"
)

// The support bundle holds kiln's objects only (issue #27 item 2): a
// tenant's own ConfigMap with a password is not in it at all, a ConfigMap
// merely labelled as kiln's keeps its key names but no value, a pod's
// environment values are redacted (names and valueFrom references kept),
// and each container's log is bounded to its last lines and listed in
// logs.json and index.txt as truncated. No secret value appears in any
// byte of any file, and the bundle is otherwise complete.
func TestSupportBundleHoldsKilnsObjectsOnly(t *testing.T) {
	skipShort(t)
	const name, kctx, ns = "bscope", "kiln-b", "kiln-tenant-default"
	e := newEnv(t)
	cleanup(t, e, name, kctx)
	expect(t, e.kiln("create", "kube", name, "--context", kctx), 0)
	expect(t, e.kiln("project", "create", "kube", name, "default/app", "--context", kctx), 0)
	cs := clientFor(kctx)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	stamp := time.Now().UnixNano()
	tenantPassword := fmt.Sprintf("tenant-pw-%d-Zq8", stamp)
	forgedPassword := fmt.Sprintf("forged-pw-%d-Xk3", stamp)
	envSecret := fmt.Sprintf("sk_live_%d_envSECRET", stamp)
	earlyLogSecret := fmt.Sprintf("early-log-secret-%d", stamp)
	values := []string{tenantPassword, forgedPassword, envSecret, earlyLogSecret}

	// A tenant's own ConfigMap, and one that claims to be kiln's.
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-settings"},
		Data:       map[string]string{"password": tenantPassword},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "forged", Labels: map[string]string{"app.kubernetes.io/managed-by": "kiln", "kiln.dev/cluster": name}},
		Data:       map[string]string{"password": forgedPassword},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The project's pods get a secret-looking environment value and a
	// reference to the tenant's ConfigMap.
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "app", "env": []any{
			map[string]any{"name": "API_PASSWORD", "value": envSecret},
			map[string]any{"name": "FROM_CM", "valueFrom": map[string]any{"configMapKeyRef": map[string]any{"name": "tenant-settings", "key": "password"}}},
		}}},
	}}}})
	dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 || dep.Spec.Template.Spec.Containers[0].Name != "app" {
		t.Fatalf("project container: %+v", dep.Spec.Template.Spec.Containers)
	}
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "app", types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "e2e"}); err != nil {
		t.Fatal(err)
	}
	var podName string
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "kiln.dev/project=app"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && len(p.Spec.Containers[0].Env) == 2 &&
				len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				podName = p.Name
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no running pod with the environment: %v", err)
	}
	// A long log whose first line holds a secret: only the last lines go
	// in the bundle.
	long := []string{earlyLogSecret}
	for i := range bundle.DefaultLimits.LogLines + 100 {
		long = append(long, fmt.Sprintf("long-log-line %d", i))
	}
	if err := clusterB.AppendPodLog(long...); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "b.tar.gz")
	r := e.kiln("support", "bundle", "kube", name, "--context", kctx, "--file", file)
	expect(t, r, 0)
	if strings.Contains(r.stderr, "could not be collected") {
		t.Errorf("bundle as admin could not collect everything:\n%s", r)
	}
	files := untar(t, file)

	// No secret value, in any file, raw or base64.
	for fname, data := range files {
		for _, v := range values {
			if strings.Contains(data, v) || strings.Contains(data, base64.StdEncoding.EncodeToString([]byte(v))) {
				t.Errorf("bundle file %s holds secret value %q", fname, v)
			}
		}
		if strings.Contains(data, "tenant-settings") && !strings.Contains(fname, "/Deployment/") && !strings.Contains(fname, "/ReplicaSet/") && !strings.Contains(fname, "/Pod/") {
			t.Errorf("bundle file %s names the tenant's own ConfigMap", fname)
		}
	}
	for fname := range files {
		for _, notKilns := range []string{"ConfigMap/tenant-settings", "ConfigMap/kube-root-ca.crt", "ServiceAccount/default"} {
			if strings.HasSuffix(fname, notKilns+".json") {
				t.Errorf("bundle holds %s, which kiln did not make", fname)
			}
		}
	}
	forged := files["objects/"+ns+"/ConfigMap/forged.json"]
	if !strings.Contains(forged, `"password": "`+bundle.Redacted+`"`) {
		t.Errorf("ConfigMap labelled as kiln's: want its key with a redacted value:\n%s", forged)
	}
	if !strings.Contains(files["objects/kiln-system/ConfigMap/kiln-config.json"], "ClusterConfig") {
		t.Errorf("kiln-config lost its data:\n%s", files["objects/kiln-system/ConfigMap/kiln-config.json"])
	}
	if !strings.Contains(files["objects/"+ns+"/ConfigMap/kiln-project-app.json"], "stack") {
		t.Errorf("the project's spec lost its data:\n%s", files["objects/"+ns+"/ConfigMap/kiln-project-app.json"])
	}
	for _, f := range []string{"objects/" + ns + "/Deployment/app.json", "objects/" + ns + "/Pod/" + podName + ".json"} {
		var obj struct {
			Spec struct {
				Containers []corev1.Container `json:"containers"`
				Template   struct {
					Spec struct {
						Containers []corev1.Container `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal([]byte(files[f]), &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cont := append(obj.Spec.Containers, obj.Spec.Template.Spec.Containers...)
		if len(cont) != 1 || len(cont[0].Env) != 2 {
			t.Fatalf("%s: containers %+v", f, cont)
		}
		env := cont[0].Env
		if env[0].Name != "API_PASSWORD" || env[0].Value != bundle.Redacted {
			t.Errorf("%s: env %+v, want API_PASSWORD redacted", f, env[0])
		}
		if env[1].Name != "FROM_CM" || env[1].ValueFrom == nil || env[1].ValueFrom.ConfigMapKeyRef == nil ||
			env[1].ValueFrom.ConfigMapKeyRef.Name != "tenant-settings" || env[1].ValueFrom.ConfigMapKeyRef.Key != "password" {
			t.Errorf("%s: env %+v, want the valueFrom reference kept", f, env[1])
		}
	}

	// Logs: bounded, each listed with whether it was truncated.
	var logs []bundle.LogEntry
	if err := json.Unmarshal([]byte(files["logs.json"]), &logs); err != nil {
		t.Fatalf("logs.json: %v\n%s", err, files["logs.json"])
	}
	listed := map[string]bool{}
	var appLog *bundle.LogEntry
	for i, l := range logs {
		listed[l.File] = true
		if l.Pod == podName && l.Container == "app" && !l.Previous {
			appLog = &logs[i]
		}
		if _, ok := files[l.File]; !ok {
			t.Errorf("logs.json lists %s, not in the bundle", l.File)
		}
	}
	for fname, data := range files {
		if strings.HasPrefix(fname, "logs/") {
			if !listed[fname] {
				t.Errorf("log %s not in logs.json", fname)
			}
			if n := strings.Count(data, "\n"); int64(n) > bundle.DefaultLimits.LogLines || int64(len(data)) > bundle.DefaultLimits.LogBytes {
				t.Errorf("log %s: %d lines, %d bytes, over the limits", fname, n, len(data))
			}
		}
	}
	if appLog == nil {
		t.Fatalf("logs.json has no log of pod %s: %s", podName, files["logs.json"])
	}
	data := files[appLog.File]
	if !appLog.Truncated || int64(appLog.Lines) != bundle.DefaultLimits.LogLines || !strings.HasSuffix(data, fmt.Sprintf("long-log-line %d\n", bundle.DefaultLimits.LogLines+99)) {
		t.Errorf("app log: %+v, ends %q; want truncated to the last %d lines", *appLog, data[max(0, len(data)-60):], bundle.DefaultLimits.LogLines)
	}
	idx := files["index.txt"]
	for _, line := range strings.Split(idx, "\n") {
		if strings.HasPrefix(line, appLog.File+" ") && !strings.Contains(line, "TRUNCATED") {
			t.Errorf("index.txt does not say the log was truncated: %q", line)
		}
	}

	// Otherwise complete.
	for _, want := range []string{
		"index.txt", "versions.json", "cluster.json", "key-ids.json", "discovery.ndjson", "kiln-config.yaml", "logs.json",
		"projects.json", "leases.json", "events/" + ns + ".json", "pods/" + ns + ".json", "pods/kiln-system.json",
		"objects/kiln-system/ConfigMap/kiln-auth.json", "objects/kiln-system/Deployment/kiln-gateway.json",
		"objects/kiln-system/Service/kiln-gateway.json", "objects/kiln-system/ServiceAccount/kiln-gateway.json",
		"objects/kiln-system/NetworkPolicy/kiln-deny-ingress.json", "objects/kiln-system/Ingress/default.app.json",
		"objects/" + ns + "/Secret/app-auth.json", "objects/" + ns + "/Deployment/app.json", "objects/" + ns + "/Service/app.json",
		"objects/" + ns + "/Lease/kiln-project-app.json", "objects/" + ns + "/NetworkPolicy/kiln-allow-from-gateway.json",
	} {
		if _, ok := files[want]; !ok {
			t.Errorf("bundle lacks %s; has %v", want, keys(files))
		}
	}
	var haveRS, haveSlice bool
	for fname := range files {
		haveRS = haveRS || strings.HasPrefix(fname, "objects/"+ns+"/ReplicaSet/app-")
		haveSlice = haveSlice || strings.HasPrefix(fname, "objects/"+ns+"/EndpointSlice/app-")
		if fname != "index.txt" && !strings.Contains(idx, fname) {
			t.Errorf("index.txt does not list %s", fname)
		}
	}
	if !haveRS || !haveSlice {
		t.Errorf("bundle lacks the project's ReplicaSet (%v) or EndpointSlice (%v): %v", haveRS, haveSlice, keys(files))
	}
	if !strings.Contains(files["events/"+ns+".json"], "ScalingReplicaSet") {
		t.Errorf("events lack the project's Deployment's events")
	}
	if _, ok := files["problems.txt"]; ok {
		t.Errorf("problems.txt:\n%s", files["problems.txt"])
	}
	var all strings.Builder
	for fname, data := range files {
		all.WriteString(fname + "\n" + data + "\n")
	}
	outputsMu.Lock()
	outputs = append(outputs, all.String())
	outputsMu.Unlock()
}
