package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kilnctl/kiln/engine/lock"
)

// setLeaseHolder writes a lease's holder as another kiln on another machine
// would (holder "" clears it), renewed now.
func setLeaseHolder(t *testing.T, cs kubernetes.Interface, ns, name, holder string, exclusive bool) {
	t.Helper()
	ctx := context.Background()
	// Retried on conflict: the lease's holder may renew it in between.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NowMicro()
		l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To(holder), &now, &now
		l.Spec.LeaseDurationSeconds = ptr.To(int32(15))
		if holder == "" {
			l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = nil, nil, nil
		}
		delete(l.Annotations, lock.AnnotationExclusive)
		if exclusive {
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			}
			l.Annotations[lock.AnnotationExclusive] = "true"
		}
		_, err = cs.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("set holder of lease %s/%s: %v", ns, name, err)
	}
}

// A project operation is refused while a destroy holds the cluster; a
// destroy is refused while a project operation runs; and a project
// operation whose lease is taken from it ends with exit 4 saying to whom.
func TestLocksClusterProjectExclusionAndLostLock(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "excl", "kiln-b")
	cs := clusterB.Client
	const tenantNS, projectLease = "kiln-tenant-default", "kiln-project-app"
	expect(t, e.kiln("create", "kube", "excl", "--context", "kiln-b"), 0)
	args := func(op string) []string {
		return []string{"project", op, "kube", "excl", "default/app", "--context", "kiln-b", "-o", "json"}
	}
	expect(t, e.kiln(args("create")...), 0)

	// A destroy (on another machine) holds the cluster lease.
	destroyer := "kiln destroy excl by bob@ci-3 pid 88"
	setLeaseHolder(t, cs, "kiln-system", "kiln-lock", destroyer, true)
	r := e.kiln(args("start")...)
	expect(t, r, 4)
	if msg := r.last(t, "result")["message"].(string); !strings.Contains(msg, "kiln-system/kiln-lock is locked by "+destroyer) || !strings.Contains(msg, "project operations are refused") {
		t.Errorf("exit 4 message %q does not name the destroy", msg)
	}
	setLeaseHolder(t, cs, "kiln-system", "kiln-lock", "", false)

	// A project operation runs (held at a checkpoint): destroy is refused
	// and gives the cluster lease back.
	out := filepath.Join(t.TempDir(), "suspend.out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	release := filepath.Join(t.TempDir(), "release")
	cmd := e.command(ctx, []string{"KILN_TEST_PAUSE_AT=after-ingress", "KILN_TEST_PAUSE_FILE=" + release}, args("suspend")...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, release+".reached")
	r = e.kiln("destroy", "kube", "excl", "--context", "kiln-b", "--yes", "-o", "json")
	expect(t, r, 4)
	if msg := r.last(t, "result")["message"].(string); !strings.Contains(msg, tenantNS+"/"+projectLease+" is locked by kiln project suspend default/app") || !strings.Contains(msg, "destroy refuses while a project operation runs") {
		t.Errorf("exit 4 message %q does not name the project operation", msg)
	}
	cl, err := cs.CoordinationV1().Leases("kiln-system").Get(ctx, "kiln-lock", metav1.GetOptions{})
	if err != nil || cl.Spec.HolderIdentity != nil {
		t.Errorf("refused destroy left the cluster lease: %v, %v", cl, err)
	}

	// Another operation takes the project lease: the suspend notices,
	// stops, and exits 4 naming it.
	intruder := "kiln project start default/app by intruder@elsewhere pid 1"
	setLeaseHolder(t, cs, tenantNS, projectLease, intruder, false)
	t.Cleanup(func() { setLeaseHolder(t, cs, tenantNS, projectLease, "", false) })
	lost := "lost lock " + tenantNS + "/" + projectLease + " to " + intruder
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(out)
		return strings.Contains(string(b), lost), err
	})
	if err != nil {
		t.Fatalf("the paused suspend never noticed its lease was taken: %v", err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	r = e.finish(cmd, werr, bytes.NewBuffer(b), &stderr)
	expect(t, r, 4)
	if msg := r.last(t, "result")["message"].(string); !strings.Contains(msg, lost) {
		t.Errorf("result %q does not say the lock was lost to %s", msg, intruder)
	}
}
