package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// A region whose inspection ignores its deadline (a credential process
// that never returns, say) is abandoned at the bound and reported.
func TestRegionInspectionIsAbandonedAtTheBound(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	p := &Provider{Timeout: 200 * time.Millisecond, LoadConfig: func(context.Context, string) (aws.Config, error) {
		<-release // deaf to the context
		return aws.Config{}, nil
	}}
	l := p.InspectLocation(context.Background(), "x", "eu-west-1")
	if l.Err == nil || !strings.Contains(l.Err.Error(), "no answer within 200ms") || l.Infra != "unreachable" {
		t.Errorf("stuck region: %+v, want unreachable with no answer within 200ms", l)
	}
	if l.Elapsed <= 0 {
		t.Errorf("elapsed not recorded: %v", l.Elapsed)
	}
}
