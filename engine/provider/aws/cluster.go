// The EKS cluster itself: ensure (create and wait ACTIVE), inventory,
// delete, and the control-plane version upgrade.

package aws

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
)

func (in *infra) ensureCluster(ctx context.Context) error {
	n := in.name
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
	switch {
	case err == nil:
		if out.Cluster.Tags[TagCluster] != in.name {
			return in.fail(KindEKSCluster, n, fmt.Errorf("EKS cluster %s exists in %s but is not tagged %s=%s; kiln does not adopt clusters it did not create", n, in.region, TagCluster, in.name))
		}
		switch out.Cluster.Status {
		case ekstypes.ClusterStatusDeleting, ekstypes.ClusterStatusFailed:
			return in.fail(KindEKSCluster, n, fmt.Errorf("EKS cluster %s is %s; run `%s`, then create again", n, out.Cluster.Status, in.p.command("destroy", in.name, in.region)))
		}
	case apiCode(err) == "ResourceNotFoundException":
		in.emit(KindEKSCluster, n, engine.StatusInProgress, "creating")
		err := retryRolePropagation(ctx, func(ctx context.Context) error {
			var version *string
			if in.p.KubernetesVersion != "" {
				version = aws.String(in.p.KubernetesVersion)
			}
			_, err := in.eks.CreateCluster(ctx, &eks.CreateClusterInput{
				Name:    aws.String(n),
				Version: version,
				RoleArn: aws.String(in.roleARNs["cluster"]),
				// Access entries, with the creator as bootstrap admin
				// (access.go; API_CreateAccessConfigRequest.html).
				AccessConfig: &ekstypes.CreateAccessConfigRequest{
					AuthenticationMode:                      AuthenticationMode,
					BootstrapClusterCreatorAdminPermissions: aws.Bool(true),
				},
				ResourcesVpcConfig: &ekstypes.VpcConfigRequest{
					SubnetIds: in.subnetIDs, SecurityGroupIds: []string{in.sgID},
					EndpointPublicAccess: aws.Bool(true),
				},
				Tags: map[string]string{TagCluster: in.name, TagManagedBy: "kiln"},
			})
			return err
		})
		if err != nil && apiCode(err) != "ResourceInUseException" {
			return in.fail(KindEKSCluster, n, fmt.Errorf("create EKS cluster %s: %w", n, err))
		}
	default:
		return in.fail(KindEKSCluster, n, fmt.Errorf("describe EKS cluster %s: %w", n, err))
	}
	err = poll(ctx, waitLimit, func(ctx context.Context) (bool, error) {
		out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
		if err != nil {
			return false, fmt.Errorf("describe EKS cluster %s: %w", n, err)
		}
		in.cluster = out.Cluster
		switch out.Cluster.Status {
		case ekstypes.ClusterStatusActive:
			return true, nil
		case ekstypes.ClusterStatusFailed, ekstypes.ClusterStatusDeleting:
			return false, fmt.Errorf("EKS cluster %s is %s", n, out.Cluster.Status)
		}
		in.emit(KindEKSCluster, n, engine.StatusInProgress, "%s", out.Cluster.Status)
		return false, nil
	})
	if err != nil {
		return in.fail(KindEKSCluster, n, err)
	}
	got := aws.ToString(in.cluster.Version)
	if want := in.p.KubernetesVersion; want != "" && got != want {
		// Never ignore what the user asked for: an existing cluster runs
		// another version, and create does not change it.
		err := engine.NewInputError(failure.Input, input.KubernetesVersion, want, "{input} %s: EKS cluster %s already runs Kubernetes %s, and create does not change the version of an existing cluster; run create without {input} (or with %s)", want, n, got, got)
		return in.fail(KindEKSCluster, n, err)
	}
	in.emit(KindEKSCluster, n, engine.StatusCurrent, "ACTIVE, Kubernetes %s", got)
	return nil
}

// clusterExists says whether the EKS cluster exists (in any state).
func (in *infra) clusterExists(ctx context.Context) (bool, error) {
	_, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(in.name)})
	switch {
	case err == nil:
		return true, nil
	case apiCode(err) == "ResourceNotFoundException":
		return false, nil
	}
	return false, fmt.Errorf("describe EKS cluster %s: %w", in.name, err)
}

