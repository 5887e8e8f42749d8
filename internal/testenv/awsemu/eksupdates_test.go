package awsemu

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// waitUpdate polls DescribeUpdate until the update is no longer
// InProgress and returns its final status.
func waitUpdate(t *testing.T, c *eks.Client, cluster, nodegroup, id string) ekstypes.UpdateStatus {
	t.Helper()

	in := &eks.DescribeUpdateInput{Name: aws.String(cluster), UpdateId: aws.String(id)}
	if nodegroup != "" {
		in.NodegroupName = aws.String(nodegroup)
	}

	for {
		out, err := c.DescribeUpdate(t.Context(), in)
		if err != nil {
			t.Fatalf("DescribeUpdate %s: %v", id, err)
		}

		if out.Update.Status != ekstypes.UpdateStatusInProgress {
			return out.Update.Status
		}

		select {
		case <-t.Context().Done():
			t.Fatal("context done while waiting for an update")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestEKSUpdatesEmulated drives the emulated EKS update operations through
// the real aws-sdk-go-v2 client: control-plane version one minor at a
// time (a 2-minor jump and a downgrade refused as EKS does), node group
// version and scaling, UPDATING while an update runs, a second update
// refused meanwhile, and write counting.
func TestEKSUpdatesEmulated(t *testing.T) {
	e := start(t, Options{})
	ctx := t.Context()
	c := eks.NewFromConfig(cfg(t, e, regionA))
	other := eks.NewFromConfig(cfg(t, e, regionB))

	const name, ng = "upd", "nodes"

	if _, err := c.CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::123456789012:role/r"), Version: aws.String("1.30"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1"}},
	}); err != nil {
		t.Fatal(err)
	}

	if _, err := c.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
		ClusterName: aws.String(name), NodegroupName: aws.String(ng), NodeRole: aws.String("arn:aws:iam::123456789012:role/n"),
		Subnets: []string{"subnet-1"}, InstanceTypes: []string{"t3.medium"},
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(2), MaxSize: aws.Int32(2), DesiredSize: aws.Int32(2)},
	}); err != nil {
		t.Fatal(err)
	}

	for _, v := range []string{"1.32", "1.29", "1.30"} {
		_, err := c.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(name), Version: aws.String(v)})
		if apiErrorCode(err) != errInvalidParameter || !strings.Contains(err.Error(), "Unsupported Kubernetes minor version update from 1.30 to "+v) {
			t.Errorf("UpdateClusterVersion 1.30 → %s: err = %v, want InvalidParameterException naming both versions", v, err)
		}
	}

	if _, err := other.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(name), Version: aws.String("1.31")}); apiErrorCode(err) != errResourceNotFound {
		t.Errorf("UpdateClusterVersion in %s (no such cluster there): err = %v, want ResourceNotFoundException", regionB, err)
	}

	// Hold updates in progress to see UPDATING and the refusal of a second one.
	e.SetUpdateDuration(time.Hour)

	writes := e.Writes(regionA)

	up, err := c.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(name), Version: aws.String("1.31")})
	if err != nil {
		t.Fatalf("UpdateClusterVersion 1.30 → 1.31: %v", err)
	}

	if got := e.Writes(regionA); got != writes+1 {
		t.Errorf("Writes = %d after one update, want %d", got, writes+1)
	}

	if up.Update.Status != ekstypes.UpdateStatusInProgress || up.Update.Type != ekstypes.UpdateTypeVersionUpdate {
		t.Errorf("update = %s %s, want InProgress VersionUpdate", up.Update.Status, up.Update.Type)
	}

	d, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}

	if d.Cluster.Status != ekstypes.ClusterStatusUpdating || aws.ToString(d.Cluster.Version) != "1.30" {
		t.Errorf("during the update: cluster %s, version %s; want UPDATING, 1.30", d.Cluster.Status, aws.ToString(d.Cluster.Version))
	}

	if _, err := c.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(name), Version: aws.String("1.31")}); apiErrorCode(err) != errResourceInUse {
		t.Errorf("second UpdateClusterVersion during an update: err = %v, want ResourceInUseException", err)
	}

	e.SetUpdateDuration(0)

	if st := waitUpdate(t, c, name, "", aws.ToString(up.Update.Id)); st != ekstypes.UpdateStatusSuccessful {
		t.Fatalf("update ended %s", st)
	}

	d, err = c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}

	if d.Cluster.Status != ekstypes.ClusterStatusActive || aws.ToString(d.Cluster.Version) != "1.31" {
		t.Errorf("after the update: cluster %s, version %s; want ACTIVE, 1.31", d.Cluster.Status, aws.ToString(d.Cluster.Version))
	}

	// The node group still runs 1.30: the next control-plane step waits for it.
	if _, err := c.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(name), Version: aws.String("1.32")}); apiErrorCode(err) != errInvalidParameter || !strings.Contains(err.Error(), ng) {
		t.Errorf("UpdateClusterVersion with a node group behind: err = %v, want InvalidParameterException naming %s", err, ng)
	}

	if _, err := c.UpdateNodegroupVersion(ctx, &eks.UpdateNodegroupVersionInput{ClusterName: aws.String(name), NodegroupName: aws.String(ng), Version: aws.String("1.32")}); apiErrorCode(err) != errInvalidParameter {
		t.Errorf("UpdateNodegroupVersion beyond the cluster: err = %v, want InvalidParameterException", err)
	}

	nv, err := c.UpdateNodegroupVersion(ctx, &eks.UpdateNodegroupVersionInput{ClusterName: aws.String(name), NodegroupName: aws.String(ng)})
	if err != nil {
		t.Fatalf("UpdateNodegroupVersion to the cluster's: %v", err)
	}

	if st := waitUpdate(t, c, name, ng, aws.ToString(nv.Update.Id)); st != ekstypes.UpdateStatusSuccessful {
		t.Fatalf("node group version update ended %s", st)
	}

	// A node group's update is not found without its nodegroupName.
	if _, err := c.DescribeUpdate(ctx, &eks.DescribeUpdateInput{Name: aws.String(name), UpdateId: nv.Update.Id}); apiErrorCode(err) != errResourceNotFound {
		t.Errorf("DescribeUpdate of a node group update without nodegroupName: err = %v, want ResourceNotFoundException", err)
	}

	for _, bad := range []ekstypes.NodegroupScalingConfig{
		{MinSize: aws.Int32(3), MaxSize: aws.Int32(2), DesiredSize: aws.Int32(2)},
		{DesiredSize: aws.Int32(5)},
		{MaxSize: aws.Int32(0)},
	} {
		if _, err := c.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: aws.String(name), NodegroupName: aws.String(ng), ScalingConfig: &bad}); apiErrorCode(err) != errInvalidParameter {
			t.Errorf("UpdateNodegroupConfig %+v: err = %v, want InvalidParameterException", bad, err)
		}
	}

	sc, err := c.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{
		ClusterName: aws.String(name), NodegroupName: aws.String(ng),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(3), MaxSize: aws.Int32(3), DesiredSize: aws.Int32(3)},
	})
	if err != nil {
		t.Fatalf("UpdateNodegroupConfig to 3: %v", err)
	}

	if st := waitUpdate(t, c, name, ng, aws.ToString(sc.Update.Id)); st != ekstypes.UpdateStatusSuccessful {
		t.Fatalf("scaling update ended %s", st)
	}

	g, err := c.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(ng)})
	if err != nil {
		t.Fatal(err)
	}

	if aws.ToString(g.Nodegroup.Version) != "1.31" || aws.ToInt32(g.Nodegroup.ScalingConfig.DesiredSize) != 3 || aws.ToInt32(g.Nodegroup.ScalingConfig.MaxSize) != 3 || g.Nodegroup.Status != ekstypes.NodegroupStatusActive {
		t.Errorf("node group: version %s, scaling %+v, %s; want 1.31, 3/3/3, ACTIVE", aws.ToString(g.Nodegroup.Version), g.Nodegroup.ScalingConfig, g.Nodegroup.Status)
	}

	// A node group created now runs the cluster's (emulated) version.
	if _, err := c.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
		ClusterName: aws.String(name), NodegroupName: aws.String("more"), NodeRole: aws.String("arn:aws:iam::123456789012:role/n"),
		Subnets: []string{"subnet-1"}, InstanceTypes: []string{"m6i.large"},
	}); err != nil {
		t.Fatal(err)
	}

	g, err = c.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String("more")})
	if err != nil || aws.ToString(g.Nodegroup.Version) != "1.31" {
		t.Errorf("new node group: %v, version %v; want 1.31", err, g)
	}

	// Reads are not writes.
	writes = e.Writes(regionA)

	if _, err := c.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}

	if got := e.Writes(regionA); got != writes {
		t.Errorf("Writes changed on a read: %d → %d", writes, got)
	}

	// A cluster deleted and created again under the name starts afresh.
	for _, n := range []string{ng, "more"} {
		if _, err := c.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(n)}); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := c.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(name)}); err != nil {
		t.Fatal(err)
	}

	if _, err := c.CreateCluster(context.Background(), &eks.CreateClusterInput{
		Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::123456789012:role/r"), Version: aws.String("1.29"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1"}},
	}); err != nil {
		t.Fatal(err)
	}

	d, err = c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil || aws.ToString(d.Cluster.Version) != "1.29" {
		t.Errorf("recreated cluster: %v, version %s; want 1.29", err, aws.ToString(d.Cluster.Version))
	}
}
