package aws

// EKS access (DESIGN.md §17): the cluster's authentication mode, the
// access entries --admin and --viewer ask for, and the Kubernetes RBAC
// that gives the viewers' group the support role — ensure, read and plan
// side by side.
//
// kiln creates every EKS cluster with accessConfig authenticationMode
// API_AND_CONFIG_MAP and bootstrapClusterCreatorAdminPermissions true:
// the identity that runs kiln create is cluster admin through an access
// entry EKS makes (not kiln's), and other identities get entries too.
//
// An entry kiln creates is type STANDARD and tagged kiln.dev/cluster=NAME,
// app.kubernetes.io/managed-by=kiln and kiln.dev/access=admin|viewer; the
// tags are how kiln knows its own entries. Only those are ever changed or
// deleted: an entry without them (the creator's, one made by hand or by
// another tool) is listed by status and never touched.
//
//   - admin: AmazonEKSClusterAdminPolicy associated with access scope
//     cluster.
//   - viewer: Kubernetes group kiln:support (SupportGroup) and no access
//     policy at all, so never cluster admin; once a viewer is named, kiln
//     applies the kiln-support ClusterRole of docs/rbac-support.yaml in the
//     cluster and binds that group to it (ClusterRoleBinding
//     kiln-support-eks-viewers).
//
// A cluster still in CONFIG_MAP (made by a kiln before access entries) is
// switched to API_AND_CONFIG_MAP by kiln upgrade (UpdateClusterConfig);
// create refuses --admin/--viewer there, pointing at upgrade.
//
// --admin and --viewer are each a whole list. A flag not given keeps what
// is there (kiln's entries of that kind are left as they are); given, kiln's
// entries of that kind become exactly the ARNs named: missing ones are
// created, kiln's others of that kind deleted. `--admin none` (or
// --admin "") names none: it removes every admin entry kiln made. The
// rule is the same for create (first run, rerun and --continue) and
// upgrade.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kilnctl/kiln/docs"
	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/platform"
)

// KindAccessEntry is the resource kind of an EKS access entry.
const KindAccessEntry = "AccessEntry"

// KindSupportBinding is the resource kind of the RBAC kiln applies for the
// viewers' group.
const KindSupportBinding = "SupportRBAC"

const (
	// AuthenticationMode is the mode kiln creates EKS clusters with.
	AuthenticationMode = ekstypes.AuthenticationModeApiAndConfigMap
	// SupportGroup is the Kubernetes group a viewer entry maps to (EKS
	// refuses group names starting with "system:").
	SupportGroup = "kiln:support"
	// SupportRole is the ClusterRole of docs/rbac-support.yaml.
	SupportRole = "kiln-support"
	// SupportBinding binds SupportGroup to SupportRole.
	SupportBinding = "kiln-support-eks-viewers"
	// AdminPolicy is the access policy of an admin entry.
	AdminPolicy = "AmazonEKSClusterAdminPolicy"
	// TagAccess tags an access entry kiln made with its kind.
	TagAccess = "kiln.dev/access"
)

// Access is what --admin and --viewer ask.
type Access struct {
	Admins, Viewers []string
	// SetAdmins and SetViewers say the flag was given: kiln's entries of
	// that kind become exactly the list (none when empty). Not set keeps
	// them.
	SetAdmins, SetViewers bool
}

func (a Access) empty() bool { return !a.SetAdmins && !a.SetViewers }

// principalRE is an IAM role or user ARN, as IAM forms them
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html,
// reference_identifiers.html): arn:PARTITION:iam::ACCOUNT:role|user/[PATH/]NAME,
// a 12-digit account, a path of printable ASCII between slashes, a name of
// letters, digits and +=,.@_- up to 64 characters.
var principalRE = regexp.MustCompile(`^arn:(aws|aws-cn|aws-us-gov|aws-iso|aws-iso-b|aws-iso-e|aws-iso-f|aws-eusc):iam::([0-9]{12}):(role|user)/(?:[\x21-\x7e]*/)?([\w+=,.@-]{1,64})$`)

