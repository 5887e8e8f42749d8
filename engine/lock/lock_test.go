package lock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kilnctl/kiln/internal/exit"
	"github.com/kilnctl/kiln/internal/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m, testcluster.Options{}, &cluster)) }

const leaseName = "kiln-lock"

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fixedClock returns a clock stuck at t, truncated to what a MicroTime keeps.
func fixedClock(t time.Time) func() time.Time {
	t = t.Truncate(time.Microsecond)
	return func() time.Time { return t }
}

func getLease(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) *coordinationv1.Lease {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	return l
}

func holderOf(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// acquire takes the lock and releases it when the test ends.
func acquire(t *testing.T, ctx context.Context, opts Options) (*Lock, context.Context) {
	t.Helper()
	l, lctx, err := Acquire(ctx, cluster.Client, opts)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", opts.Operation, err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l, lctx
}

// writeLease creates the lease by hand, as another kiln would have left it.
func writeLease(t *testing.T, ctx context.Context, ns, holder string, renewed time.Time, seconds, transitions int32) {
	t.Helper()
	at := metav1.NewMicroTime(renewed)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: ns},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To(seconds),
			AcquireTime:          &at,
			RenewTime:            &at,
			LeaseTransitions:     ptr.To(transitions),
		},
	}
	if _, err := cluster.Client.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create lease by hand: %v", err)
	}
}

func TestAcquireCreatesLeaseAndReleaseFreesIt(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	start := time.Now().Add(-time.Hour)
	labels := map[string]string{"app.kubernetes.io/managed-by": "kiln", "kiln.dev/cluster": "dev1"}

	l, lctx, err := Acquire(ctx, cs, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Labels: labels, Now: fixedClock(start)})
	if err != nil {
		t.Fatal(err)
	}
	lease := getLease(t, ctx, cs, ns)

	host, _ := os.Hostname()
	want := regexp.MustCompile(`^kiln create dev1 by \S+@` + regexp.QuoteMeta(host) + fmt.Sprintf(` pid %d$`, os.Getpid()))
	if h := holderOf(lease); !want.MatchString(h) || h != l.Holder() {
		t.Errorf("holder = %q (Holder() = %q), want to match %s", h, l.Holder(), want)
	}
	if got := ptr.Deref(lease.Spec.LeaseDurationSeconds, 0); got != int32(DefaultDuration/time.Second) {
		t.Errorf("leaseDurationSeconds = %d, want %d", got, DefaultDuration/time.Second)
	}
	for name, ts := range map[string]*metav1.MicroTime{"acquireTime": lease.Spec.AcquireTime, "renewTime": lease.Spec.RenewTime} {
		if ts == nil || !ts.Time.Equal(start.Truncate(time.Microsecond)) {
			t.Errorf("%s = %v, want %v", name, ts, start)
		}
	}
	if got := ptr.Deref(lease.Spec.LeaseTransitions, -1); got != 0 {
		t.Errorf("leaseTransitions = %d, want 0", got)
	}
	for k, v := range labels {
		if lease.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, lease.Labels[k], v)
		}
	}
	if lctx.Err() != nil {
		t.Fatalf("operation context done while holding the lock: %v", context.Cause(lctx))
	}

	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	lease = getLease(t, ctx, cs, ns)
	if lease.Spec.HolderIdentity != nil || lease.Spec.RenewTime != nil || lease.Spec.AcquireTime != nil {
		t.Errorf("after Release: holder=%v renewTime=%v acquireTime=%v, want all cleared",
			lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.AcquireTime)
	}
	if lctx.Err() == nil {
		t.Errorf("operation context still live after Release")
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("second Release: %v", err)
	}

	// A released lease is free at once, long before it would have expired.
	l2, _ := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "destroy dev1", Now: fixedClock(start)})
	if h := holderOf(getLease(t, ctx, cs, ns)); h != l2.Holder() || !strings.HasPrefix(h, "kiln destroy dev1 by ") {
		t.Errorf("after re-acquire holder = %q, want %q", h, l2.Holder())
	}
}

