package aws

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
)

// The claim serializes infrastructure changes of one NAME across hosts.
// Before creating (or deleting) anything, kiln creates the IAM role
// kiln-NAME-claim, tagged with its holder and the time. IAM refuses a
// second role of the same name (EntityAlreadyExists), and IAM is global,
// so of any number of kiln processes, on any hosts, creating NAME in any
// region, exactly one holds the claim; the others fail as failure.Locked naming it. The
// role grants nothing (no policies; only EC2 may assume it, through an
// instance profile that does not exist). The holder renews a tag every
// minute and deletes the role when its infrastructure phase ends.
//
// A claim is stale — and is taken over by deleting exactly that role
// (checked by RoleId) and creating a new one — when its holder is a kiln
// of this host whose process is gone, or when it was not renewed for 15
// minutes. Hosts that can talk to AWS at all have clocks within 5 minutes
// of AWS (SigV4 refuses larger skew), hence within 10 of each other, so a
// live holder renewing every minute is never judged expired.
const (
	KindClaim       = "Claim"
	TagClaimHolder  = "kiln.dev/claim-holder"
	TagClaimSince   = "kiln.dev/claim-since"
	TagClaimRenewed = "kiln.dev/claim-renewed"
	claimTTL        = 15 * time.Minute
)

func claimName(cluster string) string { return resourceName(cluster, "claim") }

// host names this host in the claim's holder identity. The test hooks
// (p.Hooks, engine.HookedHost) may play another host; release builds have
// none.
func (p *Provider) host() string {
	if p.hostname != "" {
		return p.hostname
	}
	if h := engine.HookedHost(p.Hooks); h != "" {
		return h
	}
	h, _ := os.Hostname()
	return h
}

// claimIdentity names this process: operation, user, host and pid.
func (p *Provider) claimIdentity(op, name string) string {
	u := "unknown"
	if cur, err := user.Current(); err == nil {
		u = cur.Username
	}
	return fmt.Sprintf("kiln %s %s by %s@%s pid %d", op, name, u, p.host(), os.Getpid())
}

// claim is a held claim.
type claim struct {
	in     *infra
	role   string
	roleID string
	holder string
	cancel context.CancelCauseFunc
	stop   context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// acquireClaim takes the claim of in.name for op, or fails with failure.Locked
// naming its holder. The returned context is cancelled if the claim is
// lost (taken over after this process stopped renewing it).
func (in *infra) acquireClaim(ctx context.Context, op string) (*claim, context.Context, error) {
	name := claimName(in.name)
	holder := in.p.claimIdentity(op, in.name)
	for range 3 {
		now := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
		out, err := in.iam.CreateRole(ctx, &iam.CreateRoleInput{
			RoleName:                 aws.String(name),
			AssumeRolePolicyDocument: aws.String(trustPolicy("ec2.amazonaws.com")),
			Description:              aws.String("kiln claim: infrastructure of cluster " + in.name + " is being changed; grants nothing; removed when that operation ends"),
			Tags: append(iamTags(in.name),
				iamtypes.Tag{Key: aws.String(TagClaimHolder), Value: aws.String(holder)},
				iamtypes.Tag{Key: aws.String(TagClaimSince), Value: aws.String(now)},
				iamtypes.Tag{Key: aws.String(TagClaimRenewed), Value: aws.String(now)},
			),
		})
		if err == nil {
			return in.held(ctx, name, aws.ToString(out.Role.RoleId), holder)
		}
		if apiCode(err) != "EntityAlreadyExists" {
			return nil, nil, in.fail(KindClaim, name, fmt.Errorf("claim %s: create IAM role %s: %w", in.name, name, err))
		}
		got, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
		if apiCode(err) == "NoSuchEntity" {
			continue // released meanwhile
		}
		if err != nil {
			return nil, nil, in.fail(KindClaim, name, fmt.Errorf("claim %s: get IAM role %s: %w", in.name, name, err))
		}
		if !iamTagged(got.Role.Tags, in.name) {
			return nil, nil, in.fail(KindClaim, name, fmt.Errorf("IAM role %s exists but is not tagged %s=%s; kiln uses that name to serialize changes of %s: rename or delete it", name, TagCluster, in.name, in.name))
		}
		other := iamTag(got.Role.Tags, TagClaimHolder)
		if other == holder {
			// This very process (an earlier step of the same run).
			return in.held(ctx, name, aws.ToString(got.Role.RoleId), holder)
		}
		why, stale := in.p.claimStale(other, iamTag(got.Role.Tags, TagClaimRenewed), time.Now())
		if !stale {
			since := iamTag(got.Role.Tags, TagClaimSince)
			in.emit(KindClaim, name, engine.StatusInProgress, "held by %s since %s", other, since)
			at, _ := time.Parse(time.RFC3339, since) // zero when not a time
			return nil, nil, failure.Held(other, at, "infrastructure of %s is being changed by %s since %s (claim: IAM role %s); nothing was created. Wait for it to finish; a claim whose holder died on another host expires %s after its last renewal (%s)",
				in.name, other, since, name, claimTTL, iamTag(got.Role.Tags, TagClaimRenewed))
		}
		// Take over exactly the claim judged stale: another contender may
		// have replaced it since, and its RoleId would then differ.
		cur, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
		if err != nil || aws.ToString(cur.Role.RoleId) != aws.ToString(got.Role.RoleId) {
			continue
		}
		if _, err := in.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(name)}); err != nil && apiCode(err) != "NoSuchEntity" {
			return nil, nil, in.fail(KindClaim, name, fmt.Errorf("claim %s: remove stale claim %s: %w", in.name, name, err))
		}
		logf(in.sink, engine.LevelWarn, "took over the claim of %s from %s: %s", in.name, other, why)
	}
	return nil, nil, in.fail(KindClaim, name, fmt.Errorf("claim %s: IAM role %s changed hands three times while kiln tried to claim it; try again", in.name, name))
}

