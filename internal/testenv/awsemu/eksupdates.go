package awsemu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EKS day-2 operations that kumo v0.33.1 does not implement, emulated by
// the router (see the package doc, "EKS updates"). They keep their own
// per-region state and overlay it on kumo's DescribeCluster and
// DescribeNodegroup answers.

// DefaultUpdateDuration is how long an emulated EKS update stays
// InProgress (the cluster or node group UPDATING) before it succeeds.
const DefaultUpdateDuration = 2 * time.Second

// EKS error codes the emulated operations return, as EKS does.
const (
	errInvalidParameter = "InvalidParameterException"
	errResourceNotFound = "ResourceNotFoundException"
	errResourceInUse    = "ResourceInUseException"
)

// eksUpdate is one emulated update (the DescribeUpdate shape).
type eksUpdate struct {
	ID        string
	Type      string // VersionUpdate | ConfigUpdate
	Params    []eksUpdateParam
	CreatedAt time.Time
	Nodegroup string // "" for a cluster update

	// apply makes the update's change visible; run once, when it succeeds.
	apply func()
	done  bool
}

type eksUpdateParam struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// eksNodegroupState is what the emulation knows of a node group beyond
// kumo: its version and scaling config once changed.
type eksNodegroupState struct {
	version string
	scaling map[string]int // minSize, maxSize, desiredSize
	pending *eksUpdate
	// failed is the health issue of a node group that ended failStatus
	// (CREATE_FAILED: RefuseCapacity or SetNodegroupFault; DELETE_FAILED:
	// SetNodegroupFault).
	failed     map[string]any
	failStatus string
}

type eksClusterState struct {
	version    string
	pending    *eksUpdate
	nodegroups map[string]*eksNodegroupState
	updates    map[string]*eksUpdate
}

// eksUpdates is the emulation's state, per region and cluster.
type eksUpdates struct {
	mu       sync.Mutex
	duration time.Duration
	// noCapacity are instance types EC2 has no capacity for: a node
	// group created with one ends CREATE_FAILED (see RefuseCapacity).
	noCapacity map[string]bool
	clusters   map[string]*eksClusterState // key region/name
	writes     map[string]int              // per region
}

func newEKSUpdates() *eksUpdates {
	return &eksUpdates{duration: DefaultUpdateDuration, clusters: map[string]*eksClusterState{}, writes: map[string]int{}, noCapacity: map[string]bool{}}
}

// RefuseCapacity makes every node group created from now on with
// instanceType end CREATE_FAILED, as EKS reports a group whose
// Auto Scaling group cannot launch its instances: status CREATE_FAILED and
// a health issue AsgInstanceLaunchFailures naming the capacity shortage
// (https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html,
// API_NodegroupHealth.html, API_Issue.html). kumo creates every group
// ACTIVE. RefuseCapacity(t, false) gives the capacity back.
func (e *Emulator) RefuseCapacity(instanceType string, refuse bool) {
	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()
	e.eks.noCapacity[instanceType] = refuse
}

// SetUpdateDuration sets how long emulated EKS updates stay InProgress
// (the cluster or node group UPDATING), counted from each update's start:
// updates already running are judged by the new value too, so a test can
// hold them with a long duration and then finish them with 0.
func (e *Emulator) SetUpdateDuration(d time.Duration) {
	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()

	e.eks.duration = d
}

// Writes returns how many write requests (anything but a read) the
// router received for region: REST requests other than GET and HEAD,
// and query-protocol actions (EC2, IAM, STS) not named Describe*, List*
// or Get*. Tests compare it before and after a run that must write
// nothing.
func (e *Emulator) Writes(region string) int {
	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()

	return e.eks.writes[region]
}

// countWrite records r (whose body is body) as a write when it is one.
func (e *Emulator) countWrite(region string, r *http.Request, body []byte) {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	action := r.URL.Query().Get("Action")

	if action == "" && r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		if v, err := url.ParseQuery(string(body)); err == nil {
			action = v.Get("Action")
		}
	}

	if action != "" {
		write = !strings.HasPrefix(action, "Describe") && !strings.HasPrefix(action, "List") && !strings.HasPrefix(action, "Get")
	}

	if !write {
		return
	}

	e.eks.mu.Lock()
	e.eks.writes[region]++
	e.eks.mu.Unlock()
}

