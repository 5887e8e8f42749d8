package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/kilnctl/kiln/engine/failure"
)

// What these tests can and cannot prove with kumo: kumo's IAM is one
// in-memory map behind a mutex, so CreateRole of one name succeeds once
// and answers EntityAlreadyExists after, like AWS; and all regions share
// it (awsemu routes IAM to one kumo), like AWS's global IAM. It cannot
// show AWS's eventual consistency: on AWS a GetRole right after a
// CreateRole may not see the role yet. kiln never decides from a read
// that something is absent — the claim is won only by a CreateRole that
// succeeded — so that lag can delay a contender's message, not let two
// contenders in. Whether AWS enforces name uniqueness at create time
// under true concurrency is AWS's documented behaviour, not something an
// emulator can show.

// hostProvider is a test provider that plays host h.
func hostProvider(t *testing.T, h string) *Provider {
	p := newTestProvider(t, emulator(t))
	p.hostname = h
	return p
}

func TestClaimSerializesInfrastructureAcrossHosts(t *testing.T) {
	ctx := context.Background()
	name := uniq("claim")
	a, b := hostProvider(t, "host-a"), hostProvider(t, "host-b")

	in, err := a.newInfra(ctx, name, "eu-west-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := in.acquireClaim(ctx, "create")
	if err != nil {
		t.Fatal(err)
	}
	// host-b, in another region even, gets exit 4 naming host-a and
	// creates nothing.
	for _, region := range []string{"eu-west-1", "us-east-1"} {
		_, _, err = b.EnsureInfrastructure(ctx, name, region, nil)
		if failure.Of(err) != failure.Locked || !strings.Contains(err.Error(), "@host-a pid") {
			t.Fatalf("%s: want locked naming host-a, got %v: %v", region, failure.Of(err), err)
		}
		if fe := (*failure.Error)(nil); !errors.As(err, &fe) || !strings.Contains(fe.Holder, "@host-a pid") || fe.Since.IsZero() {
			t.Errorf("%s: the locked failure's fields = %+v, want holder host-a and since", region, fe)
		}
		if inv, err := b.Inventory(ctx, name, region); err != nil || !inv.Empty() {
			t.Fatalf("%s: the loser created %s (%v)", region, inv, err)
		}
	}
	if _, err := b.DestroyInfrastructure(ctx, name, "eu-west-1", nil); failure.Of(err) != failure.Locked {
		t.Fatalf("destroy while host-a holds the claim: want exit 4, got %v", err)
	}
	c.release(ctx)
	if h, err := a.ClaimHolder(ctx, name); err != nil || h != "" {
		t.Fatalf("after release the claim is held by %q (%v)", h, err)
	}
	if _, _, err := b.EnsureInfrastructure(ctx, name, "eu-west-1", nil); err != nil {
		t.Fatalf("after release: %v", err)
	}
	checkComplete(t, b, name, "eu-west-1")
	if h, _ := a.ClaimHolder(ctx, name); h != "" {
		t.Errorf("a finished create left its claim held by %s", h)
	}
	destroy(t, b, name, "eu-west-1")
}

// TestConcurrentCreatesMakeOneOfEach: creates of one NAME started at once
// from several hosts end with exactly one of each resource; each run
// either succeeded or was refused with exit 4.
func TestConcurrentCreatesMakeOneOfEach(t *testing.T) {
	ctx := context.Background()
	name := uniq("race")
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		p := hostProvider(t, fmt.Sprintf("host-%d", i))
		wg.Go(func() {
			<-start
			_, _, errs[i] = p.EnsureInfrastructure(ctx, name, "us-east-1", nil)
		})
	}
	close(start)
	wg.Wait()
	ok, locked := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case failure.Of(err) == failure.Locked:
			locked++
		default:
			t.Errorf("a run failed otherwise: %v", err)
		}
	}
	if ok == 0 {
		t.Fatalf("no run succeeded: %v", errs)
	}
	p := hostProvider(t, "checker")
	checkComplete(t, p, name, "us-east-1")
	t.Logf("%d succeeded, %d refused with exit 4", ok, locked)
	destroy(t, p, name, "us-east-1")
}

