package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/platform"
)

// KindAddon is the resource kind of an EKS managed add-on.
const KindAddon = "Addon"

// managedAddons are the add-ons kiln installs as EKS managed add-ons
// (DESIGN.md §17), so EKS upgrades them with the control plane: the VPC
// CNI with its network-policy enforcement turned on (off by default: then
// the NetworkPolicies kiln installs isolate nothing on EKS), kube-proxy
// and CoreDNS. Each is created with ResolveConflicts OVERWRITE, so the
// self-managed copy EKS bootstraps is adopted. configurationValues follow
// each add-on's schema (DescribeAddonConfiguration; for vpc-cni,
// enableNetworkPolicy "true" runs the network policy agent).
var managedAddons = []struct{ name, config string }{
	{"vpc-cni", `{"enableNetworkPolicy":"true"}`},
	{"kube-proxy", ""},
	{"coredns", ""},
}

// addonTags mark an add-on as kiln's.
func (in *infra) addonTags() map[string]string {
	return map[string]string{TagCluster: in.name, TagManagedBy: "kiln"}
}

// ensureAddons installs the managed add-ons, or puts back their
// configuration, and waits until each is ACTIVE.
func (in *infra) ensureAddons(ctx context.Context) error {
	return in.ensureAll(ctx, aws.ToString(in.cluster.Version), false)
}

// ensureAll asks for every managed add-on first, then waits for each: the
// three are created (or updated) side by side.
func (in *infra) ensureAll(ctx context.Context, version string, upgrade bool) error {
	for _, a := range managedAddons {
		skipped, err := in.ensureAddon(ctx, a.name, a.config, version, upgrade)
		if err != nil {
			return err
		}
		if skipped {
			return nil // this endpoint has no add-ons at all
		}
	}
	for _, a := range managedAddons {
		if err := in.waitAddon(ctx, a.name, a.config); err != nil {
			return err
		}
	}
	return nil
}

// ensureAddon asks for add-on name with config, at the default version
// for Kubernetes version when upgrade is set (else any version it has);
// waitAddon then waits until it is ACTIVE.
func (in *infra) ensureAddon(ctx context.Context, name, config, version string, upgrade bool) (skipped bool, err error) {
	d, err := in.eks.DescribeAddon(ctx, &eks.DescribeAddonInput{ClusterName: aws.String(in.name), AddonName: aws.String(name)})
	switch {
	case apiCode(err) == "ResourceNotFoundException":
		v, err := in.defaultAddonVersion(ctx, name, version)
		if err != nil {
			return false, in.fail(KindAddon, name, err)
		}
		in.emit(KindAddon, name, engine.StatusInProgress, "creating %s", v)
		in2 := &eks.CreateAddonInput{ClusterName: aws.String(in.name), AddonName: aws.String(name), AddonVersion: aws.String(v),
			ResolveConflicts: ekstypes.ResolveConflictsOverwrite, Tags: in.addonTags()}
		if config != "" {
			in2.ConfigurationValues = aws.String(config)
		}
		if _, err := in.eks.CreateAddon(ctx, in2); err != nil && apiCode(err) != "ResourceInUseException" {
			return false, in.fail(KindAddon, name, fmt.Errorf("create add-on %s: %w", name, err))
		}
	case err != nil:
		if in.unsupported(err) {
			in.emit(KindAddon, name, engine.StatusCurrent, "EKS add-ons are not available at this endpoint; left alone")
			return true, nil
		}
		return false, in.fail(KindAddon, name, fmt.Errorf("describe add-on %s: %w", name, err))
	default:
		up := &eks.UpdateAddonInput{ClusterName: aws.String(in.name), AddonName: aws.String(name), ResolveConflicts: ekstypes.ResolveConflictsOverwrite}
		change := []string{}
		if config != "" && !sameJSON(aws.ToString(d.Addon.ConfigurationValues), config) {
			up.ConfigurationValues = aws.String(config)
			change = append(change, "configuration "+config)
		}
		if upgrade {
			v, err := in.defaultAddonVersion(ctx, name, version)
			if err != nil {
				return false, in.fail(KindAddon, name, err)
			}
			if have := aws.ToString(d.Addon.AddonVersion); have != v {
				up.AddonVersion = aws.String(v)
				change = append(change, have+" → "+v)
			}
		}
		if len(change) > 0 {
			if err := in.waitAddon(ctx, name, ""); err != nil { // an update cannot start while one runs
				return false, err
			}
			in.emit(KindAddon, name, engine.StatusInProgress, "updating: %s", strings.Join(change, ", "))
			if _, err := in.eks.UpdateAddon(ctx, up); err != nil {
				return false, in.fail(KindAddon, name, fmt.Errorf("update add-on %s: %w", name, err))
			}
		}
	}
	return false, nil
}

