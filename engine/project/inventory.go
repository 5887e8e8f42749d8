package project

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Inventory is what a cluster's tenants hold, from their spec ConfigMaps
// (one LIST per tenant namespace): for a question such as destroy's.
type Inventory struct {
	// Projects is how many projects there are.
	Projects int
	// Running are the projects whose desired state is running, as
	// TENANT/PROJECT, sorted.
	Running []string
}

// TakeInventory lists the projects of cluster in the namespaces of tenants.
// A spec kiln could not have written is counted, not named.
func TakeInventory(ctx context.Context, cs kubernetes.Interface, cluster string, tenants []string) (Inventory, error) {
	var inv Inventory
	for _, t := range tenants {
		ns := Ref{Tenant: t}.Namespace()
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelCluster + "=" + cluster + "," + LabelProject})
		if err != nil {
			return inv, fmt.Errorf("list project specs in %s: %w", ns, err)
		}
		for i := range list.Items {
			cm := &list.Items[i]
			if !strings.HasPrefix(cm.Name, specPrefix) {
				continue
			}
			inv.Projects++
			if s, err := decodeSpec(cm); err == nil && s.State == DesiredRunning {
				inv.Running = append(inv.Running, s.Tenant+"/"+s.Project)
			}
		}
	}
	sort.Strings(inv.Running)
	return inv, nil
}

// Summary words the inventory for a confirmation: "3 projects (2 meant to
// be running: default/a, default/b)", naming at most max running ones.
func (inv Inventory) Summary(max int) string {
	s := fmt.Sprintf("%d projects", inv.Projects)
	if inv.Projects == 1 {
		s = "1 project"
	}
	if n := len(inv.Running); n > 0 {
		names := inv.Running
		more := ""
		if len(names) > max {
			names, more = names[:max], fmt.Sprintf(" and %d more", n-max)
		}
		s += fmt.Sprintf(" (%d meant to be running: %s%s)", n, strings.Join(names, ", "), more)
	}
	return s
}