func TestAcquireWhileHeldIsLocked(t *testing.T) {
	tests := []struct {
		name     string
		duration time.Duration
		wantSecs int32
	}{
		{"default duration", 0, 15},
		{"short duration", 3 * time.Second, 3},
		// A sub-second duration must not be stored as 0 seconds, which
		// would make the lease look expired to everyone else at once.
		{"sub-second duration", 300 * time.Millisecond, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			since := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
			first, _ := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: tt.duration, Now: fixedClock(since)})

			_, _, err := Acquire(ctx, cluster.Client, Options{Namespace: ns, Name: leaseName, Operation: "destroy dev1", Duration: tt.duration, Now: fixedClock(since)})
			if err == nil {
				t.Fatal("second Acquire succeeded while the lease is held")
			}
			if code := exit.Code(err); code != exit.Locked {
				t.Errorf("exit code = %d, want %d (err: %v)", code, exit.Locked, err)
			}
			msg := err.Error()
			for _, want := range []string{ns + "/" + leaseName, first.Holder(), "since " + since.Format(time.RFC3339), fmt.Sprintf("expires %ds", tt.wantSecs)} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
			if h := holderOf(getLease(t, ctx, cluster.Client, ns)); h != first.Holder() {
				t.Errorf("holder changed to %q by a failed Acquire", h)
			}
		})
	}
}

func TestExpiredLeaseIsTakenOver(t *testing.T) {
	tests := []struct {
		name string
		// setup leaves a lease behind and returns the transitions it has.
		setup func(t *testing.T, ctx context.Context, ns string) int32
		now   func() time.Time
	}{
		{
			name: "held by a live Lock, contender's clock past expiry",
			setup: func(t *testing.T, ctx context.Context, ns string) int32 {
				acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: 5 * time.Second})
				return 0
			},
			now: fixedClock(time.Now().Add(time.Hour)),
		},
		{
			name: "written by a holder on another host that stopped renewing",
			setup: func(t *testing.T, ctx context.Context, ns string) int32 {
				writeLease(t, ctx, ns, "kiln create dev1 by ci@elsewhere.example pid 4242", time.Now().Add(-time.Minute), 15, 3)
				return 3
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			before := tt.setup(t, ctx, ns)
			old := getLease(t, ctx, cluster.Client, ns)

			l, _ := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "take over", Now: tt.now})
			lease := getLease(t, ctx, cluster.Client, ns)
			if h := holderOf(lease); h != l.Holder() {
				t.Errorf("holder = %q, want %q", h, l.Holder())
			}
			if got := ptr.Deref(lease.Spec.LeaseTransitions, -1); got != before+1 {
				t.Errorf("leaseTransitions = %d, want %d", got, before+1)
			}
			if lease.Spec.AcquireTime == nil || !lease.Spec.AcquireTime.After(old.Spec.AcquireTime.Time) {
				t.Errorf("acquireTime = %v, want after the old holder's %v", lease.Spec.AcquireTime, old.Spec.AcquireTime)
			}
		})
	}
}