// waitAddon polls the add-on until it is ACTIVE; CREATE_FAILED (or still
// DEGRADED at the limit) fails naming its health issues.
func (in *infra) waitAddon(ctx context.Context, name, config string) error {
	var last *ekstypes.Addon
	err := poll(ctx, updateWaitLimit, func(ctx context.Context) (bool, error) {
		d, err := in.eks.DescribeAddon(ctx, &eks.DescribeAddonInput{ClusterName: aws.String(in.name), AddonName: aws.String(name)})
		if err != nil {
			return false, fmt.Errorf("describe add-on %s: %w", name, err)
		}
		last = d.Addon
		switch d.Addon.Status {
		case ekstypes.AddonStatusActive:
			return true, nil
		case ekstypes.AddonStatusCreateFailed, ekstypes.AddonStatusUpdateFailed:
			return false, fmt.Errorf("add-on %s is %s: %s", name, d.Addon.Status, addonIssues(d.Addon))
		}
		in.emit(KindAddon, name, engine.StatusInProgress, "%s", d.Addon.Status)
		return false, nil
	})
	if err != nil {
		if last != nil && last.Status == ekstypes.AddonStatusDegraded {
			err = fmt.Errorf("%w (add-on %s DEGRADED: %s)", err, name, addonIssues(last))
		}
		return in.fail(KindAddon, name, err)
	}
	msg := "ACTIVE, " + aws.ToString(last.AddonVersion)
	if config != "" {
		msg += ", configuration " + config
	}
	in.emit(KindAddon, name, engine.StatusCurrent, "%s", msg)
	return nil
}

func addonIssues(a *ekstypes.Addon) string {
	if a.Health == nil || len(a.Health.Issues) == 0 {
		return "EKS gives no health issue"
	}
	var out []string
	for _, is := range a.Health.Issues {
		out = append(out, fmt.Sprintf("%s: %s", is.Code, aws.ToString(is.Message)))
	}
	return strings.Join(out, "; ")
}

// defaultAddonVersion is the version EKS marks default for add-on name on
// Kubernetes version (DescribeAddonVersions).
func (in *infra) defaultAddonVersion(ctx context.Context, name, version string) (string, error) {
	out, err := in.eks.DescribeAddonVersions(ctx, &eks.DescribeAddonVersionsInput{AddonName: aws.String(name), KubernetesVersion: aws.String(version)})
	if err != nil {
		return "", fmt.Errorf("versions of add-on %s for Kubernetes %s: %w", name, version, err)
	}
	var any string
	for _, a := range out.Addons {
		for _, v := range a.AddonVersions {
			for _, c := range v.Compatibilities {
				if aws.ToString(c.ClusterVersion) != version {
					continue
				}
				if c.DefaultVersion {
					return aws.ToString(v.AddonVersion), nil
				}
				if any == "" {
					any = aws.ToString(v.AddonVersion)
				}
			}
		}
	}
	if any == "" {
		return "", fmt.Errorf("EKS offers no version of add-on %s for Kubernetes %s", name, version)
	}
	return any, nil
}

// upgradeAddons brings every managed add-on to the default version for the
// cluster's Kubernetes version (after the control plane and the nodes:
// EKS's order for an upgrade).
func (in *infra) upgradeAddons(ctx context.Context) error {
	st, _, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindAddon, "", err)
	}
	return in.ensureAll(ctx, aws.ToString(st.cluster.Version), true)
}

// sameJSON compares two configurationValues documents by meaning.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}

// planAddons lists the managed add-ons an upgrade to Kubernetes version
// creates (a cluster made before kiln managed them) or moves to that
// version's default. It only reads.
func (in *infra) planAddons(ctx context.Context, version string) ([]engine.PlanChange, error) {
	var out []engine.PlanChange
	for _, a := range managedAddons {
		want, err := in.defaultAddonVersion(ctx, a.name, version)
		if err != nil {
			if in.unsupported(err) {
				return nil, nil
			}
			return nil, err
		}
		d, err := in.eks.DescribeAddon(ctx, &eks.DescribeAddonInput{ClusterName: aws.String(in.name), AddonName: aws.String(a.name)})
		switch {
		case apiCode(err) == "ResourceNotFoundException":
			msg := "EKS managed add-on " + want + ", upgraded with the cluster from now on"
			if a.config != "" {
				msg += "; configuration " + a.config
			}
			out = append(out, engine.PlanChange{Action: platform.ActionCreate, Kind: KindAddon, Name: a.name, Fields: []string{"addonVersion", "configurationValues"}, Message: msg})
		case err != nil:
			return nil, fmt.Errorf("describe add-on %s: %w", a.name, err)
		default:
			var fields []string
			var why []string
			if have := aws.ToString(d.Addon.AddonVersion); have != want {
				fields = append(fields, "addonVersion")
				why = append(why, fmt.Sprintf("%s → %s (the default for Kubernetes %s)", have, want, version))
			}
			if a.config != "" && !sameJSON(aws.ToString(d.Addon.ConfigurationValues), a.config) {
				fields = append(fields, "configurationValues")
				why = append(why, "configuration "+a.config)
			}
			if len(fields) > 0 {
				out = append(out, engine.PlanChange{Action: platform.ActionUpdate, Kind: KindAddon, Name: a.name, Fields: fields, Message: strings.Join(why, "; ") + ", after the node groups"})
			}
		}
	}
	return out, nil
}