// eksRoute is an EKS request the router handles itself (fully or by
// patching kumo's answer).
type eksRoute struct {
	op                 string
	cluster, nodegroup string
	updateID           string
}

func matchEKS(r *http.Request) (eksRoute, bool) {
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(p) < 2 || p[0] != "clusters" {
		if r.Method == http.MethodPost && len(p) == 1 && p[0] == "clusters" {
			return eksRoute{op: "CreateCluster"}, true
		}

		return eksRoute{}, false
	}

	rt := eksRoute{cluster: p[1]}

	switch {
	case len(p) == 2 && r.Method == http.MethodGet:
		rt.op = "DescribeCluster"
	case len(p) == 2 && r.Method == http.MethodDelete:
		rt.op = "DeleteCluster"
	case len(p) == 3 && p[2] == "updates" && r.Method == http.MethodPost:
		rt.op = "UpdateClusterVersion"
	case len(p) == 3 && p[2] == "update-config" && r.Method == http.MethodPost:
		rt.op = "UpdateClusterConfig"
	case len(p) == 4 && p[2] == "updates" && r.Method == http.MethodGet:
		rt.op, rt.updateID, rt.nodegroup = "DescribeUpdate", p[3], r.URL.Query().Get("nodegroupName")
	case len(p) == 3 && p[2] == "node-groups" && r.Method == http.MethodPost:
		rt.op = "CreateNodegroup"
	case len(p) == 4 && p[2] == "node-groups" && r.Method == http.MethodGet:
		rt.op, rt.nodegroup = "DescribeNodegroup", p[3]
	case len(p) == 4 && p[2] == "node-groups" && r.Method == http.MethodDelete:
		rt.op, rt.nodegroup = "DeleteNodegroup", p[3]
	case len(p) == 5 && p[2] == "node-groups" && p[4] == "update-config" && r.Method == http.MethodPost:
		rt.op, rt.nodegroup = "UpdateNodegroupConfig", p[3]
	case len(p) == 5 && p[2] == "node-groups" && p[4] == "update-version" && r.Method == http.MethodPost:
		rt.op, rt.nodegroup = "UpdateNodegroupVersion", p[3]
	default:
		return eksRoute{}, false
	}

	return rt, true
}

// serveEKS handles the EKS requests the emulation is involved in; it
// returns false for the others (proxied to kumo unchanged).
func (e *Emulator) serveEKS(w http.ResponseWriter, r *http.Request, b *backend, body []byte) bool {
	rt, ok := matchEKS(r)
	if !ok {
		return false
	}

	key := b.region + "/" + rt.cluster

	switch rt.op {
	case "CreateCluster", "DeleteCluster":
		// EKS refuses to delete a cluster that still has node groups
		// (DeleteCluster: "If you have managed node groups … attached to
		// the cluster, you must delete them first", ResourceInUseException —
		// https://docs.aws.amazon.com/eks/latest/APIReference/API_DeleteCluster.html);
		// kumo deletes it anyway.
		if rt.op == "CreateCluster" && e.refuseUnsupportedZones(w, r, b, body) {
			return true
		}
		if rt.op == "CreateCluster" {
			if msg := checkAccessConfig(body); msg != "" {
				eksError(w, r, http.StatusBadRequest, errInvalidParameter, "%s", msg)

				return true
			}
		}
		if rt.op == "DeleteCluster" {
			names, err := e.nodegroupNames(r, b, rt.cluster)
			if err == nil && len(names) > 0 {
				eksError(w, r, http.StatusConflict, errResourceInUse, "Cluster has nodegroups attached")

				return true
			}
		}
		// A cluster created or deleted under this name starts afresh.
		status, _, _, err := e.relay(w, r, b, body)
		if err == nil && status == http.StatusOK {
			name := rt.cluster
			if rt.op == "CreateCluster" {
				var req struct {
					Name string `json:"name"`
				}
				_ = json.Unmarshal(body, &req)
				name = req.Name
			}

			e.eks.mu.Lock()
			delete(e.eks.clusters, b.region+"/"+name)
			e.eks.mu.Unlock()
			e.addons.mu.Lock()
			delete(e.addons.addons, b.region+"/"+name)
			e.addons.mu.Unlock()
			if rt.op == "CreateCluster" {
				e.bootstrapCreator(b.region, body)
			} else {
				e.access.mu.Lock()
				delete(e.access.entries, b.region+"/"+name)
				delete(e.access.modes, b.region+"/"+name)
				e.access.mu.Unlock()
			}
		}
	case "DeleteNodegroup":
		if f, ok := e.nodegroupFault(rt.nodegroup); ok && f.Status == "DELETE_FAILED" {
			e.deleteFails(w, r, b, key, rt, f)

			return true
		}
		status, _, _, err := e.relay(w, r, b, body)
		if err == nil && status == http.StatusOK {
			e.eks.mu.Lock()
			if c := e.eks.clusters[key]; c != nil {
				delete(c.nodegroups, rt.nodegroup)
			}
			e.eks.mu.Unlock()
		}
	case "CreateNodegroup":
		e.createNodegroup(w, r, b, body, key)
	case "DescribeCluster":
		e.describeCluster(w, r, b, key)
	case "DescribeNodegroup":
		e.describeNodegroup(w, r, b, key, rt.nodegroup)
	case "UpdateClusterVersion":
		e.updateClusterVersion(w, r, b, body, key, rt.cluster)
	case "UpdateClusterConfig":
		e.updateAccessConfig(w, r, b, body, key, rt.cluster)
	case "UpdateNodegroupVersion":
		e.updateNodegroupVersion(w, r, b, body, key, rt)
	case "UpdateNodegroupConfig":
		e.updateNodegroupConfig(w, r, b, body, key, rt)
	case "DescribeUpdate":
		e.describeUpdate(w, r, key, rt)
	}

	return true
}