func TestLocalHolderLiveness(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sleeper.Process.Kill()
		_ = sleeper.Wait()
	})

	tests := []struct {
		name     string
		holder   string
		takeOver bool
	}{
		{"this host, pid of an exited child", fmt.Sprintf("kiln create dev1 by me@%s pid %d", host, exited.Process.Pid), true},
		{"this host, pid that cannot exist", fmt.Sprintf("kiln create dev1 by me@%s pid 2147480000", host), true},
		{"this host, user with an at sign, dead pid", fmt.Sprintf("kiln create dev1 by me@corp.example@%s pid 2147480000", host), true},
		{"this host, live parent pid", fmt.Sprintf("kiln create dev1 by me@%s pid %d", host, os.Getppid()), false},
		{"this host, live sleeping child", fmt.Sprintf("kiln create dev1 by me@%s pid %d", host, sleeper.Process.Pid), false},
		{"this host, this process", fmt.Sprintf("kiln create dev1 by me@%s pid %d", host, os.Getpid()), false},
		{"other host, dead pid", "kiln create dev1 by me@not-" + host + " pid 2147480000", false},
		{"this host, unparsable pid", fmt.Sprintf("kiln create dev1 by me@%s pid x", host), false},
		{"not a kiln identity", "some-controller-7d9f", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			// Renewed just now with an hour to go: only a dead local
			// holder justifies taking it.
			writeLease(t, ctx, ns, tt.holder, time.Now(), 3600, 0)

			l, _, err := Acquire(ctx, cluster.Client, Options{Namespace: ns, Name: leaseName, Operation: "create dev1"})
			if tt.takeOver {
				if err != nil {
					t.Fatalf("Acquire over dead holder %q: %v", tt.holder, err)
				}
				t.Cleanup(func() { _ = l.Release(context.Background()) })
				if h := holderOf(getLease(t, ctx, cluster.Client, ns)); h != l.Holder() {
					t.Errorf("holder = %q, want %q", h, l.Holder())
				}
				return
			}
			if err == nil {
				_ = l.Release(ctx)
				t.Fatalf("Acquire took over the lease of live or foreign holder %q", tt.holder)
			}
			if code := exit.Code(err); code != exit.Locked || !strings.Contains(err.Error(), tt.holder) {
				t.Errorf("err = %v (exit %d), want exit %d naming %q", err, code, exit.Locked, tt.holder)
			}
			if h := holderOf(getLease(t, ctx, cluster.Client, ns)); h != tt.holder {
				t.Errorf("holder changed to %q", h)
			}
		})
	}
}

// watchLease calls ok on every version of the lease after rv until it
// returns true.
func watchLease(t *testing.T, ctx context.Context, ns, rv string, ok func(*coordinationv1.Lease) bool) {
	t.Helper()
	w, err := cluster.Client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", leaseName).String(),
		ResourceVersion: rv,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("lease never reached the expected state: %v", ctx.Err())
		case ev, open := <-w.ResultChan():
			if !open {
				t.Fatal("lease watch closed")
			}
			if ev.Type == watch.Error {
				t.Fatalf("lease watch error: %v", apierrors.FromObject(ev.Object))
			}
			if lease, isLease := ev.Object.(*coordinationv1.Lease); isLease && ok(lease) {
				return
			}
		}
	}
}

func TestRenewalAdvancesRenewTime(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	l, lctx := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: 3 * time.Second})
	first := getLease(t, ctx, cluster.Client, ns)

	renewals := 0
	watchLease(t, ctx, ns, first.ResourceVersion, func(lease *coordinationv1.Lease) bool {
		if holderOf(lease) != l.Holder() {
			t.Fatalf("holder changed to %q during renewal", holderOf(lease))
		}
		if lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(first.Spec.RenewTime.Time) {
			renewals++
		}
		if !lease.Spec.AcquireTime.Equal(first.Spec.AcquireTime) {
			t.Errorf("acquireTime changed on renewal: %v -> %v", first.Spec.AcquireTime, lease.Spec.AcquireTime)
		}
		return renewals >= 2 // more than one round: renewal keeps going
	})
	if lctx.Err() != nil {
		t.Fatalf("operation cancelled while renewing: %v", context.Cause(lctx))
	}
	// Release works from the renewed resourceVersion.
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := getLease(t, ctx, cluster.Client, ns).Spec.HolderIdentity; h != nil {
		t.Errorf("holder after Release = %q, want none", *h)
	}
}