// TestStaleClaimsAreTakenOver: a claim of a dead kiln of this host, or one
// not renewed for longer than its lifetime, does not block; a live one of
// another host does.
func TestStaleClaimsAreTakenOver(t *testing.T) {
	ctx := context.Background()
	p := hostProvider(t, "host-a")
	old := time.Now().Add(-claimTTL - time.Minute).UTC().Format(time.RFC3339)
	fresh := time.Now().UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, holder, renewed string
		stale                 bool
	}{
		{"dead pid of this host", "kiln create x by u@host-a pid 999999", fresh, true},
		{"expired, other host", "kiln create x by u@host-b pid 1", old, true},
		{"live, other host", "kiln create x by u@host-b pid 1", fresh, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniq("stale")
			in, err := p.newInfra(ctx, name, "eu-west-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = in.iam.CreateRole(ctx, &iam.CreateRoleInput{
				RoleName: aws.String(claimName(name)), AssumeRolePolicyDocument: aws.String(trustPolicy("ec2.amazonaws.com")),
				Tags: append(iamTags(name),
					iamtypes.Tag{Key: aws.String(TagClaimHolder), Value: aws.String(tc.holder)},
					iamtypes.Tag{Key: aws.String(TagClaimSince), Value: aws.String(tc.renewed)},
					iamtypes.Tag{Key: aws.String(TagClaimRenewed), Value: aws.String(tc.renewed)}),
			})
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := in.acquireClaim(ctx, "create")
			if !tc.stale {
				if failure.Of(err) != failure.Locked {
					t.Fatalf("a live claim was taken over: %v", err)
				}
				_, _ = in.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(claimName(name))})
				return
			}
			if err != nil {
				t.Fatalf("stale claim not taken over: %v", err)
			}
			if h, _ := p.ClaimHolder(ctx, name); !strings.Contains(h, "@host-a pid") || h == tc.holder {
				t.Errorf("holder after takeover: %q", h)
			}
			c.release(ctx)
		})
	}
}

// TestLostClaimStopsTheOperation: when another kiln has taken the claim
// over (this one stopped renewing, say), the next renewal notices, the
// operation's context is cancelled with exit 4, and release leaves the
// new holder's claim alone.
func TestLostClaimStopsTheOperation(t *testing.T) {
	ctx := context.Background()
	p := hostProvider(t, "host-a")
	p.Limits.ClaimRenewEvery = 20 * time.Millisecond
	name := uniq("lost")
	in, err := p.newInfra(ctx, name, "eu-west-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, opCtx, err := in.acquireClaim(ctx, "create")
	if err != nil {
		t.Fatal(err)
	}
	role := aws.String(claimName(name))
	if _, err := in.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: role}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	if _, err := in.iam.CreateRole(ctx, &iam.CreateRoleInput{
		RoleName: role, AssumeRolePolicyDocument: aws.String(trustPolicy("ec2.amazonaws.com")),
		Tags: append(iamTags(name),
			iamtypes.Tag{Key: aws.String(TagClaimHolder), Value: aws.String("kiln create x by u@host-b pid 7")},
			iamtypes.Tag{Key: aws.String(TagClaimRenewed), Value: aws.String(now)}),
	}); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	select {
	case <-opCtx.Done():
	case <-wait.Done():
		t.Fatal("the operation went on after its claim was taken over")
	}
	if cause := context.Cause(opCtx); failure.Of(cause) != failure.Locked || !strings.Contains(cause.Error(), "lost the claim") {
		t.Fatalf("cause: %v", cause)
	}
	c.release(ctx)
	if h, _ := p.ClaimHolder(ctx, name); !strings.Contains(h, "host-b") {
		t.Errorf("release removed the new holder's claim (holder now %q)", h)
	}
	_, _ = in.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: role})
}
