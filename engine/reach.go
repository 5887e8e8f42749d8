package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/project"
)

// Reachability verdicts of a project through the gateway (DESIGN.md §2.7:
// a data-plane probe layered on the API readiness, never instead of it).
const (
	ReachYes        = "yes"
	ReachNo         = "no"
	ReachNotChecked = "not checked"
)

// Reach is whether a project answers through the gateway at its host.
type Reach struct {
	Ref     project.Ref
	Verdict string // ReachYes, ReachNo or ReachNotChecked
	// Why says what the gateway answered, or why nothing was asked.
	Why string
}

// String is the line shown: "reachable: yes (…)", "reachable: no (…)",
// "reachable: not checked (…)".
func (r Reach) String() string {
	if r.Why == "" {
		return "reachable: " + r.Verdict
	}
	return "reachable: " + r.Verdict + " (" + r.Why + ")"
}

// answer is one probe request's outcome: the HTTP status, or the error.
type answer struct {
	code int
	err  error
}

// judgeReach decides a project's reachability from the gateway's answers
// to GET / at the project's host, without a token (anon) and with the
// tenant's token (authed). The gateway must refuse the first (401),
// otherwise the second proves nothing; the second must be neither 401 nor
// 403, nor the gateway's own 503 (no endpoints) or 504 (no answer): any
// other status — the app's 2xx, 3xx or 404 — came from the project.
func judgeReach(anon, authed answer) (string, string) {
	switch {
	case anon.err != nil:
		return ReachNo, fmt.Sprintf("no answer from the gateway: %v", anon.err)
	case anon.code != http.StatusUnauthorized:
		return ReachNotChecked, fmt.Sprintf("the gateway answered a request without a token with HTTP %d, not 401, so it checks no token and an answer proves nothing", anon.code)
	case authed.err != nil:
		return ReachNo, fmt.Sprintf("no answer from the gateway with the tenant's token: %v", authed.err)
	case authed.code == http.StatusUnauthorized:
		return ReachNo, "the gateway refused the tenant's token (HTTP 401); its kiln-auth volume may not be updated yet"
	case authed.code == http.StatusForbidden:
		return ReachNo, "the gateway took the tenant's token for another tenant's (HTTP 403)"
	case authed.code == http.StatusServiceUnavailable:
		return ReachNo, "the gateway found no ready endpoint of the project (HTTP 503)"
	case authed.code == http.StatusBadGateway || authed.code == http.StatusGatewayTimeout:
		return ReachNo, fmt.Sprintf("the project did not answer the gateway (HTTP %d)", authed.code)
	}
	// A 404 is the app's answer as often as the gateway's (which route
	// it knows no project for): the route is there, the token accepted.
	return ReachYes, fmt.Sprintf("HTTP %d through the gateway with the tenant's token, 401 without", authed.code)
}

// The data plane trails the API: a Service whose endpoint the API calls
// ready may not be routed by kube-proxy yet, and a kiln-auth the API
// serves reaches the gateway's volume only at the kubelet's next sync
// (up to about a minute). A project that is not reachable is asked again
// every pace.every until pace.settle has passed since the first request;
// only then is "no" its verdict. A 403 (another tenant's token) is not
// asked again: time does not change it.
type reachPace struct{ settle, every time.Duration }

// defaultReachPace is the pace of every probe kiln runs (tests pass a
// shorter one to reachProjects).
func defaultReachPace() reachPace { return reachPace{settle: 30 * time.Second, every: time.Second} }