var stsRE = regexp.MustCompile(`^arn:([a-z-]+):sts::([0-9]{12}):assumed-role/([\w+=,.@-]+)/`)

// CheckPrincipal says what is wrong with arn as an access entry's
// principal (nil when nothing); flag names the flag for the message.
func CheckPrincipal(in input.Input, arn string) error {
	if m := stsRE.FindStringSubmatch(arn); m != nil {
		return engine.NewInputError(failure.Input, in, arn, "{input} %s: an STS assumed-role session cannot have an access entry (EKS refuses session principals); name the role: arn:%s:iam::%s:role/%s (with its path, if it has one)", arn, m[1], m[2], m[3])
	}
	if len(arn) > 2048 || !principalRE.MatchString(arn) {
		return engine.NewInputError(failure.Input, in, arn, "{input} %s: not an IAM role or user ARN (arn:aws:iam::ACCOUNT:role/NAME or arn:aws:iam::ACCOUNT:user/NAME, a 12-digit account, a name of at most 64 letters, digits and +=,.@_-)", arn)
	}
	return nil
}

// kindInput is the input that names principals of an entry kind
// (engine.AccessAdmin, engine.AccessViewer).
func kindInput(kind string) input.Input {
	if kind == engine.AccessAdmin {
		return input.Admin
	}
	return input.Viewer
}

// validate checks the ARNs (failure.Input naming the flag and value).
func (a Access) validate() error {
	for _, v := range a.Admins {
		if err := CheckPrincipal(input.Admin, v); err != nil {
			return err
		}
	}
	for _, v := range a.Viewers {
		if err := CheckPrincipal(input.Viewer, v); err != nil {
			return err
		}
		if slices.Contains(a.Admins, v) {
			return engine.NewInputError(failure.Input, input.Viewer, v, "{input} %s: also named with {input:admin}; a principal has one access entry, admin or viewer", v)
		}
	}
	return nil
}

// regionPartition is the ARN partition of region.
func regionPartition(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	case strings.HasPrefix(region, "us-isob-"):
		return "aws-iso-b"
	case strings.HasPrefix(region, "us-iso-"):
		return "aws-iso"
	case strings.HasPrefix(region, "eusc-"):
		return "aws-eusc"
	}
	return "aws"
}

// checkPartition refuses principals of another partition than region's.
func (a Access) checkPartition(region string) error {
	want := regionPartition(region)
	for _, l := range []struct {
		in   input.Input
		arns []string
	}{{input.Admin, a.Admins}, {input.Viewer, a.Viewers}} {
		for _, v := range l.arns {
			if p := partition(v); p != want {
				return engine.NewInputError(failure.Input, l.in, v, "{input} %s: an ARN of partition %s, but region %s is in partition %s", v, p, region, want)
			}
		}
	}
	return nil
}

// accessEntry is one entry as EKS describes it.
type accessEntry struct {
	principal string
	typ       string
	kiln      bool
	kind      string // kiln's tag, else judged from groups and policies
	groups    []string
	policies  []string
	scopes    map[string]ekstypes.AccessScopeType
}

