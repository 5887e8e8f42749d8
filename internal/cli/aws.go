package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/engine/provider/kube"
)

// awsFlags are the aws provider's flags beyond --region/--regions.
type awsFlags struct {
	profile         string
	kubeContext     string
	instanceType    string
	nodes           int
	k8sVersion      string
	writeKubeconfig bool
	// create is the create command's flag set (nil on other commands).
	create *pflag.FlagSet
	// upgrade is the upgrade command's flag set, with its own variables:
	// unset there means "keep what runs", not create's defaults.
	upgrade                      *pflag.FlagSet
	upgrading                    bool
	upNodes                      int
	upInstanceType, upK8sVersion string
	// --admin and --viewer, on create and on upgrade.
	admins, viewers     []string
	upAdmins, upViewers []string
}

// accessHelp words --admin and --viewer (DESIGN.md §17).
const (
	adminHelp  = "IAM role or user `ARN` that gets an EKS access entry with " + awsprovider.AdminPolicy + " (scope cluster); repeatable. Given, kiln's admin entries become exactly these (--admin none: no kiln admin entry); not given keeps them. Entries kiln did not create are never touched (aws provider)"
	viewerHelp = "IAM role or user `ARN` that gets an EKS access entry in Kubernetes group " + awsprovider.SupportGroup + ", bound to the read-only ClusterRole " + awsprovider.SupportRole + " (docs/rbac-support.yaml), never cluster admin; repeatable. Given, kiln's viewer entries become exactly these (--viewer none: no kiln viewer entry); not given keeps them (aws provider)"
)

