package engine

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/platform"
)

// defaultClassAnnotation is the annotation that makes an IngressClass the
// cluster's default (networking/v1).
const defaultClassAnnotation = networkingv1.AnnotationIsDefaultIngressClass

// portForwardHint is how to reach the gateway without a front door, with
// kubectl as it reaches the cluster ("kubectl --context C").
func portForwardHint(kubectl string) string {
	return "`" + orDefault(kubectl, "kubectl") + " port-forward -n " + platform.Namespace + " svc/" + platform.GatewayName + " 8080:80`"
}

// frontDoorHints are the commands front door messages suggest, for the
// cluster at hand.
type frontDoorHints struct {
	// Kubectl is kubectl reaching the cluster ("kubectl --context C";
	// "" is plain kubectl: the aws provider's context is the user's).
	Kubectl string
	// Upgrade is kiln upgrade of the cluster ("" words it generically).
	Upgrade string
}

// hintsFor are the front door hints for cluster t at location.
func hintsFor(t Target, location string) frontDoorHints {
	h := frontDoorHints{Upgrade: command(t, location, "upgrade", "-c", "FILE")}
	if t.Provider != nil && t.Provider.Nouns().Target == InputContext && location != "" {
		h.Kubectl = "kubectl --context " + location
	}
	return h
}

// upgrade is the upgrade hint, in backquotes; without hints for a cluster,
// Command's words for any cluster (PROVIDER NAME).
func (h frontDoorHints) upgrade() string {
	if h.Upgrade == "" {
		h.Upgrade = Command(Target{Name: "NAME"}, "", []string{"upgrade"}, "-c", "FILE")
	}
	return "`" + h.Upgrade + "`"
}

// FrontDoor is the entry point of a cluster: how kiln-gateway is reached
// from outside, at which address, and the DNS record that sends the
// cluster's domain there. Derived from live objects every time.
type FrontDoor struct {
	// Mode is spec.gateway.expose as recorded ("" for a platform installed
	// before kiln chose one: a ClusterIP Service).
	Mode string `json:"mode"`
	// Address is where the front door answers: a load balancer's hostname
	// or IP, NODE-IP:NODEPORT, or the ingress controller's address; ""
	// while there is none.
	Address string `json:"address"`
	// DNS is the record the user creates, e.g. "*.dev1.example.test CNAME
	// lb.example.com" ("" when there is no address or no record to make).
	DNS string `json:"dns_record"`
	// Ready: the front door has an address.
	Ready bool `json:"ready"`
	// TLS says where TLS terminates.
	TLS string `json:"tls"`
	// Message says what is missing or how to reach the gateway.
	Message string `json:"message"`
}

// frontDoorFacts are the live objects a front door is derived from.
type frontDoorFacts struct {
	Mode, Domain, IngressClass, TLSSecret string
	// Hints are the commands messages suggest.
	Hints frontDoorHints
	// Service is kiln-gateway (nil: not found or not readable, ServiceErr).
	Service    *corev1.Service
	ServiceErr string
	// Nodes, for nodePort (NodesErr: why they could not be listed).
	Nodes    []corev1.Node
	NodesErr string
	// Classes and the route Ingresses of kiln-system, for ingress.
	Classes    []networkingv1.IngressClass
	ClassesErr string
	Ingresses  []networkingv1.Ingress
	IngressErr string
}

