package lock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
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
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
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
	want := regexp.MustCompile(`^kiln create dev1 by \S+@` + regexp.QuoteMeta(host) + fmt.Sprintf(` pid %d \[boot=[0-9a-f-]+ pidns=\d+ start=\d+ n=\d+\]$`, os.Getpid()))
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
			if code := failure.Of(err); code != failure.Locked {
				t.Errorf("exit code = %d, want %v (err: %v)", code, failure.Locked, err)
			}
			msg := err.Error()
			for _, want := range []string{ns + "/" + leaseName, "locked by " + Who(first.Holder()) + " since " + since.Format(time.RFC3339), fmt.Sprintf("(%ds)", tt.wantSecs)} {
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

// A held lease whose timestamps look stale (or lie in the future) is
// watched on the contender's own clock and taken over only once it stayed
// unchanged for its duration.
func TestUnrenewedLeaseIsTakenOverAfterItsDuration(t *testing.T) {
	tests := []struct {
		name    string
		renewed time.Time
	}{
		{"holder on another machine stopped renewing a minute ago", time.Now().Add(-time.Minute)},
		{"dead holder whose clock was an hour ahead", time.Now().Add(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			writeLease(t, ctx, ns, "kiln create dev1 by ci@elsewhere.example pid 4242 [boot=0b0e0000-0000-0000-0000-000000000000 pidns=1 start=1 n=1]", tt.renewed, 2, 3)
			old := getLease(t, ctx, cluster.Client, ns)

			var logs []string
			l, _ := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "take over",
				Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }})
			lease := getLease(t, ctx, cluster.Client, ns)
			if h := holderOf(lease); h != l.Holder() {
				t.Errorf("holder = %q, want %q", h, l.Holder())
			}
			if got := ptr.Deref(lease.Spec.LeaseTransitions, -1); got != 4 {
				t.Errorf("leaseTransitions = %d, want 4", got)
			}
			if lease.Spec.AcquireTime.Equal(old.Spec.AcquireTime) {
				t.Errorf("acquireTime unchanged by the takeover")
			}
			joined := strings.Join(logs, "\n")
			for _, want := range []string{"waiting up to 2s to see whether it is still renewed", "was not renewed for 2s: taking it over from kiln create dev1 by ci@elsewhere.example pid 4242"} {
				if !strings.Contains(joined, want) {
					t.Errorf("log %q does not say %q", joined, want)
				}
			}
		})
	}
}

// A contender whose clock is an hour off cannot take a live lease: it sees
// the lease renewed while it watches, and refuses.
func TestSkewedClockCannotTakeLiveLease(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			holder, hctx := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: 3 * time.Second})
			var logs []string
			skewed := func() time.Time { return time.Now().Add(skew) }
			l, _, err := Acquire(ctx, cluster.Client, Options{Namespace: ns, Name: leaseName, Operation: "destroy dev1", Now: skewed,
				Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }})
			if err == nil {
				_ = l.Release(ctx)
				t.Fatal("a contender with a skewed clock took a live lease")
			}
			if code := failure.Of(err); code != failure.Locked || !strings.Contains(err.Error(), "locked by "+Who(holder.Holder())) {
				t.Errorf("err = %v (kind %v), want locked naming %q", err, code, Who(holder.Holder()))
			}
			var fe *failure.Error
			if !errors.As(err, &fe) || fe.Holder != Who(holder.Holder()) || fe.Since.IsZero() {
				t.Errorf("the locked failure's fields = %+v, want holder %q and since", fe, Who(holder.Holder()))
			}
			if !strings.Contains(strings.Join(logs, "\n"), "waiting up to 3s") {
				t.Errorf("the contender did not watch the implausible lease: logs %q", logs)
			}
			if h := holderOf(getLease(t, ctx, cluster.Client, ns)); h != holder.Holder() {
				t.Errorf("holder changed to %q", h)
			}
			if hctx.Err() != nil {
				t.Errorf("holder's operation cancelled: %v", context.Cause(hctx))
			}
		})
	}
}

// identity builds a holder identity with the given process facts.
func identity(boot string, pidns uint64, pid int, start uint64) string {
	return fmt.Sprintf("kiln create dev1 by me@host pid %d [boot=%s pidns=%d start=%d n=7]", pid, boot, pidns, start)
}