func (en accessEntry) public() engine.AccessEntry {
	return engine.AccessEntry{Principal: en.principal, Kind: en.kind, Type: en.typ, Kiln: en.kiln, Groups: nonNil(en.groups), Policies: nonNil(en.policies)}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (in *infra) adminPolicyARN() string {
	return "arn:" + regionPartition(in.region) + ":eks::aws:cluster-access-policy/" + AdminPolicy
}

// readAccess lists the cluster's access entries with their tags and
// policies. It writes nothing.
func (in *infra) readAccess(ctx context.Context) ([]accessEntry, error) {
	var names []string
	pg := eks.NewListAccessEntriesPaginator(in.eks, &eks.ListAccessEntriesInput{ClusterName: aws.String(in.name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list access entries of EKS cluster %s: %w", in.name, err)
		}
		names = append(names, page.AccessEntries...)
	}
	slices.Sort(names)
	out := make([]accessEntry, 0, len(names))
	for _, n := range names {
		d, err := in.eks.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(in.name), PrincipalArn: aws.String(n)})
		if apiCode(err) == "ResourceNotFoundException" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("describe access entry %s: %w", n, err)
		}
		en := accessEntry{principal: n, typ: aws.ToString(d.AccessEntry.Type), groups: d.AccessEntry.KubernetesGroups, scopes: map[string]ekstypes.AccessScopeType{}}
		tags := d.AccessEntry.Tags
		if tags[TagCluster] == in.name && tags[TagManagedBy] == "kiln" && (tags[TagAccess] == engine.AccessAdmin || tags[TagAccess] == engine.AccessViewer) {
			en.kiln, en.kind = true, tags[TagAccess]
		}
		ppg := eks.NewListAssociatedAccessPoliciesPaginator(in.eks, &eks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String(in.name), PrincipalArn: aws.String(n)})
		for ppg.HasMorePages() {
			page, err := ppg.NextPage(ctx)
			if apiCode(err) == "ResourceNotFoundException" {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("list access policies of %s: %w", n, err)
			}
			for _, ap := range page.AssociatedAccessPolicies {
				pa := aws.ToString(ap.PolicyArn)
				en.policies = append(en.policies, pa)
				if ap.AccessScope != nil {
					en.scopes[pa] = ap.AccessScope.Type
				}
			}
		}
		if !en.kiln {
			switch {
			case en.typ != "" && en.typ != "STANDARD":
				en.kind = engine.AccessNode
			case en.scopes[in.adminPolicyARN()] == ekstypes.AccessScopeTypeCluster:
				en.kind = engine.AccessAdmin
			case slices.Contains(en.groups, SupportGroup) && len(en.policies) == 0:
				en.kind = engine.AccessViewer
			default:
				en.kind = engine.AccessOther
			}
		}
		out = append(out, en)
	}
	return out, nil
}

// accessStep is one change of the access plan.
type accessStep struct {
	action    string // create | update | delete | replace
	principal string
	kind      string // the kind wanted (create, update, replace) or had (delete)
	why       string
	entry     *accessEntry // the entry there (nil for create)
}

// planAccess derives the changes from what is asked and what is there:
// creates and fixes first, deletes last, so a swap of admins never leaves
// the cluster without the new one.
func (in *infra) planAccess(have []accessEntry) ([]accessStep, error) {
	a := in.p.Access
	byPrincipal := map[string]*accessEntry{}
	for i := range have {
		byPrincipal[have[i].principal] = &have[i]
	}
	var steps, deletes []accessStep
	want := func(kind string, arns []string) error {
		for _, p := range arns {
			en := byPrincipal[p]
			switch {
			case en == nil:
				steps = append(steps, accessStep{action: "create", principal: p, kind: kind})
			case !en.kiln && en.kind == kind:
				logf(in.sink, engine.LevelInfo, "access entry %s: already %s through an entry kiln did not create; left alone", p, kind)
			case !en.kiln:
				return engine.NewInputError(failure.Input, kindInput(kind), p, "{input} %s: EKS cluster %s already has an access entry for this principal that kiln did not create (%s: groups %v, policies %v); kiln never changes it. Delete it (aws eks delete-access-entry) or leave %s out", p, in.name, en.kind, en.groups, en.policies, p)
			case en.kind != kind:
				steps = append(steps, accessStep{action: "replace", principal: p, kind: kind, entry: en, why: en.kind + " → " + kind})
			default:
				if why := in.entryDrift(*en); why != "" {
					steps = append(steps, accessStep{action: "update", principal: p, kind: kind, entry: en, why: why})
				}
			}
		}
		return nil
	}
	if a.SetAdmins {
		if err := want(engine.AccessAdmin, a.Admins); err != nil {
			return nil, err
		}
	}
	if a.SetViewers {
		if err := want(engine.AccessViewer, a.Viewers); err != nil {
			return nil, err
		}
	}
	for i := range have {
		en := &have[i]
		if !en.kiln || slices.Contains(a.Admins, en.principal) || slices.Contains(a.Viewers, en.principal) {
			continue
		}
		if (en.kind == engine.AccessAdmin && a.SetAdmins) || (en.kind == engine.AccessViewer && a.SetViewers) {
			deletes = append(deletes, accessStep{action: "delete", principal: en.principal, kind: en.kind, entry: en, why: "no longer named with " + in.p.inputName(kindInput(en.kind))})
		} else if why := in.entryDrift(*en); why != "" {
			// kiln's own entries it keeps are kept right (a viewer never
			// gains a policy).
			steps = append(steps, accessStep{action: "update", principal: en.principal, kind: en.kind, entry: en, why: why})
		}
	}
	return append(steps, deletes...), nil
}

