package awsemu

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Injected faults: answers AWS gives that kumo never does.
//
//   - FailNext: the next N requests of one action answer an error code
//     (ThrottlingException, RequestLimitExceeded, an EC2 *.NotFound of
//     eventual consistency), then the action is served again. The SDK
//     retries ThrottlingException and RequestLimitExceeded as throttles
//     (aws/retry DefaultThrottleErrorCodes).
//   - SetNodegroupFault: a node group of a name ends CREATE_FAILED (when it
//     is created), DELETE_FAILED (when it is deleted: it stays), or is
//     DEGRADED (at once), each with the health issue given, as EKS reports
//     them (Nodegroup.status and NodegroupHealth.issues:
//     https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html,
//     https://docs.aws.amazon.com/eks/latest/APIReference/API_Issue.html).

type faultStore struct {
	mu   sync.Mutex
	next map[string]*nextFault // action -> fault
	ng   map[string]NodegroupFault
	// failed counts the answers given per action (tests check them).
	failed map[string]int
}

type nextFault struct {
	code string
	left int
}

// NodegroupFault is what a node group of one name does wrong.
type NodegroupFault struct {
	// Status is CREATE_FAILED, DELETE_FAILED or DEGRADED.
	Status string
	// Code and Message are its health issue (Issue.code, Issue.message),
	// like AsgInstanceLaunchFailures or Ec2SecurityGroupDeletionFailure.
	Code, Message string
}

func newFaultStore() *faultStore {
	return &faultStore{next: map[string]*nextFault{}, ng: map[string]NodegroupFault{}, failed: map[string]int{}}
}

// FailNext makes the next n requests of action (an EC2/IAM/STS Action
// like CreateTags, or an EKS operation like DescribeCluster), in any
// region, answer code with HTTP 400. n = 0 clears it.
func (e *Emulator) FailNext(action, code string, n int) {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	if n <= 0 {
		delete(e.faults.next, action)
		return
	}
	e.faults.next[action] = &nextFault{code: code, left: n}
}

// Failed returns how many injected errors action has answered so far.
func (e *Emulator) Failed(action string) int {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	return e.faults.failed[action]
}

// SetNodegroupFault makes every node group named nodegroup misbehave as f
// says (in every cluster and region); a zero f clears it. DEGRADED shows
// at once on existing groups; CREATE_FAILED applies to groups created
// from now on; DELETE_FAILED to the next DeleteNodegroup, which EKS
// accepts and then ends with the group still there.
func (e *Emulator) SetNodegroupFault(nodegroup string, f NodegroupFault) {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	if f.Status == "" {
		delete(e.faults.ng, nodegroup)
		return
	}
	e.faults.ng[nodegroup] = f
}

func (e *Emulator) nodegroupFault(name string) (NodegroupFault, bool) {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	f, ok := e.faults.ng[name]
	return f, ok
}

func (f NodegroupFault) issue(nodegroup string) map[string]any {
	return map[string]any{"code": f.Code, "message": f.Message, "resourceIds": []string{"eks-" + nodegroup + "-asg"}}
}

// injectFault answers r with an injected error if its action has one
// pending; false: r is served as usual.
func (e *Emulator) injectFault(w http.ResponseWriter, r *http.Request, service string, body []byte) bool {
	action := actionOf(r, service, body)
	if action == "" {
		return false
	}
	e.faults.mu.Lock()
	f := e.faults.next[action]
	if f == nil {
		e.faults.mu.Unlock()
		return false
	}
	f.left--
	if f.left <= 0 {
		delete(e.faults.next, action)
	}
	e.faults.failed[action]++
	code := f.code
	e.faults.mu.Unlock()
	writeAWSError(w, r, service, http.StatusBadRequest, code, fmt.Sprintf("awsemu: injected %s for %s", code, action))
	return true
}

// actionOf names the operation of r: the query protocol's Action, or the
// EKS operation of the REST path.
func actionOf(r *http.Request, service string, body []byte) string {
	if a := r.URL.Query().Get("Action"); a != "" {
		return a
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		if v, err := url.ParseQuery(string(body)); err == nil && v.Get("Action") != "" {
			return v.Get("Action")
		}
	}
	if service == eksSigningName {
		if rt, ok := matchEKS(r); ok {
			return rt.op
		}
		if strings.Trim(r.URL.Path, "/") == "clusters" && r.Method == http.MethodGet {
			return "ListClusters"
		}
		if p := strings.Split(strings.Trim(r.URL.Path, "/"), "/"); len(p) == 3 && p[0] == "clusters" && p[2] == "node-groups" && r.Method == http.MethodGet {
			return "ListNodegroups"
		}
	}
	return ""
}