// reachProjects asks the gateway at base, for each project, GET / with
// Host P.T.DOMAIN: once without a token and once with the tenant's token
// from td, again while the answer may still change (pace). The token goes
// only in the Authorization header, never in a message.
func reachProjects(ctx context.Context, client *http.Client, pace reachPace, base, domain string, td *creds.TokenDir, refs []project.Ref) []Reach {
	get := func(host, token string) answer {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
		if err != nil {
			return answer{err: err}
		}
		req.Host = host
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return answer{err: err} // names the URL, which holds no token
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		return answer{code: resp.StatusCode}
	}
	out := make([]Reach, len(refs))
	var pending []int
	for i, r := range refs {
		out[i] = Reach{Ref: r}
		if _, ok := td.Tokens[r.Tenant]; !ok {
			out[i].Verdict, out[i].Why = ReachNotChecked, "no token of tenant "+r.Tenant+" in "+td.Path
			continue
		}
		pending = append(pending, i)
	}
	start := time.Now()
	for round := 1; len(pending) > 0; round++ {
		var again []int
		for _, i := range pending {
			r := refs[i]
			host := r.Project + "." + r.Tenant + "." + domain
			authed := answer{}
			anon := get(host, "")
			if anon.err == nil {
				authed = get(host, td.Tokens[r.Tenant])
			}
			v, why := judgeReach(anon, authed)
			out[i].Verdict, out[i].Why = v, why
			if v == ReachNo && authed.code != http.StatusForbidden {
				again = append(again, i)
			}
		}
		pending = again
		if len(pending) == 0 {
			break
		}
		if time.Since(start) >= pace.settle || ctx.Err() != nil {
			for _, i := range pending {
				out[i].Why += fmt.Sprintf("; the same after %s (%d tries)", time.Since(start).Round(time.Second), round)
			}
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(pace.every):
		}
	}
	return out
}

// reach probes refs through the gateway over a port-forward to a ready
// gateway pod and logs one line per project. It never fails the
// operation: what it cannot check is "not checked", saying why.
func (e *Engine) reach(ctx context.Context, loc Location, cluster, domain string, td *creds.TokenDir, refs []project.Ref) []Reach {
	if len(refs) == 0 {
		return nil
	}
	all := func(verdict, why string) []Reach {
		out := make([]Reach, len(refs))
		for i, r := range refs {
			out[i] = Reach{Ref: r, Verdict: verdict, Why: why}
		}
		return out
	}
	var out []Reach
	switch base, stop, why := e.gatewayForward(ctx, loc, cluster); {
	case td == nil:
		out = all(ReachNotChecked, "no local token dir with a key the cluster trusts")
	case why != "":
		out = all(ReachNotChecked, why)
	default:
		defer stop()
		out = reachProjects(ctx, &http.Client{Timeout: probeTimeout}, defaultReachPace(), base, domain, td, refs)
	}
	for _, r := range out {
		level := LevelInfo
		if r.Verdict != ReachYes {
			level = LevelWarn
		}
		e.logf(level, "project %s: %s", r.Ref, r)
	}
	return out
}

// gatewayForward opens a port-forward to a ready gateway pod, or says why
// it cannot ("" and a stop function when it did).
func (e *Engine) gatewayForward(ctx context.Context, loc Location, cluster string) (string, func(), string) {
	pod, err := gatewayPod(ctx, loc.Client, cluster)
	if err != nil {
		return "", nil, err.Error()
	}
	node, err := loc.Client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if apierrors.IsForbidden(err) {
		// The operator role has no nodes and no port-forward.
		return "", nil, fmt.Sprintf("not permitted to read node %s of gateway pod %s, so no port-forward was tried (the kiln-operator role grants neither nodes nor port-forward)", pod.Spec.NodeName, pod.Name)
	}
	if err != nil {
		return "", nil, fmt.Sprintf("get node %s of gateway pod %s: %v", pod.Spec.NodeName, pod.Name, err)
	}
	if node.Annotations[kwokNodeAnnotation] == kwokNodeFake {
		return "", nil, fmt.Sprintf("the gateway pod %s runs on node %s which serves no port-forward: a kwok fake node, where no container runs", pod.Name, node.Name)
	}
	if loc.REST == nil {
		return "", nil, "no REST config for a port-forward to the gateway"
	}
	base, stop, err := portForward(ctx, loc.REST, loc.Client, pod)
	if err != nil {
		return "", nil, strings.TrimPrefix(err.Error(), "probe: ")
	}
	return base, stop, ""
}