func TestLostLeaseCancelsOperation(t *testing.T) {
	tests := []struct {
		name string
		lose func(ctx context.Context, leases func() (*coordinationv1.Lease, error), cs kubernetes.Interface, ns string) error
		// stays is the holder expected afterwards ("" when the lease is gone).
		stays string
	}{
		{
			name: "taken over by another holder",
			lose: func(ctx context.Context, get func() (*coordinationv1.Lease, error), cs kubernetes.Interface, ns string) error {
				lease, err := get()
				if err != nil {
					return err
				}
				now := metav1.NowMicro()
				lease.Spec.HolderIdentity = ptr.To("kiln destroy dev1 by intruder@elsewhere pid 1")
				lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
				_, err = cs.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{})
				return err
			},
			stays: "kiln destroy dev1 by intruder@elsewhere pid 1",
		},
		{
			name: "deleted",
			lose: func(ctx context.Context, _ func() (*coordinationv1.Lease, error), cs kubernetes.Interface, ns string) error {
				return cs.CoordinationV1().Leases(ns).Delete(ctx, leaseName, metav1.DeleteOptions{})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			cs := cluster.Client
			l, lctx := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: 3 * time.Second})
			get := func() (*coordinationv1.Lease, error) {
				return cs.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
			}
			if err := tt.lose(ctx, get, cs, ns); err != nil {
				t.Fatal(err)
			}
			select {
			case <-lctx.Done():
			case <-ctx.Done():
				t.Fatal("operation context not cancelled after the lease was lost")
			}
			cause := context.Cause(lctx)
			if cause == nil || !strings.Contains(cause.Error(), "lost lease "+ns+"/"+leaseName) {
				t.Errorf("context.Cause = %v, want it to say lost lease %s/%s", cause, ns, leaseName)
			}
			// Release must leave the new holder alone.
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release after loss: %v", err)
			}
			lease, err := get()
			switch {
			case tt.stays == "" && !apierrors.IsNotFound(err):
				t.Errorf("lease after Release: %v, %v; want it still gone", lease, err)
			case tt.stays != "" && (err != nil || holderOf(lease) != tt.stays):
				t.Errorf("holder after Release = %q (%v), want %q untouched", holderOf(lease), err, tt.stays)
			}
		})
	}
}

// A renewal or release whose response was lost may still have been applied;
// the next write then conflicts with our own update. That must not read as
// a lost lease nor leave the lease held after Release.
func TestConflictWithOwnUnseenUpdate(t *testing.T) {
	bump := func(t *testing.T, ctx context.Context, ns string) {
		t.Helper()
		// What a renewal applied server-side but never answered looks like:
		// same holder and acquire time, newer renewTime and resourceVersion.
		lease := getLease(t, ctx, cluster.Client, ns)
		now := metav1.NowMicro()
		lease.Spec.RenewTime = &now
		if _, err := cluster.Client.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("release", func(t *testing.T) {
		ctx := testCtx(t)
		ns := cluster.Namespace(t)
		l, _ := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "create dev1"})
		bump(t, ctx, ns)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if h := getLease(t, ctx, cluster.Client, ns).Spec.HolderIdentity; h != nil {
			t.Fatalf("holder after Release = %q, want none: the lease would stay locked", *h)
		}
	})

	t.Run("renewal", func(t *testing.T) {
		ctx := testCtx(t)
		ns := cluster.Namespace(t)
		l, lctx := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: 3 * time.Second})
		bump(t, ctx, ns)
		bumped := getLease(t, ctx, cluster.Client, ns)
		// Wait for a renewal after the conflicting one has been handled.
		watchLease(t, ctx, ns, bumped.ResourceVersion, func(lease *coordinationv1.Lease) bool {
			return holderOf(lease) == l.Holder() && lease.Spec.RenewTime.After(bumped.Spec.RenewTime.Time)
		})
		if lctx.Err() != nil {
			t.Fatalf("operation cancelled by a conflict with our own renewal: %v", context.Cause(lctx))
		}
	})
}

func TestConcurrentAcquire(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	const n = 10
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		locks = make([]*Lock, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			locks[i], _, errs[i] = Acquire(ctx, cluster.Client, Options{Namespace: ns, Name: leaseName, Operation: fmt.Sprintf("op%d", i)})
		}()
	}
	close(start)
	wg.Wait()

	var winners []int
	for i := range n {
		if errs[i] == nil {
			winners = append(winners, i)
			t.Cleanup(func() { _ = locks[i].Release(context.Background()) })
			continue
		}
		if code := exit.Code(errs[i]); code != exit.Locked {
			t.Errorf("contender %d: exit code %d, want %d: %v", i, code, exit.Locked, errs[i])
		}
		var ee *exit.Error
		if !errors.As(errs[i], &ee) {
			t.Errorf("contender %d: error %v is not an exit.Error", i, errs[i])
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d contenders acquired the lease (%v), want exactly 1", len(winners), winners)
	}
	if h, want := holderOf(getLease(t, ctx, cluster.Client, ns)), locks[winners[0]].Holder(); h != want {
		t.Errorf("holder = %q, want the winner %q", h, want)
	}
}