func TestDeadHolderTakeover(t *testing.T) {
	me, ok := selfFacts()
	if !ok {
		t.Fatal("no process facts from /proc on this machine")
	}
	host, _ := os.Hostname()
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
	sleeping, err := procStat(sleeper.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// A child that exited and was not reaped yet: a zombie.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zombie.Wait() })
	var zstart uint64
	for {
		st, err := procStat(zombie.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.zombie {
			zstart = st.start
			break
		}
		runtime.Gosched()
	}
	otherBoot := "00000000-1111-2222-3333-444444444444"

	tests := []struct {
		name     string
		holder   string
		takeOver bool
	}{
		{"this boot and pid namespace, pid of an exited child", identity(me.boot, me.pidns, exited.Process.Pid, 1), true},
		{"this boot and pid namespace, pid that cannot exist", identity(me.boot, me.pidns, 2147480000, 1), true},
		{"this boot and pid namespace, unreaped zombie", identity(me.boot, me.pidns, zombie.Process.Pid, zstart), true},
		{"this boot and pid namespace, live pid reused by another process", identity(me.boot, me.pidns, sleeper.Process.Pid, sleeping.start+1), true},
		{"this boot and pid namespace, our pid from an earlier process", identity(me.boot, me.pidns, me.pid, me.start+1), true},
		{"this boot and pid namespace, live sleeping child", identity(me.boot, me.pidns, sleeper.Process.Pid, sleeping.start), false},
		{"this boot and pid namespace, this process", identity(me.boot, me.pidns, me.pid, me.start), false},
		{"another boot, dead pid", identity(otherBoot, me.pidns, 2147480000, 1), false},
		{"another pid namespace (a container sharing the hostname), dead pid", identity(me.boot, me.pidns+1, 2147480000, 1), false},
		{"old identity without facts, this host, dead pid", fmt.Sprintf("kiln create dev1 by me@%s pid 2147480000", host), false},
		{"not a kiln identity", "some-controller-7d9f", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			// Renewed just now with an hour to go: only a provably dead
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
				t.Fatalf("Acquire took over the lease of live or unprovable holder %q", tt.holder)
			}
			if code := failure.Of(err); code != failure.Locked || !strings.Contains(err.Error(), Who(tt.holder)) {
				t.Errorf("err = %v (kind %v), want kind %v naming %q", err, code, failure.Locked, Who(tt.holder))
			}
			if h := holderOf(getLease(t, ctx, cluster.Client, ns)); h != tt.holder {
				t.Errorf("holder changed to %q", h)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	a, b := Identity("create dev1"), Identity("create dev1")
	if a == b {
		t.Errorf("two acquisitions share identity %q", a)
	}
	f, ok := parseFacts(a)
	me, _ := selfFacts()
	if !ok || f != me {
		t.Errorf("parseFacts(%q) = %+v, %v; want %+v", a, f, ok, me)
	}
	if w := Who(a); w != fmt.Sprintf("kiln create dev1 by %s pid %d", strings.SplitN(strings.TrimPrefix(a, "kiln create dev1 by "), " ", 2)[0], os.Getpid()) {
		t.Errorf("Who(%q) = %q", a, w)
	}
	if w := Who("some-controller-7d9f"); w != "some-controller-7d9f" {
		t.Errorf("Who of a foreign identity = %q", w)
	}
	if deadHolder(a) {
		t.Errorf("this process's identity %q judged dead", a)
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
		// to is what the cause says after "lost lock NS/NAME".
		to string
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
			to:    " to kiln destroy dev1 by intruder@elsewhere pid 1 (holding it since ",
		},
		{
			name: "deleted",
			to:   ": the lease was deleted",
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
			if cause == nil || !strings.Contains(cause.Error(), "lost lock "+ns+"/"+leaseName+tt.to) {
				t.Errorf("context.Cause = %v, want it to say lost lock %s/%s%s", cause, ns, leaseName, tt.to)
			}
			if code := failure.Of(cause); code != failure.Locked {
				t.Errorf("cause is %v, want %v", code, failure.Locked)
			}
			if l.Lost() != cause {
				t.Errorf("Lost() = %v, want the cause %v", l.Lost(), cause)
			}
			// What the operation returns when its context ends (a client
			// call cut off) must exit 4 saying why, not 130.
			stopped := l.Explain(fmt.Errorf("get configmap x/y: %w", context.Canceled))
			if code := failure.Of(stopped); code != failure.Locked || errors.Is(stopped, context.Canceled) || !strings.Contains(stopped.Error(), cause.Error()) {
				t.Errorf("Explain = %v (kind %v, canceled %v), want locked with the cause", stopped, code, errors.Is(stopped, context.Canceled))
			}
			// The failure names the holder that took the lease over, as
			// fields a frontend reads (none when the lease went away).
			var fe *failure.Error
			if !errors.As(stopped, &fe) || fe.Holder != Who(tt.stays) || fe.Since.IsZero() != (tt.stays == "") {
				t.Errorf("Explain's failure = %+v, want holder %q and since set with it", fe, Who(tt.stays))
			}
			if again := l.Explain(fmt.Errorf("wait: %w", cause)); failure.Of(again) != failure.Locked || strings.Count(again.Error(), "lost lock") != 1 {
				t.Errorf("Explain of an error already carrying the cause = %v", again)
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
		if code := failure.Of(errs[i]); code != failure.Locked {
			t.Errorf("contender %d: kind %v, want %v: %v", i, code, failure.Locked, errs[i])
		}
		var ee *failure.Error
		if !errors.As(errs[i], &ee) {
			t.Errorf("contender %d: error %v is not a classified failure", i, errs[i])
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d contenders acquired the lease (%v), want exactly 1", len(winners), winners)
	}
	if h, want := holderOf(getLease(t, ctx, cluster.Client, ns)), locks[winners[0]].Holder(); h != want {
		t.Errorf("holder = %q, want the winner %q", h, want)
	}
}

// stallPuts is a transport that blocks every PUT of a Lease, ignoring the
// request's context as a hung connection does, until released.
type stallPuts struct {
	next    http.RoundTripper
	release chan struct{}
	stalled chan struct{} // one value per stalled request
}

func (s *stallPuts) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/leases/") {
		s.stalled <- struct{}{}
		<-s.release
		return nil, errors.New("stalled connection dropped")
	}
	return s.next.RoundTrip(req)
}

func clientWith(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cluster.RESTConfig)
	cfg.Wrap(wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// A renewal that hangs (the connection stalls, the request never returns)
// stops the holder's work before any contender can take the lease: the
// contender, watching the unchanged lease for its duration on its own
// clock, gets it only after the holder's operation context has ended.
func TestHungRenewalStopsWorkBeforeTakeover(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	stall := &stallPuts{release: make(chan struct{}), stalled: make(chan struct{}, 100)}
	cs := clientWith(t, func(rt http.RoundTripper) http.RoundTripper { stall.next = rt; return stall })
	holder, hctx, err := Acquire(ctx, cs, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(stall.release)
		_ = holder.Release(context.Background())
	})
	select {
	case <-stall.stalled:
	case <-ctx.Done():
		t.Fatal("the holder never tried to renew")
	}

	// A contender whose clock is an hour ahead watches the lease (its
	// timestamps look stale) and takes it once unchanged for 3s.
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	l, _, err := Acquire(ctx, cluster.Client, Options{Namespace: ns, Name: leaseName, Operation: "destroy dev1", Now: ahead})
	if err != nil {
		t.Fatalf("contender: %v", err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	if hctx.Err() == nil {
		t.Fatal("the contender took the lease while the holder's operation was still running")
	}
	cause := context.Cause(hctx)
	if failure.Of(cause) != failure.Locked || !strings.Contains(cause.Error(), "could not renew it for 2s (⅔ of its 3s duration") {
		t.Errorf("cause = %v (kind %v), want locked saying it could not renew", cause, failure.Of(cause))
	}
}

// replay is a transport that sends matching requests twice and answers with
// the second answer: a write applied whose answer was lost, and retried.
type replay struct {
	next  http.RoundTripper
	match func(*http.Request) bool
	mu    sync.Mutex
	n     int
}

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	if !r.match(req) {
		return r.next.RoundTrip(req)
	}
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	first, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, first.Body)
	_ = first.Body.Close()
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return r.next.RoundTrip(again)
}

// A lease write whose answer was lost and that was retried finds the lease
// held by its own identity (AlreadyExists, Conflict): the lock is ours.
func TestRetriedWritesFindTheLeaseOurs(t *testing.T) {
	leasePath := func(req *http.Request) bool { return strings.Contains(req.URL.Path, "/leases") }
	tests := []struct {
		name   string
		method string
		setup  func(t *testing.T, ctx context.Context, ns string)
	}{
		{"create", http.MethodPost, func(*testing.T, context.Context, string) {}},
		{"takeover of a released lease and renewals", http.MethodPut, func(t *testing.T, ctx context.Context, ns string) {
			l, _ := acquire(t, ctx, Options{Namespace: ns, Name: leaseName, Operation: "earlier"})
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			tt.setup(t, ctx, ns)
			rp := &replay{match: func(req *http.Request) bool { return req.Method == tt.method && leasePath(req) }}
			cs := clientWith(t, func(rt http.RoundTripper) http.RoundTripper { rp.next = rt; return rp })
			l, lctx, err := Acquire(ctx, cs, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: 3 * time.Second})
			if err != nil {
				t.Fatalf("Acquire through a replaying transport: %v", err)
			}
			t.Cleanup(func() { _ = l.Release(context.Background()) })
			first := getLease(t, ctx, cluster.Client, ns)
			if holderOf(first) != l.Holder() {
				t.Fatalf("holder = %q, want %q", holderOf(first), l.Holder())
			}
			// Renewals (replayed too for PUT) go on without a lost lock.
			renewals := 0
			watchLease(t, ctx, ns, first.ResourceVersion, func(lease *coordinationv1.Lease) bool {
				if holderOf(lease) != l.Holder() {
					t.Fatalf("holder changed to %q", holderOf(lease))
				}
				renewals++
				return renewals >= 3
			})
			if lctx.Err() != nil {
				t.Fatalf("operation cancelled: %v", context.Cause(lctx))
			}
			rp.mu.Lock()
			n := rp.n
			rp.mu.Unlock()
			if n == 0 {
				t.Fatal("no request was replayed: the test did not exercise lost answers")
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if h := holderOf(getLease(t, ctx, cluster.Client, ns)); h != "" {
				t.Errorf("holder after Release = %q, want none", h)
			}
		})
	}
}

// Platform-changing operations (Exclusive holders of the cluster lease) and
// project operations keep each other out.
func TestClusterAndProjectExclusion(t *testing.T) {
	ctx := testCtx(t)
	system, tenant := cluster.Namespace(t), cluster.Namespace(t)
	const clusterName = "excl1"
	projectLabels := map[string]string{"kiln.dev/cluster": clusterName, "kiln.dev/project": "blog"}
	advice := "refused while it runs"
	clusterOp := func(op string, exclusive bool) Options {
		return Options{Namespace: system, Name: leaseName, Operation: op + " " + clusterName, Exclusive: exclusive,
			Excludes: []Exclusion{{Selector: "kiln.dev/cluster=" + clusterName + ",kiln.dev/project", Advice: advice}}}
	}
	projectOp := func(op string) Options {
		return Options{Namespace: tenant, Name: "kiln-project-blog", Operation: "project " + op + " default/blog", Labels: projectLabels,
			Excludes: []Exclusion{{Namespace: system, Name: leaseName, ExclusiveOnly: true, Advice: advice}}}
	}
	holderIn := func(ns, name string) string {
		l, err := cluster.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return holderOf(l)
	}
	refused := func(t *testing.T, err error, holder string) {
		t.Helper()
		if err == nil {
			t.Fatal("acquired although excluded")
		}
		if code := failure.Of(err); code != failure.Locked || !strings.Contains(err.Error(), "locked by "+Who(holder)) || !strings.Contains(err.Error(), advice) {
			t.Errorf("err = %v (kind %v), want locked naming %q", err, code, Who(holder))
		}
	}

	// destroy holds the cluster: a project operation is refused and leaves
	// its own lease free.
	destroy, _ := acquire(t, ctx, clusterOp("destroy", true))
	if a := getLease(t, ctx, cluster.Client, system).Annotations[AnnotationExclusive]; a != "true" {
		t.Errorf("exclusive holder's lease annotation %s = %q", AnnotationExclusive, a)
	}
	_, _, err := Acquire(ctx, cluster.Client, projectOp("start"))
	refused(t, err, destroy.Holder())
	if h := holderIn(tenant, "kiln-project-blog"); h != "" {
		t.Errorf("refused project operation left its lease held by %q", h)
	}
	if err := destroy.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// create (not exclusive) holds the cluster: project operations go on.
	create, _ := acquire(t, ctx, clusterOp("create", false))
	if a, ok := getLease(t, ctx, cluster.Client, system).Annotations[AnnotationExclusive]; ok {
		t.Errorf("create's lease keeps the exclusive annotation %q", a)
	}
	start, _ := acquire(t, ctx, projectOp("start"))
	if err := create.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A project operation runs: destroy is refused and gives the cluster
	// lease back.
	_, _, err = Acquire(ctx, cluster.Client, clusterOp("destroy", true))
	refused(t, err, start.Holder())
	lease := getLease(t, ctx, cluster.Client, system)
	if h := holderOf(lease); h != "" {
		t.Errorf("refused destroy left the cluster lease held by %q", h)
	}
	if _, ok := lease.Annotations[AnnotationExclusive]; ok {
		t.Errorf("refused destroy left the exclusive annotation")
	}
	if err := start.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The project operation finished: destroy proceeds.
	acquire(t, ctx, clusterOp("destroy", true))
}

// countingRT counts the requests of a client by method.
type countingRT struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (c *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[req.Method]++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

func (c *countingRT) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// Options.Seen: a free or absent lease as a LIST saw it is taken without a
// read; a stale copy never lets a second holder in (the write it leads to
// fails and the lease is read), and a copy showing a holder is read again.
func TestSeenSkipsTheReadAndStaleSeenIsSafe(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	rc := rest.CopyConfig(cluster.RESTConfig)
	cnt := &countingRT{n: map[string]int{}}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { cnt.next = rt; return cnt })
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	var absent *coordinationv1.Lease
	l, _, err := Acquire(ctx, cs, Options{Namespace: ns, Name: leaseName, Operation: "first", Seen: &absent})
	if err != nil {
		t.Fatal(err)
	}
	if n := cnt.count(http.MethodGet); n != 0 {
		t.Errorf("acquire of a lease seen absent: %d GETs, want 0", n)
	}
	// Stale: seen absent, but held now.
	_, _, err = Acquire(ctx, cluster.Client, Options{Namespace: ns, Name: leaseName, Operation: "second", Seen: &absent})
	if failure.Of(err) != failure.Locked {
		t.Errorf("acquire with a stale absent copy while held: kind %v (%v), want locked", failure.Of(err), err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	free := getLease(t, ctx, cluster.Client, ns)
	before := cnt.count(http.MethodGet)
	l, _, err = Acquire(ctx, cs, Options{Namespace: ns, Name: leaseName, Operation: "third", Seen: &free})
	if err != nil {
		t.Fatal(err)
	}
	if n := cnt.count(http.MethodGet) - before; n != 0 {
		t.Errorf("acquire of a lease seen free: %d GETs, want 0", n)
	}
	// Stale: seen free, but held now (its resourceVersion has moved on).
	_, _, err = Acquire(ctx, cluster.Client, Options{Namespace: ns, Name: leaseName, Operation: "fourth", Seen: &free})
	if failure.Of(err) != failure.Locked {
		t.Errorf("acquire with a stale free copy while held: kind %v (%v), want locked", failure.Of(err), err)
	}
	heldCopy := getLease(t, ctx, cluster.Client, ns)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A copy showing a holder is not trusted: the lease is read, found
	// free, and taken.
	l, _, err = Acquire(ctx, cluster.Client, Options{Namespace: ns, Name: leaseName, Operation: "fifth", Seen: &heldCopy})
	if err != nil {
		t.Fatalf("acquire with a held copy of a lease since released: %v", err)
	}
	_ = l.Release(ctx)
}

// Gone: a holder that saw the Lease's namespace deleted and gone ends the
// operation's context and has nothing left to release: Release sends no
// request (destroy's last step, kiln-system confirmed gone).
func TestGoneReleasesWithoutARequest(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	rc := rest.CopyConfig(cluster.RESTConfig)
	cnt := &countingRT{n: map[string]int{}}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { cnt.next = rt; return cnt })
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	l, lctx, err := Acquire(ctx, cs, Options{Namespace: ns, Name: leaseName, Operation: "destroy dev1"})
	if err != nil {
		t.Fatal(err)
	}
	l.Gone()
	if lctx.Err() == nil {
		t.Errorf("operation context still live after Gone")
	}
	sent := func() int {
		return cnt.count(http.MethodGet) + cnt.count(http.MethodPut) + cnt.count(http.MethodPost) + cnt.count(http.MethodDelete)
	}
	before := sent()
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after Gone: %v", err)
	}
	if n := sent() - before; n != 0 {
		t.Errorf("Release after Gone sent %d requests, want none", n)
	}
}