// accessFrom reads --admin/--viewer of fs: a flag given sets that kind's
// whole list ("none" and "" name no principal).
func accessFrom(fs *pflag.FlagSet, admins, viewers []string) awsprovider.Access {
	clean := func(v []string) []string {
		var out []string
		for _, s := range v {
			if s = strings.TrimSpace(s); s != "" && !strings.EqualFold(s, "none") && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	return awsprovider.Access{
		Admins: clean(admins), Viewers: clean(viewers),
		SetAdmins: fs.Changed("admin"), SetViewers: fs.Changed("viewer"),
	}
}

func (f *awsFlags) registerUpgrade(fs *pflag.FlagSet) {
	f.upgrade = fs
	fs.IntVar(&f.upNodes, "nodes", 0, fmt.Sprintf("change the node group's size, 1 to %d (aws provider; default: keep it)", awsprovider.MaxNodes))
	fs.StringVar(&f.upInstanceType, "instance-type", "", "change the node group's EC2 instance type: a replacement node group is created, then the old one deleted (aws provider; default: keep it)")
	fs.StringVar(&f.upK8sVersion, "kubernetes-version", "", "upgrade the EKS control plane, then the nodes, to this Kubernetes version, MAJOR.MINOR, one minor version above the current (aws provider; default: keep it)")
	fs.StringArrayVar(&f.upAdmins, "admin", nil, adminHelp)
	fs.StringArrayVar(&f.upViewers, "viewer", nil, viewerHelp)
}

func (f *awsFlags) register(pf *pflag.FlagSet) {
	pf.StringVar(&f.profile, "profile", "", "AWS shared config profile (aws provider; default: $AWS_PROFILE or the default chain)")
	pf.StringVar(&f.kubeContext, "kube-context-override", "",
		"reach the EKS cluster's Kubernetes API through this kubeconfig context instead of its endpoint (aws provider; for emulators and local development; env "+awsprovider.KubeContextEnv+")")
}

func (f *awsFlags) registerCreate(fs *pflag.FlagSet) {
	f.create = fs
	fs.StringVar(&f.instanceType, "instance-type", awsprovider.DefaultInstanceType, "EC2 instance type of the node group (aws provider)")
	fs.IntVar(&f.nodes, "nodes", awsprovider.DefaultNodes, fmt.Sprintf("number of nodes in the node group, 1 to %d (aws provider)", awsprovider.MaxNodes))
	fs.StringVar(&f.k8sVersion, "kubernetes-version", "", "Kubernetes version of the EKS control plane kiln creates, MAJOR.MINOR like 1.30 (aws provider; default: EKS's default)")
	fs.BoolVar(&f.writeKubeconfig, "write-kubeconfig", false,
		"add or update a kubeconfig entry for the EKS cluster whose credential is the kiln aws token command (aws provider; written into $KUBECONFIG, else ~/.kube/config, as kubectl config set-context writes)")
	fs.StringArrayVar(&f.admins, "admin", nil, adminHelp)
	fs.StringArrayVar(&f.viewers, "viewer", nil, viewerHelp)
}

// onlyForAWS refuses aws flags on another provider.
func (f *awsFlags) onlyForAWS() error {
	switch {
	case f.profile != "":
		return failure.BadInput("--profile: only for PROVIDER aws")
	case f.kubeContext != "":
		return failure.BadInput("--kube-context-override: only for PROVIDER aws")
	case f.writeKubeconfig:
		return failure.BadInput("--write-kubeconfig: only for PROVIDER aws")
	}
	// create and upgrade each register the node group flags on their own
	// flag set (nil on other commands).
	for _, fs := range []*pflag.FlagSet{f.create, f.upgrade} {
		for _, name := range []string{"instance-type", "nodes", "kubernetes-version", "admin", "viewer"} {
			if fs != nil && fs.Changed(name) {
				return failure.BadInput("--%s: only for PROVIDER aws", name)
			}
		}
	}
	return nil
}

func (g *globals) awsProvider() (engine.Provider, error) {
	f := g.aws
	p := &awsprovider.Provider{
		Region: g.region, SearchRegions: g.regions, Profile: f.profile,
		InstanceType: f.instanceType, Nodes: f.nodes, KubernetesVersion: f.k8sVersion,
		Hooks: g.hooks,
	}
	kubeContext := f.kubeContext
	if kubeContext == "" {
		kubeContext = os.Getenv(awsprovider.KubeContextEnv)
	}
	if kubeContext != "" {
		// Injected so the aws provider does not import the kube provider.
		p.KubeOverride = func() (*rest.Config, kubernetes.Interface, error) {
			return kube.New(g.kubeconfig, kubeContext).Client(kubeContext)
		}
	}
	if g.discoveryTOSet {
		// Without the flag a region keeps its own default bound: its
		// inspection is several AWS calls plus the cluster's API.
		p.Timeout = g.discoveryTO
	}
	if f.create != nil {
		if err := awsprovider.CheckNodes(f.nodes, f.create.Changed("nodes")); err != nil {
			return nil, err
		}
	}
	if f.upgrading {
		c := awsprovider.Change{Nodes: f.upNodes, InstanceType: f.upInstanceType, KubernetesVersion: f.upK8sVersion}
		if err := setUpgradeChange(p, c, f.upgrade.Changed("nodes")); err != nil {
			return nil, err
		}
	}
	if f.upgrading && f.upgrade != nil {
		p.Access = accessFrom(f.upgrade, f.upAdmins, f.upViewers)
	} else if f.create != nil {
		p.Access = accessFrom(f.create, f.admins, f.viewers)
	}
	p.KubeconfigFile = strings.Join(clientcmd.NewDefaultPathOptions().GetLoadingPrecedence(), string(filepath.ListSeparator))
	if f.writeKubeconfig {
		p.WriteKubeconfig = p.KubeconfigFile
		if exe, err := os.Executable(); err == nil {
			p.KilnPath = exe
		}
	}
	if err := p.ValidateFlags(); err != nil {
		return nil, err
	}
	return p, nil
}

// setUpgradeChange sets what kiln upgrade aws asks of p's infrastructure
// — headless from --nodes, --instance-type and --kubernetes-version, in
// the wizard from the upgrade screen's EKS fields — and checks it with the
// provider's own rules (no AWS call): exit 2 naming the input. Unset keeps
// what runs (upgrade.go of the aws provider); nodesGiven says the node
// count was given, so 0 is refused rather than kept.
func setUpgradeChange(p *awsprovider.Provider, c awsprovider.Change, nodesGiven bool) error {
	p.Change = c
	if err := awsprovider.CheckNodes(c.Nodes, nodesGiven); err != nil {
		return err
	}
	return p.ValidateFlags()
}

func newAWSCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "aws",
		Short: "AWS helpers (the EKS exec credential)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newAWSTokenCmd(g))
	return cmd
}

func newAWSTokenCmd(g *globals) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:   "token --cluster NAME --region R",
		Short: "Print an EKS bearer token as a client.authentication.k8s.io ExecCredential",
		Long: `token produces the bearer token EKS accepts: an STS GetCallerIdentity request
presigned with your AWS credentials and bound to the cluster (the signed
x-k8s-aws-id header), as kubectl's exec credential plugins print it. The
kubeconfig entry written by 'kiln create aws NAME --write-kubeconfig' runs
this command; no static secret is stored. The token is printed only here,
on stdout, never in events or logs.`,
		Example: `  kiln aws token --cluster dev1 --region eu-west-1`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cluster == "" {
				return failure.BadInput("--cluster: required (the EKS cluster name)")
			}
			p := &awsprovider.Provider{Region: g.region, Profile: g.aws.profile}
			if err := p.ValidateFlags(); err != nil {
				return err
			}
			region, err := p.DefaultRegion()
			if err != nil {
				return err
			}
			if region == "" {
				return failure.BadInput("--region: required (no default region in the AWS configuration)")
			}
			cfg, err := p.AWSConfig(cmd.Context(), region)
			if err != nil {
				return err
			}
			tok, err := awsprovider.NewToken(cmd.Context(), cfg, cluster)
			if err != nil {
				return err
			}
			out, err := awsprovider.ExecCredential(tok)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(g.stdout, string(out))
			return err
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "EKS cluster name (the kiln cluster NAME)")
	return cmd
}