// frontDoorOf derives the front door from the facts; a pure function.
func frontDoorOf(f frontDoorFacts) FrontDoor {
	fd := FrontDoor{Mode: f.Mode}
	wildcard := "*." + f.Domain
	fd.TLS = "none: plain HTTP to the gateway"
	if f.TLSSecret != "" {
		fd.TLS = fmt.Sprintf("at the gateway, with Secret %s/%s", platform.Namespace, f.TLSSecret)
	}
	record := func(addr string) {
		host := addr
		if h, _, err := net.SplitHostPort(addr); err == nil {
			host = h
		}
		kind := "CNAME"
		if ip := net.ParseIP(host); ip != nil {
			kind = "A"
			if ip.To4() == nil {
				kind = "AAAA"
			}
		}
		fd.Address, fd.Ready = addr, true
		fd.DNS = fmt.Sprintf("%s %s %s", wildcard, kind, host)
	}
	svcMissing := func() bool {
		if f.Service != nil {
			return false
		}
		fd.Message = "Service " + platform.Namespace + "/" + platform.GatewayName + " " + orDefault(f.ServiceErr, "not found")
		return true
	}
	switch f.Mode {
	case config.ExposeNone, "":
		fd.Message = "no front door: reach the gateway with " + portForwardHint(f.Hints.Kubectl)
		if f.Mode == "" {
			fd.Message = "no front door recorded (installed before spec.gateway.expose): reach the gateway with " + portForwardHint(f.Hints.Kubectl) + ", or set spec.gateway.expose in the config and run " + f.Hints.upgrade()
		}
	case config.ExposeLoadBalancer:
		if svcMissing() {
			break
		}
		if f.TLSSecret == "" {
			fd.TLS = "at the load balancer if it terminates TLS; else none (plain HTTP to the gateway)"
		}
		if f.Service.Spec.Type != corev1.ServiceTypeLoadBalancer {
			fd.Message = fmt.Sprintf("Service %s/%s is type %s, not LoadBalancer (run %s to apply spec.gateway.expose)", platform.Namespace, platform.GatewayName, f.Service.Spec.Type, f.Hints.upgrade())
			break
		}
		if addr := lbAddress(f.Service.Status.LoadBalancer.Ingress); addr != "" {
			record(addr)
			fd.Message = fmt.Sprintf("load balancer of Service %s/%s", platform.Namespace, platform.GatewayName)
			break
		}
		fd.Message = fmt.Sprintf("no load-balancer address yet on Service %s/%s: the cluster's load-balancer controller publishes it; a cluster without one (no cloud controller manager, no MetalLB) never gives one", platform.Namespace, platform.GatewayName)
	case config.ExposeNodePort:
		if svcMissing() {
			break
		}
		var port int32
		for _, p := range f.Service.Spec.Ports {
			if p.NodePort != 0 {
				port = p.NodePort
				break
			}
		}
		if f.Service.Spec.Type != corev1.ServiceTypeNodePort || port == 0 {
			fd.Message = fmt.Sprintf("Service %s/%s is type %s without a node port (run %s to apply spec.gateway.expose)", platform.Namespace, platform.GatewayName, f.Service.Spec.Type, f.Hints.upgrade())
			break
		}
		ip := nodeIP(f.Nodes)
		if ip == "" {
			why := "no node has an InternalIP"
			if f.NodesErr != "" {
				why = "nodes: " + f.NodesErr
			}
			fd.Message = fmt.Sprintf("node port %d on every node; %s, so kiln cannot name the address", port, why)
			break
		}
		record(net.JoinHostPort(ip, fmt.Sprint(port)))
		fd.Message = fmt.Sprintf("node port %d on every node (address of one node's InternalIP; the DNS record cannot carry the port, so clients add :%d)", port, port)
	case config.ExposeIngress:
		if f.TLSSecret == "" {
			fd.TLS = "at the ingress controller if its Ingresses are given a certificate; else none (plain HTTP)"
		}
		class, why := ingressClass(f)
		if why != "" {
			fd.Message = why
			if class == "" {
				break
			}
		}
		if addr := ingressAddress(f.Ingresses); addr != "" {
			record(addr)
			fd.Message = strings.TrimPrefix(fd.Message+"; ", "; ") + fmt.Sprintf("ingress controller of class %s (address from the project routes' Ingress status)", class)
			break
		}
		switch {
		case f.IngressErr != "":
			fd.Message = strings.TrimPrefix(fd.Message+"; ", "; ") + "route Ingresses: " + f.IngressErr
		case len(f.Ingresses) == 0:
			fd.Message = strings.TrimPrefix(fd.Message+"; ", "; ") + fmt.Sprintf("no project route yet: the ingress controller of class %s publishes its address on the route Ingresses once a project runs", class)
		default:
			fd.Message = strings.TrimPrefix(fd.Message+"; ", "; ") + fmt.Sprintf("no address on the route Ingresses yet: is an ingress controller of class %s running?", class)
		}
	}
	return fd
}

// ingressClass names the class the routes use and says what is wrong
// with it ("" when nothing is).
func ingressClass(f frontDoorFacts) (class, problem string) {
	if f.ClassesErr != "" {
		c := f.IngressClass
		if c == "" {
			c = "(the cluster's default)"
		}
		return c, "IngressClasses: " + f.ClassesErr
	}
	if f.IngressClass != "" {
		for _, c := range f.Classes {
			if c.Name == f.IngressClass {
				return c.Name, ""
			}
		}
		return f.IngressClass, fmt.Sprintf("no IngressClass %s in the cluster (spec.gateway.ingressClassName): no ingress controller serves the routes", f.IngressClass)
	}
	if c := defaultClass(f.Classes); c != "" {
		return c, ""
	}
	return "", "no default IngressClass (annotation " + defaultClassAnnotation + `: "true") and no spec.gateway.ingressClassName: no ingress controller serves the routes`
}