// relay forwards r to kumo and copies the answer to w.
func (e *Emulator) relay(w http.ResponseWriter, r *http.Request, b *backend, body []byte) (int, http.Header, []byte, error) {
	status, h, out, err := e.kumo(r, b, r.Method, r.URL.Path, body)
	if err != nil {
		writeAWSError(w, r, "eks", http.StatusServiceUnavailable, ErrCodeServiceUnavailable, err.Error())

		return 0, nil, nil, err
	}

	copyAnswer(w, status, h, out)

	return status, h, out, nil
}

func copyAnswer(w http.ResponseWriter, status int, h http.Header, body []byte) {
	for k, v := range h {
		if strings.EqualFold(k, "Content-Length") {
			continue
		}

		w.Header()[k] = v
	}

	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// kumo sends one request to the region's kumo with r's headers (its SigV4
// scope selects the service there) and returns the answer.
func (e *Emulator) kumo(r *http.Request, b *backend, method, path string, body []byte) (int, http.Header, []byte, error) {
	out := r.Clone(r.Context())
	out.Method = method
	out.URL = &url.URL{Scheme: b.proc.url.Scheme, Host: b.proc.url.Host, Path: path}
	out.Host = r.Host
	out.RequestURI = ""
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))

	if len(body) == 0 {
		out.Body = http.NoBody
	}

	resp, err := e.tr.RoundTrip(out)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("awsemu: kumo for region %q unreachable: %w", b.region, err)
	}
	defer resp.Body.Close()

	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("awsemu: reading kumo's answer: %w", err)
	}

	return resp.StatusCode, resp.Header, data, nil
}

// settle finishes the updates of c whose time is up (the caller holds mu).
func (u *eksUpdates) settle(c *eksClusterState) {
	finish := func(up *eksUpdate) bool {
		if up == nil || time.Since(up.CreatedAt) < u.duration {
			return false
		}

		up.done = true
		if up.apply != nil {
			up.apply()
		}

		return true
	}

	if finish(c.pending) {
		c.pending = nil
	}

	for _, ng := range c.nodegroups {
		if finish(ng.pending) {
			ng.pending = nil
		}
	}
}

// state returns the state of cluster key, created empty (mu held).
func (u *eksUpdates) state(key string) *eksClusterState {
	c := u.clusters[key]
	if c == nil {
		c = &eksClusterState{nodegroups: map[string]*eksNodegroupState{}, updates: map[string]*eksUpdate{}}
		u.clusters[key] = c
	}

	u.settle(c)

	return c
}

