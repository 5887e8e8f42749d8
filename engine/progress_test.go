package engine

import (
	"errors"
	"testing"
)

// TestReportSearchCauseIsTheLocations: a location whose search failed ends
// with its cause; one that was searched and holds an unreachable cluster
// ends searched (the cluster's error is its own row's).
func TestReportSearchCauseIsTheLocations(t *testing.T) {
	var got []SearchProgress
	report := func(p SearchProgress) { got = append(got, p) }
	ReportSearch(report, "aws", "us-east-1", true,
		Location{Name: "us-east-1", Cluster: "dev1"},
		Location{Name: "us-east-1", Cluster: "old", Infra: InfraUnreachable, Err: errors.New("EKS cluster old unreachable")})
	ReportSearch(report, "aws", "sa-east-1", true,
		Location{Name: "sa-east-1", Infra: InfraUnreachable, Err: errors.New("region sa-east-1: no answer within 10s")})
	if len(got) != 2 {
		t.Fatalf("reports: %+v", got)
	}
	if got[0].Err != "" {
		t.Errorf("a searched region with an unreachable cluster ended with %q", got[0].Err)
	}
	if got[1].Err != "region sa-east-1: no answer within 10s" {
		t.Errorf("a failed region ended with %q", got[1].Err)
	}
	ReportSearch(nil, "aws", "x", true) // no function: nothing to call
}