func iamTag(tags []iamtypes.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// claimStale says whether a claim held by holder, last renewed at
// renewed, may be taken over, and why.
func (p *Provider) claimStale(holder, renewed string, now time.Time) (string, bool) {
	at := strings.LastIndex(holder, "@")
	pidAt := strings.LastIndex(holder, " pid ")
	if at >= 0 && pidAt > at && holder[at+1:pidAt] == p.host() {
		if pid, err := strconv.Atoi(holder[pidAt+len(" pid "):]); err == nil && pid > 0 && pid != os.Getpid() && !processAlive(pid) {
			return fmt.Sprintf("its process %d on this host is gone", pid), true
		}
	}
	t, err := time.Parse(time.RFC3339, renewed)
	if err != nil {
		return "its renewal time is unreadable", true
	}
	if now.Sub(t) > claimTTL {
		return fmt.Sprintf("not renewed since %s", renewed), true
	}
	return "", false
}

// held starts renewing a claim just taken.
func (in *infra) held(ctx context.Context, name, roleID, holder string) (*claim, context.Context, error) {
	cctx, cancel := context.WithCancelCause(ctx)
	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &claim{in: in, role: name, roleID: roleID, holder: holder, cancel: cancel, stop: stop, done: make(chan struct{})}
	in.emit(KindClaim, name, engine.StatusCurrent, "held by %s", holder)
	go c.renew(hctx, cancel)
	return c, cctx, nil
}

// renew refreshes the claim's renewal tag every minute (Limits.ClaimRenewEvery). If the claim is
// no longer this process's (taken over after renewals failed for too long)
// or could not be renewed for two thirds of its lifetime, the operation's
// context is cancelled: kiln stops rather than race the new holder.
func (c *claim) renew(ctx context.Context, cancelOp context.CancelCauseFunc) {
	defer close(c.done)
	last := time.Now()
	t := time.NewTicker(c.in.p.limits().ClaimRenewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		got, err := c.in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(c.role)})
		if err == nil && aws.ToString(got.Role.RoleId) != c.roleID || apiCode(err) == "NoSuchEntity" {
			cancelOp(failure.Lock("lost the claim of %s (IAM role %s): another kiln took it over; stopped", c.in.name, c.role))
			return
		}
		if err == nil {
			_, err = c.in.iam.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(c.role), Tags: []iamtypes.Tag{
				{Key: aws.String(TagClaimRenewed), Value: aws.String(time.Now().UTC().Truncate(time.Second).Format(time.RFC3339))},
			}})
		}
		if err == nil {
			last = time.Now()
			continue
		}
		if time.Since(last) > claimTTL*2/3 {
			cancelOp(failure.Lock("could not renew the claim of %s (IAM role %s) for %s: %v; stopped so that no other kiln races this one", c.in.name, c.role, time.Since(last).Round(time.Second), err))
			return
		}
	}
}

// release stops renewing and deletes the claim if it is still this
// process's. It runs even when the operation's context was cancelled.
func (c *claim) release(ctx context.Context) {
	c.once.Do(func() {
		c.stop()
		<-c.done
		defer c.cancel(nil)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		got, err := c.in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(c.role)})
		if err != nil || aws.ToString(got.Role.RoleId) != c.roleID {
			return
		}
		if _, err := c.in.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(c.role)}); err != nil && apiCode(err) != "NoSuchEntity" {
			logf(c.in.sink, engine.LevelWarn, "could not release the claim of %s (IAM role %s): %v; it expires %s after its last renewal", c.in.name, c.role, err, claimTTL)
			return
		}
		c.in.emit(KindClaim, c.role, engine.StatusNotFound, "released")
	})
}

// lostErr is the reason the operation stopped when its claim was lost (nil
// when it was not).
func lostErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); err != nil && cause != nil && cause != ctx.Err() {
		return cause
	}
	return err
}

// ClaimHolder reports who holds the claim of name ("" when nobody does):
// for tests and support.
func (p *Provider) ClaimHolder(ctx context.Context, name string) (string, error) {
	in, err := p.newInfra(ctx, name, p.regionOr(Regions), nil)
	if err != nil {
		return "", err
	}
	got, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(claimName(name))})
	if apiCode(err) == "NoSuchEntity" {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return iamTag(got.Role.Tags, TagClaimHolder), nil
}
