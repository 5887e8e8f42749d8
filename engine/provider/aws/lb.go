// Load balancers the cluster made: before node groups and the EKS cluster
// are deleted, while the cluster's Kubernetes API is served, destroy
// deletes every Service of type LoadBalancer and every Ingress, in all
// namespaces, and waits until they are gone. Their controllers (the cloud
// provider's service controller, the AWS Load Balancer Controller) hold a
// finalizer — service.kubernetes.io/load-balancer-cleanup,
// ingress.k8s.aws/resources, … — until the load balancer is deleted, so
// "gone through the Kubernetes API" means "its load balancer is gone" —
// and a load balancer left behind would keep network interfaces and
// security groups in kiln's VPC. An API that is not served (no EKS cluster
// yet or any more, one not ACTIVE, an endpoint that does not answer) is
// skipped with an event saying so.

package aws

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine"
)

// Kinds of the load-balancer step: the step (checkpoint
// before-aws-delete-loadbalancer) and the objects it deletes.
const (
	KindLoadBalancer = "LoadBalancer"
	KindService      = "Service"
	KindIngress      = "Ingress"
)

// LBWaitEnv overrides Limits.LoadBalancers (a Go duration, like 10m): how
// long destroy waits for the load balancers of the cluster's Services and
// Ingresses to be deleted.
const LBWaitEnv = "KILN_AWS_LB_WAIT"

// Limits.LoadBalancers bounds that wait: the AWS Load Balancer Controller
// and the service controller delete an NLB, CLB or ALB in one to two
// minutes. Limits.APIProbe bounds the first read of the cluster's API: one
// that does not answer in that time is taken as not served.

// lbObject is one Service of type LoadBalancer or Ingress.
type lbObject struct {
	kind, namespace, name string
	finalizers            []string
	deleting              bool
}

func (o lbObject) String() string {
	s := fmt.Sprintf("%s %s/%s", o.kind, o.namespace, o.name)
	if len(o.finalizers) > 0 {
		s += " (finalizers " + strings.Join(o.finalizers, ", ") + ")"
	}
	return s
}

func (in *infra) deleteLoadBalancers(ctx context.Context) error {
	n := in.name
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
	switch {
	case apiCode(err) == "ResourceNotFoundException":
		in.emit(KindLoadBalancer, n, engine.StatusNotFound, "skipped: no EKS cluster %s, so no Kubernetes API to ask for LoadBalancer Services and Ingresses", n)
		return nil
	case err != nil:
		return in.fail(KindLoadBalancer, n, fmt.Errorf("describe EKS cluster %s: %w", n, err))
	case out.Cluster.Tags[TagCluster] != in.name:
		in.emit(KindLoadBalancer, n, engine.StatusCurrent, "skipped: EKS cluster %s is not kiln's", n)
		return nil
	case out.Cluster.Status != ekstypes.ClusterStatusActive && out.Cluster.Status != ekstypes.ClusterStatusUpdating:
		in.emit(KindLoadBalancer, n, engine.StatusNotFound, "skipped: EKS cluster %s is %s, its Kubernetes API is not served", n, out.Cluster.Status)
		return nil
	}
	_, cs, err := in.p.kubeClient(ctx, in.cfg, out.Cluster)
	if err != nil {
		in.emit(KindLoadBalancer, n, engine.StatusNotFound, "skipped: cannot reach the Kubernetes API of EKS cluster %s: %v", n, err)
		logf(in.sink, engine.LevelWarn, "the Kubernetes API of %s is not reachable (%v): LoadBalancer Services and Ingresses were not deleted; a load balancer left behind shows in the VPC sweep", n, err)
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, in.p.limits().APIProbe)
	objs, err := listLBObjects(pctx, cs)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		in.emit(KindLoadBalancer, n, engine.StatusNotFound, "skipped: the Kubernetes API of EKS cluster %s does not answer: %v", n, err)
		logf(in.sink, engine.LevelWarn, "the Kubernetes API of %s does not answer (%v): LoadBalancer Services and Ingresses were not deleted; a load balancer left behind shows in the VPC sweep", n, err)
		return nil
	}
	if len(objs) == 0 {
		in.emit(KindLoadBalancer, n, engine.StatusNotFound, "no Service of type LoadBalancer and no Ingress in EKS cluster %s", n)
		return nil
	}
	for _, o := range objs {
		if o.deleting {
			continue
		}
		in.emit(o.kind, o.namespace+"/"+o.name, engine.StatusTerminating, "deleting, so that its load balancer is deleted before the cluster")
		if err := deleteLBObject(ctx, cs, o); err != nil {
			return in.fail(o.kind, o.namespace+"/"+o.name, err)
		}
	}
	limit := in.p.limits().LoadBalancers
	if d, err := time.ParseDuration(os.Getenv(LBWaitEnv)); err == nil && d > 0 {
		limit = d
	}
	var left []lbObject
	err = poll(ctx, limit, func(ctx context.Context) (bool, error) {
		objs, err := listLBObjects(ctx, cs)
		if err != nil {
			return false, err
		}
		for _, o := range left {
			if !slices.ContainsFunc(objs, func(x lbObject) bool { return x.kind == o.kind && x.namespace == o.namespace && x.name == o.name }) {
				in.emit(o.kind, o.namespace+"/"+o.name, engine.StatusNotFound, "deleted, with its load balancer")
			}
		}
		left = objs
		for _, o := range objs {
			in.emit(o.kind, o.namespace+"/"+o.name, engine.StatusTerminating, "waiting for its load balancer to be deleted (finalizers: %s)", strings.Join(o.finalizers, ", "))
		}
		return len(objs) == 0, nil
	})
	if len(left) > 0 && timedOut(ctx, err) {
		var names []string
		for _, o := range left {
			names = append(names, o.String())
		}
		err = fmt.Errorf("the load balancers of %s are not deleted after %s: still there: %s; their controller removes the finalizer once it has deleted the load balancer — check it runs (kubectl -n kube-system get pods), then run `%s` again (%s=DURATION waits longer)",
			n, limit, strings.Join(names, "; "), in.p.command("destroy", in.name, in.region), LBWaitEnv)
		return in.fail(left[0].kind, left[0].namespace+"/"+left[0].name, err)
	}
	if err != nil {
		return in.fail(KindLoadBalancer, n, err)
	}
	in.emit(KindLoadBalancer, n, engine.StatusNotFound, "every LoadBalancer Service and Ingress is gone")
	return nil
}

func listLBObjects(ctx context.Context, cs kubernetes.Interface) ([]lbObject, error) {
	var out []lbObject
	svcs, err := cs.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	for _, s := range svcs.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			out = append(out, lbObject{KindService, s.Namespace, s.Name, s.Finalizers, s.DeletionTimestamp != nil})
		}
	}
	ings, err := cs.NetworkingV1().Ingresses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Ingresses: %w", err)
	}
	for _, i := range ings.Items {
		out = append(out, lbObject{KindIngress, i.Namespace, i.Name, i.Finalizers, i.DeletionTimestamp != nil})
	}
	return out, nil
}

func deleteLBObject(ctx context.Context, cs kubernetes.Interface, o lbObject) error {
	var err error
	if o.kind == KindService {
		err = cs.CoreV1().Services(o.namespace).Delete(ctx, o.name, metav1.DeleteOptions{})
	} else {
		err = cs.NetworkingV1().Ingresses(o.namespace).Delete(ctx, o.name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s/%s: %w", o.kind, o.namespace, o.name, err)
	}
	return nil
}
