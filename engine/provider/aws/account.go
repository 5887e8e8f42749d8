package aws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// Account implements engine.AccountScoped: the AWS account of the
// credentials in use, from STS GetCallerIdentity in region (token dirs
// record it; a directory of another account is never reused).
func (p *Provider) Account(ctx context.Context, region string) (string, error) {
	cfg, err := p.config(ctx, region)
	if err != nil {
		return "", err
	}
	out, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("sts GetCallerIdentity: %w", err)
	}
	return aws.ToString(out.Account), nil
}