// entryDrift says how a kiln entry differs from what its kind needs ("" when
// it does not).
func (in *infra) entryDrift(en accessEntry) string {
	var why []string
	switch en.kind {
	case engine.AccessAdmin:
		if en.scopes[in.adminPolicyARN()] != ekstypes.AccessScopeTypeCluster {
			why = append(why, AdminPolicy+" not associated with scope cluster")
		}
		if len(en.groups) > 0 {
			why = append(why, fmt.Sprintf("Kubernetes groups %v", en.groups))
		}
	case engine.AccessViewer:
		if !slices.Equal(en.groups, []string{SupportGroup}) {
			why = append(why, fmt.Sprintf("Kubernetes groups %v, want [%s]", en.groups, SupportGroup))
		}
		if len(en.policies) > 0 {
			why = append(why, fmt.Sprintf("access policies %v, want none", en.policies))
		}
	}
	return strings.Join(why, "; ")
}

func (s accessStep) planChange() engine.PlanChange {
	msg := map[string]string{
		engine.AccessAdmin:  "cluster admin (" + AdminPolicy + ", scope cluster)",
		engine.AccessViewer: "viewer: Kubernetes group " + SupportGroup + " → ClusterRole " + SupportRole + ", no access policy",
	}[s.kind]
	action := s.action
	switch s.action {
	case "delete":
		msg = "kiln's " + s.kind + " entry: " + s.why
	case "replace":
		action, msg = platform.ActionUpdate, s.why+": deleted and created again as "+msg
	case "update":
		msg = "kiln's " + s.kind + " entry: " + s.why
	}
	return engine.PlanChange{Action: action, Kind: KindAccessEntry, Name: s.principal, Fields: []string{"kubernetesGroups", "accessPolicies"}, Message: msg}
}

// planAccessChanges is the access part of an upgrade's plan (reads only):
// a cluster still in CONFIG_MAP (made by a kiln before access entries)
// goes to API_AND_CONFIG_MAP first, then the entries.
func (in *infra) planAccessChanges(ctx context.Context, cluster *ekstypes.Cluster) ([]engine.PlanChange, error) {
	var out []engine.PlanChange
	configMap := authMode(cluster) == string(ekstypes.AuthenticationModeConfigMap)
	if configMap {
		out = append(out, engine.PlanChange{Action: platform.ActionUpdate, Kind: KindEKSCluster, Name: in.name, Fields: []string{"accessConfig.authenticationMode"},
			Message: "authentication mode CONFIG_MAP → " + string(AuthenticationMode) + ": access entries, beside the aws-auth ConfigMap (which keeps working); EKS never switches back"})
	}
	if in.p.Access.empty() {
		return out, nil
	}
	if err := in.p.Access.checkPartition(in.region); err != nil {
		return nil, err
	}
	var have []accessEntry
	if !configMap {
		var err error
		if have, err = in.readAccess(ctx); err != nil {
			return nil, err
		}
	}
	steps, err := in.planAccess(have)
	if err != nil {
		return nil, err
	}
	if err := in.keepCaller(ctx, steps); err != nil {
		return nil, err
	}
	for _, s := range steps {
		out = append(out, s.planChange())
	}
	return out, nil
}

