// The IAM roles of a kiln EKS cluster (the cluster's and the nodes'):
// ensure, inventory and delete side by side.

package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/kilnctl/kiln/engine"
)

// role is one IAM role kiln creates.
type role struct {
	part     string // cluster | node
	service  string // the service that assumes it
	policies []string
}

var roles = []role{
	{part: "cluster", service: "eks.amazonaws.com", policies: []string{"AmazonEKSClusterPolicy"}},
	{part: "node", service: "ec2.amazonaws.com", policies: []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"}},
}

func trustPolicy(service string) string {
	return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"` + service + `"},"Action":"sts:AssumeRole"}]}`
}

func iamTags(name string) []iamtypes.Tag {
	return []iamtypes.Tag{
		{Key: aws.String(TagCluster), Value: aws.String(name)},
		{Key: aws.String(TagManagedBy), Value: aws.String("kiln")},
	}
}

func iamTagged(tags []iamtypes.Tag, name string) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == TagCluster && aws.ToString(t.Value) == name {
			return true
		}
	}
	return false
}

// partition is the ARN partition of arn ("aws", "aws-cn", …).
func partition(arn string) string {
	if f := strings.SplitN(arn, ":", 3); len(f) == 3 {
		return f[1]
	}
	return "aws"
}

// ensureRoles creates the cluster and node roles (looked up with GetRole
// first: CreateRole on an existing name must never be what decides) and
// attaches the AWS managed policies EKS requires.
//
// An endpoint that is not AWS (AWS_ENDPOINT_URL: an emulator) may have no
// AWS managed policies; there, NoSuchEntity on attaching one is reported as
// a warning and the role is left without it. Against AWS it is an error.
func (in *infra) ensureRoles(ctx context.Context) error {
	for _, r := range roles {
		n := resourceName(in.name, r.part)
		got, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(n)})
		var arn string
		switch {
		case err == nil:
			if !iamTagged(got.Role.Tags, in.name) {
				return in.fail(KindIAMRole, n, fmt.Errorf("IAM role %s exists but is not tagged %s=%s; kiln does not adopt roles it did not create; rename or delete it", n, TagCluster, in.name))
			}
			arn = aws.ToString(got.Role.Arn)
		case apiCode(err) == "NoSuchEntity":
			in.emit(KindIAMRole, n, engine.StatusInProgress, "creating (assumed by %s)", r.service)
			out, err := in.iam.CreateRole(ctx, &iam.CreateRoleInput{
				RoleName: aws.String(n), AssumeRolePolicyDocument: aws.String(trustPolicy(r.service)),
				Description: aws.String("kiln cluster " + in.name + " (" + r.part + ")"),
				Tags:        iamTags(in.name),
			})
			if err != nil {
				return in.fail(KindIAMRole, n, fmt.Errorf("create IAM role %s: %w", n, err))
			}
			arn = aws.ToString(out.Role.Arn)
		default:
			return in.fail(KindIAMRole, n, fmt.Errorf("get IAM role %s: %w", n, err))
		}
		in.roleARNs[r.part] = arn
		attached := map[string]bool{}
		pg := iam.NewListAttachedRolePoliciesPaginator(in.iam, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(n)})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return in.fail(KindIAMRole, n, fmt.Errorf("list policies of %s: %w", n, err))
			}
			for _, ap := range page.AttachedPolicies {
				attached[aws.ToString(ap.PolicyArn)] = true
			}
		}
		var missing []string
		for _, pol := range r.policies {
			parn := "arn:" + partition(arn) + ":iam::aws:policy/" + pol
			if attached[parn] {
				continue
			}
			_, err := in.iam.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(n), PolicyArn: aws.String(parn)})
			switch {
			case err == nil:
			case apiCode(err) == "NoSuchEntity" && customEndpoint(in.cfg):
				missing = append(missing, pol)
			default:
				return in.fail(KindIAMRole, n, fmt.Errorf("attach %s to %s: %w", parn, n, err))
			}
		}
		if len(missing) > 0 {
			logf(in.sink, engine.LevelWarn, "IAM role %s: the endpoint %s has no AWS managed policies %s (an emulator); the role is left without them",
				n, aws.ToString(in.cfg.BaseEndpoint), strings.Join(missing, ", "))
		}
		in.emit(KindIAMRole, n, engine.StatusCurrent, "%s", arn)
	}
	return nil
}

// retryRolePropagation retries create while EKS says the new IAM role
// cannot be assumed yet (IAM is eventually consistent: a role is usable
// seconds after CreateRole returns), for up to two minutes.
func retryRolePropagation(ctx context.Context, create func(context.Context) error) error {
	var last error
	err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		last = create(ctx)
		if apiCode(last) == "InvalidParameterException" && strings.Contains(strings.ToLower(last.Error()), "role") {
			return false, nil
		}
		return true, last
	})
	if errors.Is(err, errPollLimit) {
		return last
	}
	return err
}

// roleInventory adds the kiln-tagged IAM roles of the cluster to inv.
func (in *infra) roleInventory(ctx context.Context, inv Inventory) error {
	for _, r := range roles {
		n := resourceName(in.name, r.part)
		got, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(n)})
		switch {
		case err == nil && iamTagged(got.Role.Tags, in.name):
			inv[KindIAMRole] = append(inv[KindIAMRole], n)
		case err != nil && apiCode(err) != "NoSuchEntity":
			return fmt.Errorf("get IAM role %s: %w", n, err)
		}
	}
	return nil
}

func (in *infra) deleteRoles(ctx context.Context) error {
	for _, r := range roles {
		n := resourceName(in.name, r.part)
		got, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(n)})
		switch {
		case apiCode(err) == "NoSuchEntity":
			in.emit(KindIAMRole, n, engine.StatusNotFound, "none")
			continue
		case err != nil:
			return in.fail(KindIAMRole, n, fmt.Errorf("get IAM role %s: %w", n, err))
		case !iamTagged(got.Role.Tags, in.name):
			in.emit(KindIAMRole, n, engine.StatusCurrent, "not tagged %s=%s: kiln did not create it; left alone", TagCluster, in.name)
			continue
		}
		in.emit(KindIAMRole, n, engine.StatusTerminating, "deleting")
		ap := iam.NewListAttachedRolePoliciesPaginator(in.iam, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(n)})
		for ap.HasMorePages() {
			page, err := ap.NextPage(ctx)
			if err != nil {
				return in.fail(KindIAMRole, n, fmt.Errorf("list policies of %s: %w", n, err))
			}
			for _, pol := range page.AttachedPolicies {
				if _, err := in.iam.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(n), PolicyArn: pol.PolicyArn}); err != nil && apiCode(err) != "NoSuchEntity" {
					return in.fail(KindIAMRole, n, fmt.Errorf("detach %s from %s: %w", aws.ToString(pol.PolicyArn), n, err))
				}
			}
		}
		ip := iam.NewListRolePoliciesPaginator(in.iam, &iam.ListRolePoliciesInput{RoleName: aws.String(n)})
		for ip.HasMorePages() {
			page, err := ip.NextPage(ctx)
			if err != nil {
				return in.fail(KindIAMRole, n, fmt.Errorf("list inline policies of %s: %w", n, err))
			}
			for _, pol := range page.PolicyNames {
				if _, err := in.iam.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(n), PolicyName: aws.String(pol)}); err != nil && apiCode(err) != "NoSuchEntity" {
					return in.fail(KindIAMRole, n, fmt.Errorf("delete inline policy %s of %s: %w", pol, n, err))
				}
			}
		}
		if _, err := in.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(n)}); err != nil && apiCode(err) != "NoSuchEntity" {
			return in.fail(KindIAMRole, n, fmt.Errorf("delete IAM role %s: %w", n, err))
		}
		if _, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(n)}); apiCode(err) != "NoSuchEntity" {
			return in.fail(KindIAMRole, n, fmt.Errorf("IAM role %s still exists after DeleteRole (%v)", n, err))
		}
		in.emit(KindIAMRole, n, engine.StatusNotFound, "deleted")
	}
	return nil
}