func caData(c *ekstypes.Cluster) string {
	if c.CertificateAuthority == nil {
		return ""
	}
	return aws.ToString(c.CertificateAuthority.Data)
}

// clusterInventory adds the kiln-tagged EKS cluster and its kiln-tagged
// node groups to inv.
func (in *infra) clusterInventory(ctx context.Context, inv Inventory) error {
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(in.name)})
	switch {
	case err == nil && out.Cluster.Tags[TagCluster] == in.name:
		inv[KindEKSCluster] = append(inv[KindEKSCluster], in.name)
		ngs, err := in.nodegroups(ctx)
		if err != nil {
			return err
		}
		inv[KindNodegroup] = ngs
	case err != nil && apiCode(err) != "ResourceNotFoundException":
		return fmt.Errorf("describe EKS cluster %s: %w", in.name, err)
	}
	return nil
}

func (in *infra) deleteCluster(ctx context.Context) error {
	n := in.name
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
	switch {
	case apiCode(err) == "ResourceNotFoundException":
		in.emit(KindEKSCluster, n, engine.StatusNotFound, "none")
		return nil
	case err != nil:
		return in.fail(KindEKSCluster, n, fmt.Errorf("describe EKS cluster %s: %w", n, err))
	case out.Cluster.Tags[TagCluster] != in.name:
		in.emit(KindEKSCluster, n, engine.StatusCurrent, "not tagged %s=%s: kiln did not create it; left alone", TagCluster, in.name)
		return nil
	}
	in.emit(KindEKSCluster, n, engine.StatusTerminating, "deleting")
	if _, err := in.eks.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(n)}); err != nil && apiCode(err) != "ResourceNotFoundException" {
		// ResourceInUseException is no "already deleting": EKS answers it
		// while the cluster still has node groups or another operation
		// runs. Waiting would wait for nothing: say so now.
		if apiCode(err) == "ResourceInUseException" && out.Cluster.Status != ekstypes.ClusterStatusDeleting {
			return in.fail(KindEKSCluster, n, fmt.Errorf("EKS refuses to delete cluster %s (%v)%s; run `%s` again once what it names is gone", n, err, in.attached(ctx), in.p.command("destroy", in.name, in.region)))
		}
		if apiCode(err) != "ResourceInUseException" {
			return in.fail(KindEKSCluster, n, fmt.Errorf("delete EKS cluster %s: %w", n, err))
		}
	}
	err = poll(ctx, deleteLimit, func(ctx context.Context) (bool, error) {
		_, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
		if apiCode(err) == "ResourceNotFoundException" {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return in.fail(KindEKSCluster, n, fmt.Errorf("confirm EKS cluster %s deleted: %w", n, err))
	}
	in.emit(KindEKSCluster, n, engine.StatusNotFound, "deleted")
	return nil
}

// attached names what is still attached to the EKS cluster (node groups,
// Fargate profiles), for a DeleteCluster EKS refuses.
func (in *infra) attached(ctx context.Context) string {
	var parts []string
	if ngs, err := in.eks.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: aws.String(in.name)}); err == nil && len(ngs.Nodegroups) > 0 {
		parts = append(parts, "node groups "+strings.Join(ngs.Nodegroups, ", "))
	}
	if fps, err := in.eks.ListFargateProfiles(ctx, &eks.ListFargateProfilesInput{ClusterName: aws.String(in.name)}); err == nil && len(fps.FargateProfileNames) > 0 {
		parts = append(parts, "Fargate profiles "+strings.Join(fps.FargateProfileNames, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": still attached: " + strings.Join(parts, "; ")
}

// KindFargateProfile is the kind of the Fargate profiles' resource events.
const KindFargateProfile = "FargateProfile"

// deleteFargateProfiles deletes every Fargate profile of the EKS cluster.
// kiln creates none, so each one was made by hand or another tool; EKS
// deletes no cluster that still has one (DeleteCluster: "If you have …
// Fargate profiles attached to the cluster, you must delete them first",
// ResourceInUseException —
// https://docs.aws.amazon.com/eks/latest/APIReference/API_DeleteCluster.html),
// and it cannot outlive the cluster, so — as eksctl does, and as for a
// node group kiln did not create — it is deleted, named in its own event.
// One at a time: "Only one Fargate profile in a cluster can be in the
// DELETING status at a time" (API_DeleteFargateProfile.html); the names
// come from ListFargateProfiles (API_ListFargateProfiles.html, paginated
// by nextToken).
func (in *infra) deleteFargateProfiles(ctx context.Context) error {
	n := in.name
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
	switch {
	case apiCode(err) == "ResourceNotFoundException":
		in.emit(KindFargateProfile, n, engine.StatusNotFound, "none: no EKS cluster %s", n)
		return nil
	case err != nil:
		return in.fail(KindFargateProfile, n, fmt.Errorf("describe EKS cluster %s: %w", n, err))
	case out.Cluster.Tags[TagCluster] != in.name:
		return nil // deleteCluster leaves it alone, and so its profiles
	}
	var names []string
	pg := eks.NewListFargateProfilesPaginator(in.eks, &eks.ListFargateProfilesInput{ClusterName: aws.String(n)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if apiCode(err) == "ResourceNotFoundException" {
			return nil
		}
		if err != nil {
			return in.fail(KindFargateProfile, n, fmt.Errorf("list Fargate profiles of %s: %w", n, err))
		}
		names = append(names, page.FargateProfileNames...)
	}
	if len(names) == 0 {
		in.emit(KindFargateProfile, n, engine.StatusNotFound, "none")
	}
	for _, fp := range names {
		in.emit(KindFargateProfile, fp, engine.StatusTerminating, "deleting: not created by kiln (kiln creates no Fargate profile), and EKS deletes no cluster that has one")
		err := poll(ctx, deleteLimit, func(ctx context.Context) (bool, error) {
			_, err := in.eks.DeleteFargateProfile(ctx, &eks.DeleteFargateProfileInput{ClusterName: aws.String(n), FargateProfileName: aws.String(fp)})
			switch apiCode(err) {
			case "":
			case "ResourceNotFoundException":
				return true, nil
			case "ResourceInUseException": // another profile is DELETING
				in.emit(KindFargateProfile, fp, engine.StatusTerminating, "waiting: %s", errorMessage(err))
				return false, nil
			default:
				return false, fmt.Errorf("delete Fargate profile %s of %s: %w", fp, n, err)
			}
			_, err = in.eks.DescribeFargateProfile(ctx, &eks.DescribeFargateProfileInput{ClusterName: aws.String(n), FargateProfileName: aws.String(fp)})
			if apiCode(err) == "ResourceNotFoundException" {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			return in.fail(KindFargateProfile, fp, err)
		}
		in.emit(KindFargateProfile, fp, engine.StatusNotFound, "deleted")
	}
	return nil
}

func (in *infra) upgradeCluster(ctx context.Context) error {
	st, pl, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindEKSCluster, in.name, err)
	}
	if pl.version == "" {
		return nil
	}
	// EKS moves the control plane only while every node group runs its
	// version: a group an interrupted upgrade left behind catches up first.
	for _, g := range st.groups {
		if aws.ToString(g.Version) != pl.from {
			if err := in.nodegroupVersion(ctx, aws.ToString(g.NodegroupName), aws.ToString(g.Version), pl.from); err != nil {
				return err
			}
		}
	}
	in.emit(KindEKSCluster, in.name, engine.StatusInProgress, "updating Kubernetes %s → %s", pl.from, pl.version)
	out, err := in.eks.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(in.name), Version: aws.String(pl.version)})
	if err != nil {
		return in.fail(KindEKSCluster, in.name, fmt.Errorf("update EKS cluster %s to Kubernetes %s: %w", in.name, pl.version, err))
	}
	in.p.checkpoint(ctx, "aws-upgrade-cluster-requested")
	if err := in.waitUpdate(ctx, KindEKSCluster, in.name, "", out.Update); err != nil {
		return in.fail(KindEKSCluster, in.name, err)
	}
	in.emit(KindEKSCluster, in.name, engine.StatusCurrent, "ACTIVE, Kubernetes %s", pl.version)
	return nil
}