// switchAuthMode moves a CONFIG_MAP cluster to AuthenticationMode
// (UpdateClusterConfig, waited for). Checkpoint
// aws-upgrade-access-mode-requested falls between the request and the wait.
func (in *infra) switchAuthMode(ctx context.Context) error {
	if authMode(in.cluster) != string(ekstypes.AuthenticationModeConfigMap) {
		return nil
	}
	in.emit(KindEKSCluster, in.name, engine.StatusInProgress, "authentication mode CONFIG_MAP → %s", AuthenticationMode)
	out, err := in.eks.UpdateClusterConfig(ctx, &eks.UpdateClusterConfigInput{Name: aws.String(in.name),
		AccessConfig: &ekstypes.UpdateAccessConfigRequest{AuthenticationMode: AuthenticationMode}})
	if err != nil {
		return in.fail(KindEKSCluster, in.name, fmt.Errorf("switch EKS cluster %s to authentication mode %s: %w", in.name, AuthenticationMode, err))
	}
	in.p.checkpoint(ctx, "aws-upgrade-access-mode-requested")
	if err := in.waitUpdate(ctx, KindEKSCluster, in.name, "", out.Update); err != nil {
		return in.fail(KindEKSCluster, in.name, err)
	}
	st, _, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindEKSCluster, in.name, err)
	}
	in.cluster = st.cluster
	in.emit(KindEKSCluster, in.name, engine.StatusCurrent, "ACTIVE, authentication mode %s", authMode(in.cluster))
	return nil
}

// sameIdentity says whether caller (GetCallerIdentity's ARN: an IAM user,
// or an STS assumed-role session) is principal (an IAM user or role ARN,
// a role with any path).
func sameIdentity(caller, principal string) bool {
	if caller == principal {
		return true
	}
	m := stsRE.FindStringSubmatch(caller)
	if m == nil {
		return false
	}
	return strings.HasPrefix(principal, "arn:"+m[1]+":iam::"+m[2]+":role/") && strings.HasSuffix(principal, "/"+m[3])
}

// keepCaller refuses steps that take cluster admin from the identity
// running kiln (its entry deleted, or replaced by a viewer's): the rest of
// the run, and the next, would be locked out. The caller is asked of STS;
// when STS does not answer, nothing is refused (EKS's own bootstrap entry
// usually remains).
func (in *infra) keepCaller(ctx context.Context, steps []accessStep) error {
	var risky []accessStep
	for _, s := range steps {
		if s.entry != nil && s.entry.kind == engine.AccessAdmin && (s.action == "delete" || s.action == "replace") {
			risky = append(risky, s)
		}
	}
	if len(risky) == 0 {
		return nil
	}
	out, err := sts.NewFromConfig(in.cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		logf(in.sink, engine.LevelWarn, "could not tell who runs kiln (sts GetCallerIdentity: %v); removing admin entries anyway", err)
		return nil
	}
	caller := aws.ToString(out.Arn)
	for _, s := range risky {
		if sameIdentity(caller, s.principal) {
			return engine.NewInputError(failure.Input, input.Admin, s.principal, "{input}: %s is the identity running kiln (%s); removing its admin entry would lock this run out of the cluster. Name it with {input}, or run kiln as another admin", s.principal, caller)
		}
	}
	return nil
}

