package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Network isolation states (DESIGN.md §17): kiln never says enforced
// without evidence.
const (
	IsolationEnforced    = "enforced"
	IsolationNotEnforced = "not enforced"
	IsolationUnknown     = "unknown"
)

// Isolation is whether the NetworkPolicies kiln installs take effect: the
// state, the network plugin that is the evidence, and the reason.
type Isolation struct {
	State  string `json:"state"`
	Plugin string `json:"plugin"`
	Reason string `json:"reason"`
}

// networkPlugin is one network plugin kiln recognises by its DaemonSet.
type networkPlugin struct {
	name string
	// match recognises the plugin's DaemonSet.
	match func(ds appsv1.DaemonSet) bool
	// enforces says whether this DaemonSet enforces NetworkPolicy, and
	// why (the evidence shown).
	enforces func(ds appsv1.DaemonSet) (bool, string)
}

// dsNamed matches a DaemonSet by name or by its k8s-app /
// app.kubernetes.io/name / app label.
func dsNamed(names ...string) func(appsv1.DaemonSet) bool {
	return func(ds appsv1.DaemonSet) bool {
		for _, n := range names {
			if ds.Name == n || ds.Labels["k8s-app"] == n || ds.Labels["app.kubernetes.io/name"] == n || ds.Labels["app"] == n {
				return true
			}
		}
		return false
	}
}

func always(why string) func(appsv1.DaemonSet) (bool, string) {
	return func(appsv1.DaemonSet) (bool, string) { return true, why }
}

func never(why string) func(appsv1.DaemonSet) (bool, string) {
	return func(appsv1.DaemonSet) (bool, string) { return false, why }
}

// networkPlugins are the plugins kiln recognises, enforcing ones first.
var networkPlugins = []networkPlugin{
	{"calico", dsNamed("calico-node"), always("Calico enforces NetworkPolicy")},
	{"cilium", dsNamed("cilium"), always("Cilium enforces NetworkPolicy")},
	{"canal", dsNamed("canal"), always("Canal (Calico policy on flannel) enforces NetworkPolicy")},
	{"antrea", dsNamed("antrea-agent"), always("Antrea enforces NetworkPolicy")},
	{"kube-router", dsNamed("kube-router"), always("kube-router's network policy controller enforces NetworkPolicy")},
	{"weave-net", dsNamed("weave-net"), always("Weave Net's network policy controller enforces NetworkPolicy")},
	{"kube-network-policies", dsNamed("kube-network-policies"), always("kube-network-policies enforces NetworkPolicy")},
	{"aws-node", dsNamed("aws-node"), awsNodeEnforces},
	{"flannel", dsNamed("kube-flannel-ds", "flannel"), never("flannel alone does not enforce NetworkPolicy")},
	{"kindnet", dsNamed("kindnet"), kindnetEnforces},
}

// awsNodeEnforces: the VPC CNI enforces NetworkPolicy only with its
// network policy agent running with --enable-network-policy=true.
func awsNodeEnforces(ds appsv1.DaemonSet) (bool, string) {
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "aws-network-policy-agent" && c.Name != "aws-eks-nodeagent" {
			continue
		}
		if hasArg(c, "--enable-network-policy", "true") {
			return true, fmt.Sprintf("the VPC CNI's network policy agent (container %s) runs with --enable-network-policy=true", c.Name)
		}
		return false, fmt.Sprintf("the VPC CNI's network policy agent (container %s) runs without --enable-network-policy=true", c.Name)
	}
	return false, "the VPC CNI runs without its network policy agent"
}

// kindnetEnforces: kindnet enforces NetworkPolicy only where it runs its
// network policy controller (--network-policy=true).
func kindnetEnforces(ds appsv1.DaemonSet) (bool, string) {
	for _, c := range ds.Spec.Template.Spec.Containers {
		if hasArg(c, "--network-policy", "true") {
			return true, "kindnet runs with --network-policy=true"
		}
	}
	return false, "kindnet without its network policy controller does not enforce NetworkPolicy"
}

// hasArg says whether the container's command, args or env sets flag to
// value (--flag=value, "--flag value", or env ENABLE_NETWORK_POLICY style).
func hasArg(c corev1.Container, flag, value string) bool {
	args := append(append([]string{}, c.Command...), c.Args...)
	for i, a := range args {
		if a == flag+"="+value || (a == flag && i+1 < len(args) && args[i+1] == value) {
			return true
		}
	}
	env := strings.ToUpper(strings.ReplaceAll(strings.TrimLeft(flag, "-"), "-", "_"))
	for _, e := range c.Env {
		if e.Name == env && e.Value == value {
			return true
		}
	}
	return false
}

// DetectIsolation judges from the cluster's DaemonSets whether
// NetworkPolicy is enforced: a recognised enforcing plugin with ready pods
// is evidence of enforced; only recognised non-enforcing plugins is
// evidence of not enforced; anything else is unknown. A pure function.
func DetectIsolation(daemonSets []appsv1.DaemonSet) Isolation {
	sort.Slice(daemonSets, func(i, j int) bool {
		return daemonSets[i].Namespace+"/"+daemonSets[i].Name < daemonSets[j].Namespace+"/"+daemonSets[j].Name
	})
	var enforcing, idle, notEnforcing []string
	var enforcingWhy, notWhy []string
	for _, p := range networkPlugins {
		for _, ds := range daemonSets {
			if !p.match(ds) {
				continue
			}
			where := fmt.Sprintf("%s (DaemonSet %s/%s)", p.name, ds.Namespace, ds.Name)
			ok, why := p.enforces(ds)
			switch {
			case ok && ds.Status.NumberReady == 0:
				idle = append(idle, where)
			case ok:
				enforcing = append(enforcing, where)
				enforcingWhy = append(enforcingWhy, fmt.Sprintf("%s: %s, %d/%d pods ready", where, why, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled))
			default:
				notEnforcing = append(notEnforcing, where)
				notWhy = append(notWhy, fmt.Sprintf("%s: %s", where, why))
			}
			break
		}
	}
	switch {
	case len(enforcing) > 0:
		return Isolation{State: IsolationEnforced, Plugin: strings.Join(enforcing, ", "), Reason: strings.Join(enforcingWhy, "; ")}
	case len(idle) > 0:
		return Isolation{State: IsolationUnknown, Plugin: strings.Join(idle, ", "), Reason: "a NetworkPolicy-enforcing plugin is installed but none of its pods is ready: " + strings.Join(idle, ", ")}
	case len(notEnforcing) > 0:
		return Isolation{State: IsolationNotEnforced, Plugin: strings.Join(notEnforcing, ", "),
			Reason: strings.Join(notWhy, "; ") + "; kiln's NetworkPolicies are inert: any pod can reach tenant pods"}
	}
	return Isolation{State: IsolationUnknown, Reason: fmt.Sprintf("no recognised network plugin among the cluster's %d DaemonSets; kiln cannot establish that NetworkPolicies are enforced", len(daemonSets))}
}

// readIsolation lists the DaemonSets of every namespace and judges them.
func readIsolation(ctx context.Context, cs kubernetes.Interface) Isolation {
	list, err := cs.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Isolation{State: IsolationUnknown, Reason: readErr("list", "daemonsets", err) + ", so kiln cannot see the network plugin"}
	}
	return DetectIsolation(list.Items)
}

// String is the status line: "enforced: calico (...)".
func (i Isolation) String() string {
	return i.State + ": " + i.Reason
}