func (c *eksClusterState) nodegroup(name string) *eksNodegroupState {
	ng := c.nodegroups[name]
	if ng == nil {
		ng = &eksNodegroupState{}
		c.nodegroups[name] = ng
	}

	return ng
}

// patchJSON decodes kumo's answer, lets fn change the object under key
// and writes it to w.
func patchJSON(w http.ResponseWriter, r *http.Request, status int, h http.Header, body []byte, key string, fn func(obj map[string]any)) {
	if status != http.StatusOK {
		copyAnswer(w, status, h, body)

		return
	}

	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		writeAWSError(w, r, "eks", http.StatusInternalServerError, "ServerException", "awsemu: kumo's answer is not JSON: "+err.Error())

		return
	}

	obj, ok := doc[key].(map[string]any)
	if ok {
		fn(obj)
	}

	out, _ := json.Marshal(doc)
	h = h.Clone()
	h.Set("Content-Type", "application/json")
	copyAnswer(w, status, h, out)
}

// describeCluster overlays the emulated version and status.
func (e *Emulator) describeCluster(w http.ResponseWriter, r *http.Request, b *backend, key string) {
	status, h, body, err := e.kumo(r, b, r.Method, r.URL.Path, nil)
	if err != nil {
		writeAWSError(w, r, "eks", http.StatusServiceUnavailable, ErrCodeServiceUnavailable, err.Error())

		return
	}

	patchJSON(w, r, status, h, body, "cluster", func(obj map[string]any) {
		e.eks.mu.Lock()
		defer e.eks.mu.Unlock()

		c := e.eks.state(key) // settles first: a finished update shows
		e.overlayAccessConfig(key, obj)

		if c.version != "" {
			obj["version"] = c.version
		}

		if c.pending != nil {
			obj["status"] = "UPDATING"
		}
	})
}

// describeNodegroup overlays the emulated version, scaling config and
// status.
func (e *Emulator) describeNodegroup(w http.ResponseWriter, r *http.Request, b *backend, key, name string) {
	status, h, body, err := e.kumo(r, b, r.Method, r.URL.Path, nil)
	if err != nil {
		writeAWSError(w, r, "eks", http.StatusServiceUnavailable, ErrCodeServiceUnavailable, err.Error())

		return
	}

	patchJSON(w, r, status, h, body, "nodegroup", func(obj map[string]any) {
		e.eks.mu.Lock()
		defer e.eks.mu.Unlock()

		overlayNodegroup(obj, e.eks.state(key).nodegroups[name])
		if f, ok := e.nodegroupFault(name); ok && f.Status == "DEGRADED" && obj["status"] == "ACTIVE" {
			obj["status"] = "DEGRADED"
			obj["health"] = map[string]any{"issues": []any{f.issue(name)}}
		}
	})
}

func overlayNodegroup(obj map[string]any, ng *eksNodegroupState) {
	if ng == nil {
		return
	}
	if ng.failStatus == "" && ng.failed != nil {
		ng.failStatus = "CREATE_FAILED"
	}

	if ng.version != "" {
		obj["version"] = ng.version
		obj["releaseVersion"] = ng.version + "-20231116"
	}

	if ng.scaling != nil {
		obj["scalingConfig"] = ng.scaling
	}

	if ng.pending != nil {
		obj["status"] = "UPDATING"
	}

	if ng.failed != nil {
		obj["status"] = ng.failStatus
		obj["health"] = map[string]any{"issues": []any{ng.failed}}
	}
}

// current reads a cluster as the emulation shows it: kumo's answer with
// the overlay (mu not held). found is false when kumo has no such cluster.
func (e *Emulator) current(r *http.Request, b *backend, key, path, field string) (map[string]any, bool, error) {
	status, _, body, err := e.kumo(r, b, http.MethodGet, path, nil)
	if err != nil {
		return nil, false, err
	}

	if status == http.StatusNotFound {
		return nil, false, nil
	}

	if status != http.StatusOK {
		return nil, false, fmt.Errorf("awsemu: kumo answered GET %s with %d: %s", path, status, body)
	}

	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, false, fmt.Errorf("awsemu: kumo's answer to GET %s is not JSON: %w", path, err)
	}

	obj, _ := doc[field].(map[string]any)

	return obj, obj != nil, nil
}