// accessUsable refuses access flags on a cluster whose authentication mode
// has no access entries (an EKS cluster made by a kiln before access
// entries: CONFIG_MAP).
func (in *infra) accessUsable(c *ekstypes.Cluster) error {
	if err := in.p.Access.checkPartition(in.region); err != nil {
		return err
	}
	mode := ekstypes.AuthenticationModeConfigMap
	if c != nil && c.AccessConfig != nil && c.AccessConfig.AuthenticationMode != "" {
		mode = c.AccessConfig.AuthenticationMode
	}
	if mode == ekstypes.AuthenticationModeConfigMap {
		return engine.NewInputError(failure.Input, input.Admin, in.name, "{input}/{input:viewer}: EKS cluster %s has authentication mode CONFIG_MAP (made by a kiln before access entries), which has no access entries, and create does not change an existing cluster; run %s%s (it switches the mode to %s, then makes the entries)", in.name, in.p.command("upgrade", in.name, in.region), input.CLIOnly(" with the same flags"), AuthenticationMode)
	}
	return nil
}

// ensureAccess converges kiln's access entries on what --admin and
// --viewer ask (nothing when neither is given). Checkpoint
// aws-access-entry-created falls between an entry's creation and its
// policy association.
func (in *infra) ensureAccess(ctx context.Context) error {
	if in.p.Access.empty() {
		// The CLI says which flags were not given; a frontend with its own
		// words (the wizard) sets no access entries, so there is nothing
		// to point at.
		why := ""
		if in.p.namer == nil {
			why = fmt.Sprintf(" (no %s/%s)", input.FlagName(input.Admin), input.FlagName(input.Viewer))
		}
		in.emit(KindAccessEntry, in.name, engine.StatusCurrent, "authentication mode %s; entries left as they are%s", authMode(in.cluster), why)
		return nil
	}
	if err := in.accessUsable(in.cluster); err != nil {
		return in.fail(KindAccessEntry, in.name, err)
	}
	have, err := in.readAccess(ctx)
	if err != nil {
		return in.fail(KindAccessEntry, in.name, err)
	}
	steps, err := in.planAccess(have)
	if err == nil {
		err = in.keepCaller(ctx, steps)
	}
	if err != nil {
		return in.fail(KindAccessEntry, in.name, err)
	}
	for _, s := range steps {
		if err := in.applyAccess(ctx, s); err != nil {
			return in.fail(KindAccessEntry, s.principal, err)
		}
	}
	return nil
}

func authMode(c *ekstypes.Cluster) string {
	if c == nil || c.AccessConfig == nil || c.AccessConfig.AuthenticationMode == "" {
		return string(ekstypes.AuthenticationModeConfigMap)
	}
	return string(c.AccessConfig.AuthenticationMode)
}