func defaultClass(classes []networkingv1.IngressClass) string {
	var names []string
	for _, c := range classes {
		if c.Annotations[defaultClassAnnotation] == "true" {
			names = append(names, c.Name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

func lbAddress(ing []corev1.LoadBalancerIngress) string {
	for _, i := range ing {
		if i.Hostname != "" {
			return i.Hostname
		}
		if i.IP != "" {
			return i.IP
		}
	}
	return ""
}

func ingressAddress(ings []networkingv1.Ingress) string {
	sort.Slice(ings, func(i, j int) bool { return ings[i].Name < ings[j].Name })
	for _, ing := range ings {
		for _, i := range ing.Status.LoadBalancer.Ingress {
			if i.Hostname != "" {
				return i.Hostname
			}
			if i.IP != "" {
				return i.IP
			}
		}
	}
	return ""
}

// nodeIP is the InternalIP of the first Ready node by name (of any node
// when none is Ready).
func nodeIP(nodes []corev1.Node) string {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	pick := func(readyOnly bool) string {
		for _, n := range nodes {
			if readyOnly && !isNodeReady(n) {
				continue
			}
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP && a.Address != "" {
					return a.Address
				}
			}
		}
		return ""
	}
	if ip := pick(true); ip != "" {
		return ip
	}
	return pick(false)
}

func isNodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// readErr words a failed read for a status line: a permission problem
// says so; anything else is the error.
func readErr(verb, resource string, err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("not permitted to %s %s", verb, resource)
	}
	if apierrors.IsNotFound(err) {
		return "not found"
	}
	return fmt.Sprintf("%s %s: %v", verb, resource, err)
}

// readFrontDoor reads what the front door of cfg is derived from: only
// what its mode needs.
func readFrontDoor(ctx context.Context, cs kubernetes.Interface, cfg *config.ClusterConfig, hints frontDoorHints) FrontDoor {
	g := cfg.Spec.Gateway
	f := frontDoorFacts{Mode: g.Expose, Domain: cfg.Spec.Domain, IngressClass: g.IngressClassName, TLSSecret: g.TLSSecret(), Hints: hints}
	if f.Mode == config.ExposeNone || f.Mode == "" {
		return frontDoorOf(f)
	}
	svc, err := cs.CoreV1().Services(platform.Namespace).Get(ctx, platform.GatewayName, metav1.GetOptions{})
	if err != nil {
		f.ServiceErr = readErr("get", "services", err)
	} else {
		f.Service = svc
	}
	switch f.Mode {
	case config.ExposeNodePort:
		if nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			f.NodesErr = readErr("list", "nodes", err)
		} else {
			f.Nodes = nodes.Items
		}
	case config.ExposeIngress:
		if cl, err := cs.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{}); err != nil {
			f.ClassesErr = readErr("list", "ingressclasses", err)
		} else {
			f.Classes = cl.Items
		}
		if ings, err := cs.NetworkingV1().Ingresses(platform.Namespace).List(ctx, metav1.ListOptions{}); err != nil {
			f.IngressErr = readErr("list", "ingresses", err)
		} else {
			f.Ingresses = ings.Items
		}
	}
	return frontDoorOf(f)
}

// DefaultExposer is a provider that chooses the default front door
// (spec.gateway.expose when the config leaves it out) for the cluster it
// created or reaches; the reason is logged with the choice. A provider
// without it gets DefaultExposeFor's rule.
type DefaultExposer interface {
	DefaultExpose(ctx context.Context, cs kubernetes.Interface, cfg *config.ClusterConfig) (expose, reason string, err error)
}

// DefaultExposeFor is the rule for a cluster kiln did not create: ingress
// when an ingress controller will serve the routes (ingressClassName
// given, or a default IngressClass exists), otherwise nodePort, which
// works on any cluster with reachable nodes.
func DefaultExposeFor(ctx context.Context, cs kubernetes.Interface, cfg *config.ClusterConfig) (string, string, error) {
	if c := cfg.Spec.Gateway.IngressClassName; c != "" {
		return config.ExposeIngress, "spec.gateway.ingressClassName " + c + " is set", nil
	}
	cl, err := cs.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return config.ExposeNodePort, "kiln is not permitted to list IngressClasses, so it cannot tell whether an ingress controller serves the routes; set spec.gateway.expose to choose", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("list ingressclasses (to choose spec.gateway.expose; set it in the config file to skip this): %w", err)
	}
	if c := defaultClass(cl.Items); c != "" {
		return config.ExposeIngress, "IngressClass " + c + " is the cluster's default", nil
	}
	return config.ExposeNodePort, "the cluster has no default IngressClass", nil
}