// nodegroupNames lists the node groups of a cluster in kumo.
func (e *Emulator) nodegroupNames(r *http.Request, b *backend, cluster string) ([]string, error) {
	status, _, body, err := e.kumo(r, b, http.MethodGet, "/clusters/"+cluster+"/node-groups", nil)
	if err != nil {
		return nil, err
	}

	if status != http.StatusOK {
		return nil, fmt.Errorf("awsemu: kumo answered ListNodegroups with %d: %s", status, body)
	}

	var out struct {
		Nodegroups []string `json:"nodegroups"`
	}

	if err := json.Unmarshal(body, &out); err != nil {
		return nil, err
	}

	return out.Nodegroups, nil
}

// minor parses "1.30" into 30 (ok false for anything else).
func minor(v string) (int, bool) {
	major, m, found := strings.Cut(v, ".")
	if !found || major != "1" {
		return 0, false
	}

	n, err := strconv.Atoi(m)

	return n, err == nil
}

func eksError(w http.ResponseWriter, r *http.Request, status int, code, format string, args ...any) {
	writeAWSError(w, r, "eks", status, code, fmt.Sprintf(format, args...))
}

func str(obj map[string]any, k string) string {
	s, _ := obj[k].(string)

	return s
}

// updateClusterVersion is UpdateClusterVersion: POST /clusters/{name}/updates.
// As EKS: one minor version at a time, never down; the cluster must be
// ACTIVE (no update under way) and every node group must run the
// cluster's version.
func (e *Emulator) updateClusterVersion(w http.ResponseWriter, r *http.Request, b *backend, body []byte, key, name string) {
	var req struct {
		Version string `json:"version"`
	}

	if err := json.Unmarshal(body, &req); err != nil || req.Version == "" {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "version is required")

		return
	}

	cl, ok := e.currentCluster(w, r, b, key, name)
	if !ok {
		return
	}

	ngNames, err := e.nodegroupNames(r, b, name)
	if err != nil {
		eksError(w, r, http.StatusServiceUnavailable, ErrCodeServiceUnavailable, "%v", err)

		return
	}

	ngVersions := map[string]string{}

	for _, n := range ngNames {
		ng, ok, err := e.current(r, b, key, "/clusters/"+name+"/node-groups/"+n, "nodegroup")
		if err != nil {
			eksError(w, r, http.StatusServiceUnavailable, ErrCodeServiceUnavailable, "%v", err)

			return
		}

		if ok {
			ngVersions[n] = str(ng, "version")
		}
	}

	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()

	c := e.eks.state(key)

	have := str(cl, "version")
	if c.version != "" {
		have = c.version
	}

	if c.pending != nil {
		eksError(w, r, http.StatusConflict, errResourceInUse, "Cluster %s has an update in progress (%s); wait for it to finish.", name, c.pending.ID)

		return
	}

	hm, okH := minor(have)
	wm, okW := minor(req.Version)

	if !okW {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Unsupported Kubernetes version %s.", req.Version)

		return
	}

	if !okH || wm != hm+1 {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Unsupported Kubernetes minor version update from %s to %s", have, req.Version)

		return
	}

	var behind []string

	for _, n := range slices.Sorted(maps.Keys(ngVersions)) {
		v := ngVersions[n]
		if ng := c.nodegroups[n]; ng != nil && ng.version != "" {
			v = ng.version
		}

		if v != have {
			behind = append(behind, n)
		}
	}

	if len(behind) > 0 {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Nodegroups %s must be updated to match cluster version %s before updating cluster version", strings.Join(behind, ", "), have)

		return
	}

	up := &eksUpdate{
		ID: newUpdateID(), Type: "VersionUpdate", CreatedAt: time.Now(),
		Params: []eksUpdateParam{{Type: "Version", Value: req.Version}, {Type: "PlatformVersion", Value: "eks.1"}},
	}
	up.apply = func() { c.version = req.Version }
	c.pending = up
	c.updates[up.ID] = up

	writeUpdate(w, up, "InProgress")
}