func (in *infra) applyAccess(ctx context.Context, s accessStep) error {
	cl := aws.String(in.name)
	pa := aws.String(s.principal)
	if s.action == "delete" || s.action == "replace" {
		in.emit(KindAccessEntry, s.principal, engine.StatusTerminating, "deleting kiln's %s entry (%s)", s.entry.kind, s.why)
		if _, err := in.eks.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: cl, PrincipalArn: pa}); err != nil && apiCode(err) != "ResourceNotFoundException" {
			return fmt.Errorf("delete access entry %s: %w", s.principal, err)
		}
		if s.action == "delete" {
			in.emit(KindAccessEntry, s.principal, engine.StatusCurrent, "deleted")
			return nil
		}
	}
	var groups []string
	if s.kind == engine.AccessViewer {
		groups = []string{SupportGroup}
	}
	if s.action == "create" || s.action == "replace" {
		in.emit(KindAccessEntry, s.principal, engine.StatusInProgress, "creating %s entry", s.kind)
		_, err := in.eks.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{
			ClusterName: cl, PrincipalArn: pa, Type: aws.String("STANDARD"), KubernetesGroups: groups,
			Tags: map[string]string{TagCluster: in.name, TagManagedBy: "kiln", TagAccess: s.kind},
		})
		if err != nil {
			if apiCode(err) == "InvalidParameterException" {
				return engine.NewInputError(failure.Input, kindInput(s.kind), s.principal, "{input} %s: EKS refuses it: %v", s.principal, err)
			}
			return fmt.Errorf("create access entry %s: %w", s.principal, err)
		}
		in.p.checkpoint(ctx, "aws-access-entry-created")
	}
	if s.action == "update" {
		if !slices.Equal(s.entry.groups, groups) {
			if _, err := in.eks.UpdateAccessEntry(ctx, &eks.UpdateAccessEntryInput{ClusterName: cl, PrincipalArn: pa, KubernetesGroups: nonNil(groups)}); err != nil {
				return fmt.Errorf("update the Kubernetes groups of access entry %s: %w", s.principal, err)
			}
		}
		// A viewer never keeps an access policy; an admin's other
		// policies are left as someone added them.
		for _, pol := range s.entry.policies {
			if s.kind != engine.AccessViewer {
				break
			}
			if _, err := in.eks.DisassociateAccessPolicy(ctx, &eks.DisassociateAccessPolicyInput{ClusterName: cl, PrincipalArn: pa, PolicyArn: aws.String(pol)}); err != nil && apiCode(err) != "ResourceNotFoundException" {
				return fmt.Errorf("disassociate %s from access entry %s: %w", pol, s.principal, err)
			}
		}
	}
	if s.kind == engine.AccessAdmin && (s.action != "update" || s.entry.scopes[in.adminPolicyARN()] != ekstypes.AccessScopeTypeCluster) {
		if _, err := in.eks.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{
			ClusterName: cl, PrincipalArn: pa, PolicyArn: aws.String(in.adminPolicyARN()),
			AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster},
		}); err != nil {
			return fmt.Errorf("associate %s with access entry %s: %w", AdminPolicy, s.principal, err)
		}
	}
	msg := "cluster admin (" + AdminPolicy + ", scope cluster)"
	if s.kind == engine.AccessViewer {
		msg = "viewer: Kubernetes group " + SupportGroup + " (ClusterRole " + SupportRole + "), no access policy"
	}
	in.emit(KindAccessEntry, s.principal, engine.StatusCurrent, "%s", msg)
	return nil
}

// upgradeAccess is the access step of an upgrade: the entries, then the
// viewers' RBAC in the cluster.
func (in *infra) upgradeAccess(ctx context.Context) error {
	st, _, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindAccessEntry, in.name, err)
	}
	in.cluster = st.cluster
	if err := in.switchAuthMode(ctx); err != nil {
		return err
	}
	if in.p.Access.empty() {
		return nil
	}
	if err := in.ensureAccess(ctx); err != nil {
		return err
	}
	if len(in.p.Access.Viewers) == 0 {
		return nil
	}
	_, cs, err := in.p.kubeClient(ctx, in.cfg, st.cluster)
	if err != nil {
		return in.fail(KindSupportBinding, SupportBinding, err)
	}
	return in.ensureSupportRBAC(ctx, cs)
}

// supportObjects are the ClusterRoles of docs/rbac-support.yaml (the
// cluster-wide kiln-support and the namespaced one kiln binds in each of
// its namespaces, mirroring kiln-support's subjects there) and the
// binding of SupportGroup to kiln-support.
func supportObjects(cluster string) ([]*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, error) {
	labels := map[string]string{platform.LabelManagedBy: "kiln", platform.LabelCluster: cluster}
	var roles []*rbacv1.ClusterRole
	for _, doc := range strings.Split(string(docs.SupportRBAC), "\n---") {
		var head metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, nil, fmt.Errorf("docs/rbac-support.yaml: %w", err)
		}
		if head.Kind != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			return nil, nil, fmt.Errorf("docs/rbac-support.yaml: %w", err)
		}
		role.Labels = labels
		roles = append(roles, &role)
	}
	if len(roles) == 0 || roles[0].Name != SupportRole {
		return nil, nil, fmt.Errorf("docs/rbac-support.yaml: the first ClusterRole is not %s", SupportRole)
	}
	b := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: SupportBinding, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: SupportRole},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: SupportGroup}},
	}
	return roles, b, nil
}