// resolveExpose returns cfg with spec.gateway.expose decided (a copy when
// it changes): the file's value, else the provider's default, which is
// then recorded in kiln-config. It warns about an ingressClassName no
// IngressClass has and a TLS Secret that is missing or not of type
// kubernetes.io/tls.
func (e *Engine) resolveExpose(ctx context.Context, p Provider, cs kubernetes.Interface, cfg *config.ClusterConfig) (*config.ClusterConfig, error) {
	for _, w := range frontDoorWarnings(ctx, cs, cfg) {
		e.logf(LevelWarn, "%s", w)
	}
	if cfg.Spec.Gateway.Expose != "" {
		return cfg, nil
	}
	var expose, reason string
	var err error
	if d, ok := p.(DefaultExposer); ok {
		expose, reason, err = d.DefaultExpose(ctx, cs, cfg)
	} else {
		expose, reason, err = DefaultExposeFor(ctx, cs, cfg)
	}
	if err != nil {
		return nil, err
	}
	out := cfg.Clone()
	out.Spec.Gateway.Expose = expose
	e.logf(LevelInfo, "front door: spec.gateway.expose %s (%s); recorded in kiln-config", expose, reason)
	return out, nil
}

// waitLoadBalancer watches Service kiln-gateway until it has a
// load-balancer address, within ctx. A deadline is failure.Timeout naming what is
// missing.
func (e *Engine) waitLoadBalancer(ctx context.Context, cs kubernetes.Interface) error {
	e.logf(LevelInfo, "waiting for a load-balancer address on Service %s/%s (spec.gateway.expose loadBalancer): the cluster's load-balancer controller publishes it; on a cluster without one (no cloud controller manager, no MetalLB) it never comes",
		platform.Namespace, platform.GatewayName)
	sel := fields.OneTermEqualSelector("metadata.name", platform.GatewayName).String()
	for {
		list, err := cs.CoreV1().Services(platform.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return lbTimeout(ctx, err)
		}
		for _, s := range list.Items {
			if addr := lbAddress(s.Status.LoadBalancer.Ingress); addr != "" {
				return nil
			}
		}
		w, err := cs.CoreV1().Services(platform.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return lbTimeout(ctx, err)
		}
		done, err := func() (bool, error) {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return false, lbTimeout(ctx, ctx.Err())
				case ev, ok := <-w.ResultChan():
					if !ok {
						return false, nil // watch ended: list and watch again
					}
					if ev.Type == watch.Error {
						return false, nil
					}
					if s, ok := ev.Object.(*corev1.Service); ok && lbAddress(s.Status.LoadBalancer.Ingress) != "" {
						return true, nil
					}
				}
			}
		}()
		if done || err != nil {
			return err
		}
	}
}

func lbTimeout(ctx context.Context, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		return failure.Deadline("timed out waiting for a load-balancer address on Service %s/%s (spec.gateway.expose loadBalancer): no load-balancer controller has published one; install one (a cloud controller manager, MetalLB) or choose another spec.gateway.expose with kiln upgrade", platform.Namespace, platform.GatewayName)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("watch service %s/%s: %w", platform.Namespace, platform.GatewayName, err)
}

// frontDoorWarnings says what of cfg's front door the cluster lacks: an
// ingressClassName no IngressClass has, a TLS Secret that is missing or
// not of type kubernetes.io/tls. Create logs them; upgrade shows them with
// the plan.
func frontDoorWarnings(ctx context.Context, cs kubernetes.Interface, cfg *config.ClusterConfig) []string {
	var out []string
	warn := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if c := cfg.Spec.Gateway.IngressClassName; c != "" {
		_, err := cs.NetworkingV1().IngressClasses().Get(ctx, c, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			warn("spec.gateway.ingressClassName %s: the cluster has no IngressClass of that name, so no ingress controller will serve the project routes until one is installed", c)
		case err != nil:
			warn("spec.gateway.ingressClassName %s: cannot check it: %s", c, readErr("get", "ingressclasses", err))
		}
	}
	if name := cfg.Spec.Gateway.TLSSecret(); name != "" {
		sec, err := cs.CoreV1().Secrets(platform.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			warn("spec.gateway.tls.secretName %s: no such Secret in %s; the gateway's pods wait for it (kubectl create secret tls %s -n %s --cert FILE --key FILE)", name, platform.Namespace, name, platform.Namespace)
		case err != nil:
			warn("spec.gateway.tls.secretName %s: cannot check it: %s", name, readErr("get", "secrets", err))
		case sec.Type != corev1.SecretTypeTLS:
			warn("spec.gateway.tls.secretName %s: Secret %s/%s is of type %s, not %s; the gateway needs its keys %s and %s", name, platform.Namespace, name, sec.Type, corev1.SecretTypeTLS, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
		}
	}
	return out
}