// updateNodegroupVersion is UpdateNodegroupVersion: POST
// /clusters/{name}/node-groups/{ng}/update-version. Without a version the
// node group goes to the cluster's version; a version newer than the
// cluster's, or older than the node group's, is refused as EKS does.
func (e *Emulator) updateNodegroupVersion(w http.ResponseWriter, r *http.Request, b *backend, body []byte, key string, rt eksRoute) {
	var req struct {
		Version        string          `json:"version"`
		ReleaseVersion string          `json:"releaseVersion"`
		LaunchTemplate json.RawMessage `json:"launchTemplate"`
	}

	if err := json.Unmarshal(body, &req); err != nil {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "invalid request body")

		return
	}

	if len(req.LaunchTemplate) > 0 && string(req.LaunchTemplate) != "null" {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "awsemu: launch templates are not emulated")

		return
	}

	cl, found, err := e.current(r, b, key, "/clusters/"+rt.cluster, "cluster")
	if err != nil {
		eksError(w, r, http.StatusServiceUnavailable, ErrCodeServiceUnavailable, "%v", err)

		return
	}

	if !found {
		eksError(w, r, http.StatusNotFound, errResourceNotFound, "No cluster found for name: %s.", rt.cluster)

		return
	}

	ng, ok := e.currentNodegroup(w, r, b, key, rt)
	if !ok {
		return
	}

	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()

	c := e.eks.state(key)
	st := c.nodegroup(rt.nodegroup)

	clusterVersion := str(cl, "version")
	if c.version != "" {
		clusterVersion = c.version
	}

	have := str(ng, "version")
	if st.version != "" {
		have = st.version
	}

	if refusePendingNodegroupUpdate(w, r, rt, st) {
		return
	}

	want := req.Version
	if want == "" {
		want = clusterVersion
	}

	wm, okW := minor(want)
	cm, _ := minor(clusterVersion)
	hm, _ := minor(have)

	switch {
	case !okW:
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Unsupported Kubernetes version %s.", want)

		return
	case wm > cm:
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Requested Nodegroup version %s is newer than the cluster version %s.", want, clusterVersion)

		return
	case wm < hm:
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Requested Nodegroup version %s is older than the current version %s; a node group cannot be rolled back.", want, have)

		return
	}

	up := &eksUpdate{
		ID: newUpdateID(), Type: "VersionUpdate", CreatedAt: time.Now(), Nodegroup: rt.nodegroup,
		Params: []eksUpdateParam{{Type: "Version", Value: want}, {Type: "ReleaseVersion", Value: want + "-20231116"}},
	}
	up.apply = func() { st.version = want }
	st.pending = up
	c.updates[up.ID] = up

	writeUpdate(w, up, "InProgress")
}

// currentNodegroup reads node group rt.nodegroup as kumo has it. When it
// cannot, it answers the request itself (503 when kumo does not answer, 404
// when the node group is not there) and reports false.
func (e *Emulator) currentNodegroup(w http.ResponseWriter, r *http.Request, b *backend, key string, rt eksRoute) (map[string]any, bool) {
	ng, found, err := e.current(r, b, key, "/clusters/"+rt.cluster+"/node-groups/"+rt.nodegroup, "nodegroup")
	if err != nil {
		eksError(w, r, http.StatusServiceUnavailable, ErrCodeServiceUnavailable, "%v", err)

		return nil, false
	}

	if !found {
		eksError(w, r, http.StatusNotFound, errResourceNotFound, "No node group found for name: %s.", rt.nodegroup)

		return nil, false
	}

	return ng, true
}

// refusePendingNodegroupUpdate answers 409 and reports true when the node
// group already has an update in progress: EKS runs one at a time.
func refusePendingNodegroupUpdate(w http.ResponseWriter, r *http.Request, rt eksRoute, st *eksNodegroupState) bool {
	if st.pending == nil {
		return false
	}

	eksError(w, r, http.StatusConflict, errResourceInUse, "Nodegroup %s has an update in progress (%s); wait for it to finish.", rt.nodegroup, st.pending.ID)

	return true
}