// ensureSupportRBAC applies the kiln-support ClusterRole and binds the
// viewers' group to it (created, or put back as kiln defines them). A
// cluster API that does not answer yet (a new EKS endpoint) is retried
// for up to two minutes; an answer refusing the request fails at once.
func (in *infra) ensureSupportRBAC(ctx context.Context, cs kubernetes.Interface) error {
	roles, binding, err := supportObjects(in.name)
	if err != nil {
		return in.fail(KindSupportBinding, SupportBinding, err)
	}
	var last error
	err = poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		last = in.applySupportRBAC(ctx, cs, roles, binding)
		var st apierrors.APIStatus
		if last == nil || errors.As(last, &st) {
			return true, last
		}
		in.emit(KindSupportBinding, SupportBinding, engine.StatusInProgress, "cluster API not reachable yet: %v", last)
		return false, nil
	})
	if errors.Is(err, errPollLimit) {
		err = last
	}
	if err != nil {
		return in.fail(KindSupportBinding, SupportBinding, err)
	}
	in.emit(KindSupportBinding, SupportBinding, engine.StatusCurrent, "Kubernetes group %s → ClusterRole %s (docs/rbac-support.yaml)", SupportGroup, SupportRole)
	return nil
}

func (in *infra) applySupportRBAC(ctx context.Context, cs kubernetes.Interface, roles []*rbacv1.ClusterRole, binding *rbacv1.ClusterRoleBinding) error {
	rc := cs.RbacV1().ClusterRoles()
	for _, role := range roles {
		got, err := rc.Get(ctx, role.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = rc.Create(ctx, role, metav1.CreateOptions{})
		case err == nil:
			got.Rules, got.Labels = role.Rules, mergeLabels(got.Labels, role.Labels)
			_, err = rc.Update(ctx, got, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("apply ClusterRole %s: %w", role.Name, err)
		}
	}
	bc := cs.RbacV1().ClusterRoleBindings()
	gotB, err := bc.Get(ctx, binding.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = bc.Create(ctx, binding, metav1.CreateOptions{})
	case err == nil && gotB.RoleRef != binding.RoleRef:
		// roleRef cannot change: the binding is made again.
		if err = bc.Delete(ctx, binding.Name, metav1.DeleteOptions{}); err == nil {
			_, err = bc.Create(ctx, binding, metav1.CreateOptions{})
		}
	case err == nil:
		gotB.Subjects, gotB.Labels = binding.Subjects, mergeLabels(gotB.Labels, binding.Labels)
		_, err = bc.Update(ctx, gotB, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("apply ClusterRoleBinding %s: %w", SupportBinding, err)
	}
	return nil
}

func mergeLabels(have, add map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	for k, v := range add {
		have[k] = v
	}
	return have
}

// ReadAccess implements engine.AccessReader: the cluster's authentication
// mode and access entries, read live (kiln status).
func (p *Provider) ReadAccess(ctx context.Context, name, region string) engine.Access {
	in, err := p.newInfra(ctx, name, region, nil)
	if err != nil {
		return engine.Access{Mode: "unknown", Problem: err.Error()}
	}
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		return engine.Access{Mode: "unknown", Problem: fmt.Sprintf("describe EKS cluster %s: %v", name, err)}
	}
	acc := engine.Access{Mode: authMode(out.Cluster), Entries: []engine.AccessEntry{}}
	if acc.Mode == string(ekstypes.AuthenticationModeConfigMap) {
		acc.Problem = fmt.Sprintf("no access entries, the aws-auth ConfigMap decides who gets in; %s switches the cluster to %s", p.command("upgrade", name, region), AuthenticationMode)
		return acc
	}
	have, err := in.readAccess(ctx)
	if err != nil {
		acc.Problem = err.Error()
		return acc
	}
	for _, en := range have {
		acc.Entries = append(acc.Entries, en.public())
	}
	return acc
}