// updateNodegroupConfig is UpdateNodegroupConfig: POST
// /clusters/{name}/node-groups/{ng}/update-config. Only scalingConfig is
// emulated (labels, taints and the rest are refused, not ignored); the
// sizes are checked as EKS does.
func (e *Emulator) updateNodegroupConfig(w http.ResponseWriter, r *http.Request, b *backend, body []byte, key string, rt eksRoute) {
	req, ok := onlyField(w, r, body, "UpdateNodegroupConfig", "scalingConfig")
	if !ok {
		return
	}

	var sc struct {
		MinSize, MaxSize, DesiredSize *int
	}

	if raw, ok := req["scalingConfig"]; !ok || json.Unmarshal(raw, &sc) != nil {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "No changes needed: the request has no scalingConfig.")

		return
	}

	ng, ok := e.currentNodegroup(w, r, b, key, rt)
	if !ok {
		return
	}

	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()

	c := e.eks.state(key)
	st := c.nodegroup(rt.nodegroup)

	if refusePendingNodegroupUpdate(w, r, rt, st) {
		return
	}

	cur := st.scaling
	if cur == nil {
		cur = map[string]int{}

		if m, ok := ng["scalingConfig"].(map[string]any); ok {
			for k, v := range m {
				if f, ok := v.(float64); ok {
					cur[k] = int(f)
				}
			}
		}
	}

	next := map[string]int{"minSize": cur["minSize"], "maxSize": cur["maxSize"], "desiredSize": cur["desiredSize"]}

	var params []eksUpdateParam

	for k, v := range map[string]*int{"minSize": sc.MinSize, "maxSize": sc.MaxSize, "desiredSize": sc.DesiredSize} {
		if v != nil {
			next[k] = *v
			params = append(params, eksUpdateParam{Type: strings.ToUpper(k[:1]) + k[1:], Value: strconv.Itoa(*v)})
		}
	}

	slices.SortFunc(params, func(a, b eksUpdateParam) int { return strings.Compare(a.Type, b.Type) })

	switch {
	case next["minSize"] < 0 || next["desiredSize"] < 0:
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Sizes must be at least 0.")

		return
	case next["maxSize"] < 1:
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Maximum capacity %d must be at least 1.", next["maxSize"])

		return
	case next["minSize"] > next["maxSize"]:
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Minimum capacity %d can't be greater than maximum capacity %d.", next["minSize"], next["maxSize"])

		return
	case next["desiredSize"] > next["maxSize"]:
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Desired capacity %d can't be greater than max size %d.", next["desiredSize"], next["maxSize"])

		return
	case next["desiredSize"] < next["minSize"]:
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Desired capacity %d can't be less than min size %d.", next["desiredSize"], next["minSize"])

		return
	}

	up := &eksUpdate{ID: newUpdateID(), Type: "ConfigUpdate", CreatedAt: time.Now(), Nodegroup: rt.nodegroup, Params: params}
	up.apply = func() { st.scaling = next }
	st.pending = up
	c.updates[up.ID] = up

	writeUpdate(w, up, "InProgress")
}

// createNodegroup relays CreateNodegroup to kumo and records the new node
// group's version: the one asked for, else the cluster's (kumo takes its
// own record of the cluster's version, which the emulation may have
// changed). A version newer than the cluster's is refused, as EKS does.
func (e *Emulator) createNodegroup(w http.ResponseWriter, r *http.Request, b *backend, body []byte, key string) {
	var req struct {
		NodegroupName string   `json:"nodegroupName"`
		Version       string   `json:"version"`
		InstanceTypes []string `json:"instanceTypes"`
		NodeRole      string   `json:"nodeRole"`
	}

	_ = json.Unmarshal(body, &req)

	if msg := e.checkNodegroupLaunchTemplate(b.region, body); msg != "" {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "%s", msg)

		return
	}

	e.eks.mu.Lock()
	c := e.eks.state(key)
	clusterVersion := c.version
	e.eks.mu.Unlock()

	if req.Version != "" && clusterVersion != "" {
		wm, okW := minor(req.Version)
		cm, _ := minor(clusterVersion)

		if !okW || wm > cm {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Requested Nodegroup version %s is newer than the cluster version %s.", req.Version, clusterVersion)

			return
		}
	}

	status, _, _, err := e.relay(w, r, b, body)
	if err != nil || status != http.StatusOK {
		return
	}

	e.nodeRoleEntry(key, req.NodeRole)

	want := req.Version
	if want == "" {
		want = clusterVersion
	}

	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()

	st := &eksNodegroupState{version: want}
	for _, t := range req.InstanceTypes {
		if e.eks.noCapacity[t] {
			st.failed = map[string]any{
				"code":        "AsgInstanceLaunchFailures",
				"message":     fmt.Sprintf("Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient %s capacity in the Availability Zone you requested. Launching EC2 instance failed.", t),
				"resourceIds": []string{"eks-" + req.NodegroupName + "-asg"},
			}
		}
	}
	if f, ok := e.nodegroupFault(req.NodegroupName); ok && f.Status == "CREATE_FAILED" {
		st.failed, st.failStatus = f.issue(req.NodegroupName), f.Status
	}
	e.eks.state(key).nodegroups[req.NodegroupName] = st
}

// deleteFails answers DeleteNodegroup as EKS does for a group whose
// deletion then fails: accepted (the group DELETING), and the group stays,
// DELETE_FAILED with the fault's health issue.
func (e *Emulator) deleteFails(w http.ResponseWriter, r *http.Request, b *backend, key string, rt eksRoute, f NodegroupFault) {
	obj, found, err := e.current(r, b, key, "/clusters/"+rt.cluster+"/node-groups/"+rt.nodegroup, "nodegroup")
	switch {
	case err != nil:
		writeAWSError(w, r, "eks", http.StatusServiceUnavailable, ErrCodeServiceUnavailable, err.Error())

		return
	case !found:
		eksError(w, r, http.StatusNotFound, errResourceNotFound, "No node group found for name: %s.", rt.nodegroup)

		return
	}

	e.eks.mu.Lock()
	ng := e.eks.state(key).nodegroup(rt.nodegroup)
	ng.failed, ng.failStatus = f.issue(rt.nodegroup), f.Status
	e.eks.mu.Unlock()

	obj["status"] = "DELETING"
	out, _ := json.Marshal(map[string]any{"nodegroup": obj})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// describeUpdate is DescribeUpdate: GET /clusters/{name}/updates/{id}
// (?nodegroupName=NG for a node group's update).
func (e *Emulator) describeUpdate(w http.ResponseWriter, r *http.Request, key string, rt eksRoute) {
	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()

	c := e.eks.clusters[key]
	if c != nil {
		e.eks.settle(c)
	}

	var up *eksUpdate
	if c != nil {
		up = c.updates[rt.updateID]
	}

	if up == nil || up.Nodegroup != rt.nodegroup {
		eksError(w, r, http.StatusNotFound, errResourceNotFound, "No update found for ID: %s.", rt.updateID)

		return
	}

	status := "InProgress"
	if up.done {
		status = "Successful"
	}

	writeUpdate(w, up, status)
}

func writeUpdate(w http.ResponseWriter, up *eksUpdate, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{"update": map[string]any{
		"id": up.ID, "status": status, "type": up.Type, "params": up.Params,
		"createdAt": float64(up.CreatedAt.UnixMilli()) / 1000, "errors": []any{},
	}})
}

func newUpdateID() string {
	id := newRequestID()

	return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
}

// onlyField decodes an update request's body and refuses (400, answered)
// any field but field and clientRequestToken: what the emulator does not
// emulate is refused, never ignored.
func onlyField(w http.ResponseWriter, r *http.Request, body []byte, op, field string) (map[string]json.RawMessage, bool) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "invalid request body")
		return nil, false
	}
	for k := range req {
		if k != field && k != "clientRequestToken" {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "awsemu: %s emulates %s only, not %s", op, field, k)
			return nil, false
		}
	}
	return req, true
}

// currentCluster is cluster name as kumo describes it now, or false with
// EKS's answer written: 404 ResourceNotFound when there is none, 503 when
// kumo could not be asked.
func (e *Emulator) currentCluster(w http.ResponseWriter, r *http.Request, b *backend, key, name string) (map[string]any, bool) {
	cl, found, err := e.current(r, b, key, "/clusters/"+name, "cluster")
	if err != nil {
		eksError(w, r, http.StatusServiceUnavailable, ErrCodeServiceUnavailable, "%v", err)
		return nil, false
	}
	if !found {
		eksError(w, r, http.StatusNotFound, errResourceNotFound, "No cluster found for name: %s.", name)
		return nil, false
	}
	return cl, true
}
