package awsemu

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// EKS access entries, which kumo v0.33.1 does not implement
// (CreateAccessEntry, DescribeAccessEntry, ListAccessEntries,
// UpdateAccessEntry, DeleteAccessEntry, AssociateAccessPolicy,
// ListAssociatedAccessPolicies, DisassociateAccessPolicy), emulated on the
// paths aws-sdk-go-v2 sends (the principal ARN is one path segment, its
// slashes escaped) with the rules the EKS API reference and user guide
// state:
//
//   - https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html:
//     principalArn is an IAM role or user ARN (an STS session principal
//     such as assumed-role is refused), one entry per principal (a second
//     is ResourceInUseException); kubernetesGroups only with type
//     STANDARD;
//   - https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html:
//     a Kubernetes group name cannot start with "system:"; access entries
//     need authentication mode API or API_AND_CONFIG_MAP (on a CONFIG_MAP
//     cluster: InvalidRequestException);
//   - https://docs.aws.amazon.com/eks/latest/APIReference/API_AssociateAccessPolicy.html
//     and API_AccessScope.html: policyArn is an EKS cluster access policy
//     (arn:PARTITION:eks::aws:cluster-access-policy/NAME), accessScope.type
//     is cluster or namespace, namespaces only (and required) with
//     namespace;
//   - an unknown cluster, entry or association is
//     ResourceNotFoundException.
//
// CreateCluster's accessConfig is checked against
// https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessConfigRequest.html
// (authenticationMode API | API_AND_CONFIG_MAP | CONFIG_MAP, default
// CONFIG_MAP; bootstrapClusterCreatorAdminPermissions default true), kumo
// records it, and DescribeCluster shows it with EKS's defaults filled in.
// A cluster created with bootstrapClusterCreatorAdminPermissions in a mode
// other than CONFIG_MAP gets the creator's entry ([CreatorARN], with
// AmazonEKSClusterAdminPolicy), as EKS makes it. Deleting the cluster
// deletes its entries.

// CreatorARN is the IAM identity the emulator takes as the creator of
// every cluster (the entry EKS bootstraps for it carries no tags).
const CreatorARN = "arn:aws:iam::123456789012:user/kiln-emulator"

// errInvalidRequest is EKS's code for a request the cluster's state refuses.
const errInvalidRequest = "InvalidRequestException"

// AccessRequest is one access-entry request the emulator received, for
// tests that check what a client sends against the API reference.
type AccessRequest struct {
	Op        string         // CreateAccessEntry, AssociateAccessPolicy, …
	Cluster   string         // the cluster name of the path
	Principal string         // the principal of the path ("" for create/list)
	Body      map[string]any // the JSON body (nil when none)
}

type accessPolicy struct {
	arn        string
	scope      map[string]any
	associated time.Time
}

type accessEntry struct {
	principal, typ, username string
	groups                   []string
	tags                     map[string]string
	created, modified        time.Time
	policies                 []*accessPolicy
}

type accessStore struct {
	mu      sync.Mutex
	entries map[string]map[string]*accessEntry // region/cluster -> principal -> entry
	// modes are the authentication modes of the clusters (region/cluster),
	// as created or changed by UpdateClusterConfig; absent: kumo's record.
	modes    map[string]string
	requests []AccessRequest
}

// AccessRequests returns the access-entry requests received so far.
func (e *Emulator) AccessRequests() []AccessRequest {
	e.access.mu.Lock()
	defer e.access.mu.Unlock()
	return slices.Clone(e.access.requests)
}

// AccessEntries returns the principals that have an access entry on the
// cluster, each with its Kubernetes groups and associated policy ARNs
// (for tests).
func (e *Emulator) AccessEntries(region, cluster string) map[string][]string {
	e.access.mu.Lock()
	defer e.access.mu.Unlock()
	out := map[string][]string{}
	for p, en := range e.access.entries[region+"/"+cluster] {
		v := slices.Clone(en.groups)
		for _, pol := range en.policies {
			v = append(v, pol.arn)
		}
		out[p] = v
	}
	return out
}

// principalRE is an IAM role or user ARN (arn:PARTITION:iam::ACCOUNT:role|user/[PATH/]NAME).
var principalRE = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:(role|user)/([\x21-\x7e]+/)?[\w+=,.@-]{1,64}$`)

var accessPolicyRE = regexp.MustCompile(`^arn:aws(-[a-z]+)*:eks::aws:cluster-access-policy/[A-Za-z0-9]+$`)

var authModes = []string{"API", "API_AND_CONFIG_MAP", "CONFIG_MAP"}

// checkAccessConfig says what EKS refuses in CreateCluster's accessConfig
// ("" when nothing).
func checkAccessConfig(body []byte) string {
	var req struct {
		AccessConfig *struct {
			AuthenticationMode *string `json:"authenticationMode"`
		} `json:"accessConfig"`
	}
	if json.Unmarshal(body, &req) != nil || req.AccessConfig == nil || req.AccessConfig.AuthenticationMode == nil {
		return ""
	}
	if m := *req.AccessConfig.AuthenticationMode; !slices.Contains(authModes, m) {
		return "Invalid authenticationMode " + m + "; valid values: " + strings.Join(authModes, ", ")
	}
	return ""
}

// bootstrapCreator records the creator's access entry of a cluster just
// created with body (CreateCluster), as EKS makes it.
func (e *Emulator) bootstrapCreator(region string, body []byte) {
	var req struct {
		Name         string `json:"name"`
		AccessConfig *struct {
			AuthenticationMode                      string `json:"authenticationMode"`
			BootstrapClusterCreatorAdminPermissions *bool  `json:"bootstrapClusterCreatorAdminPermissions"`
		} `json:"accessConfig"`
	}
	_ = json.Unmarshal(body, &req)
	e.access.mu.Lock()
	defer e.access.mu.Unlock()
	key := region + "/" + req.Name
	delete(e.access.entries, key)
	ac := req.AccessConfig
	e.access.modes[key] = "CONFIG_MAP"
	if ac != nil && ac.AuthenticationMode != "" {
		e.access.modes[key] = ac.AuthenticationMode
	}
	if ac == nil || ac.AuthenticationMode == "" || ac.AuthenticationMode == "CONFIG_MAP" || (ac.BootstrapClusterCreatorAdminPermissions != nil && !*ac.BootstrapClusterCreatorAdminPermissions) {
		return
	}
	now := time.Now()
	e.access.entries[key] = map[string]*accessEntry{CreatorARN: {
		principal: CreatorARN, typ: "STANDARD", username: CreatorARN, tags: map[string]string{}, created: now, modified: now,
		policies: []*accessPolicy{{arn: "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy", scope: map[string]any{"type": "cluster", "namespaces": []string{}}, associated: now}},
	}}
}

// overlayAccessConfig fills in EKS's defaults in DescribeCluster's
// accessConfig of cluster key (region/name), and the mode an
// UpdateClusterConfig set.
func (e *Emulator) overlayAccessConfig(key string, obj map[string]any) {
	ac, _ := obj["accessConfig"].(map[string]any)
	if ac == nil {
		ac = map[string]any{}
	}
	e.access.mu.Lock()
	mode := e.access.modes[key]
	e.access.mu.Unlock()
	if mode != "" {
		ac["authenticationMode"] = mode
	}
	if _, ok := ac["authenticationMode"]; !ok {
		ac["authenticationMode"] = "CONFIG_MAP"
	}
	if _, ok := ac["bootstrapClusterCreatorAdminPermissions"]; !ok {
		ac["bootstrapClusterCreatorAdminPermissions"] = true
	}
	obj["accessConfig"] = ac
}

// accessSegments splits r's escaped path into unescaped segments, so a
// principal ARN with slashes (escaped as %2F) stays one segment.
func accessSegments(r *http.Request) []string {
	raw := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	out := make([]string, len(raw))
	for i, s := range raw {
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
		out[i] = s
	}
	return out
}

// serveAccess answers the access-entry operations; false for other
// requests.
func (e *Emulator) serveAccess(w http.ResponseWriter, r *http.Request, b *backend, body []byte) bool {
	p := accessSegments(r)
	if len(p) < 3 || p[0] != "clusters" || p[2] != "access-entries" {
		return false
	}
	cluster := p[1]
	op := ""
	principal := ""
	if len(p) >= 4 {
		principal = p[3]
	}
	switch {
	case len(p) == 3 && r.Method == http.MethodPost:
		op = "CreateAccessEntry"
	case len(p) == 3 && r.Method == http.MethodGet:
		op = "ListAccessEntries"
	case len(p) == 4 && r.Method == http.MethodGet:
		op = "DescribeAccessEntry"
	case len(p) == 4 && r.Method == http.MethodPost:
		op = "UpdateAccessEntry"
	case len(p) == 4 && r.Method == http.MethodDelete:
		op = "DeleteAccessEntry"
	case len(p) == 5 && p[4] == "access-policies" && r.Method == http.MethodPost:
		op = "AssociateAccessPolicy"
	case len(p) == 5 && p[4] == "access-policies" && r.Method == http.MethodGet:
		op = "ListAssociatedAccessPolicies"
	case len(p) == 6 && p[4] == "access-policies" && r.Method == http.MethodDelete:
		op = "DisassociateAccessPolicy"
	default:
		return false
	}
	var doc map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &doc); err != nil {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "invalid request body")
			return true
		}
	}
	e.access.mu.Lock()
	e.access.requests = append(e.access.requests, AccessRequest{Op: op, Cluster: cluster, Principal: principal, Body: doc})
	e.access.mu.Unlock()

	cl, ok := e.currentCluster(w, r, b, b.region+"/"+cluster, cluster)
	if !ok {
		return true
	}
	e.eks.mu.Lock()
	e.eks.state(b.region + "/" + cluster) // a finished mode update counts
	e.eks.mu.Unlock()
	e.overlayAccessConfig(b.region+"/"+cluster, cl)
	if mode := str(cl["accessConfig"].(map[string]any), "authenticationMode"); mode == "CONFIG_MAP" {
		eksError(w, r, http.StatusBadRequest, errInvalidRequest, "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation.")
		return true
	}

	key := b.region + "/" + cluster
	e.access.mu.Lock()
	defer e.access.mu.Unlock()
	if e.access.entries[key] == nil {
		e.access.entries[key] = map[string]*accessEntry{}
	}
	entries := e.access.entries[key]
	if op == "CreateAccessEntry" {
		e.createAccessEntry(w, r, cluster, doc, entries)
		return true
	}
	if op == "ListAccessEntries" {
		var names []string
		for n, en := range entries {
			if pol := r.URL.Query().Get("associatedPolicyArn"); pol != "" && !slices.ContainsFunc(en.policies, func(p *accessPolicy) bool { return p.arn == pol }) {
				continue
			}
			names = append(names, n)
		}
		slices.Sort(names)
		writeJSONDoc(w, map[string]any{"accessEntries": names})
		return true
	}
	en := entries[principal]
	if en == nil {
		eksError(w, r, http.StatusNotFound, errResourceNotFound, "The specified principalArn could not be found. You can view your available access entries with 'list-access-entries'.")
		return true
	}
	switch op {
	case "DescribeAccessEntry":
		writeJSONDoc(w, map[string]any{"accessEntry": entryDoc(cluster, b.region, en)})
	case "UpdateAccessEntry":
		if raw, ok := doc["kubernetesGroups"]; ok {
			groups, msg := checkGroups(raw, en.typ)
			if msg != "" {
				eksError(w, r, http.StatusBadRequest, errInvalidParameter, "%s", msg)
				return true
			}
			en.groups = groups
		}
		if u, ok := doc["username"].(string); ok {
			en.username = u
		}
		en.modified = time.Now()
		writeJSONDoc(w, map[string]any{"accessEntry": entryDoc(cluster, b.region, en)})
	case "DeleteAccessEntry":
		delete(entries, principal)
		writeJSONDoc(w, map[string]any{})
	case "AssociateAccessPolicy":
		pol, _ := doc["policyArn"].(string)
		scope, _ := doc["accessScope"].(map[string]any)
		if !accessPolicyRE.MatchString(pol) {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "The specified policyArn %q is not a valid EKS access policy ARN.", pol)
			return true
		}
		if msg := checkScope(scope); msg != "" {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "%s", msg)
			return true
		}
		if _, ok := scope["namespaces"]; !ok {
			scope["namespaces"] = []string{}
		}
		now := time.Now()
		ap := &accessPolicy{arn: pol, scope: scope, associated: now}
		if i := slices.IndexFunc(en.policies, func(p *accessPolicy) bool { return p.arn == pol }); i >= 0 {
			ap.associated = en.policies[i].associated
			en.policies[i] = ap // a second association replaces the scope
		} else {
			en.policies = append(en.policies, ap)
		}
		writeJSONDoc(w, map[string]any{"clusterName": cluster, "principalArn": principal, "associatedAccessPolicy": policyDoc(ap)})
	case "ListAssociatedAccessPolicies":
		var out []any
		for _, ap := range en.policies {
			out = append(out, policyDoc(ap))
		}
		if out == nil {
			out = []any{}
		}
		writeJSONDoc(w, map[string]any{"clusterName": cluster, "principalArn": principal, "associatedAccessPolicies": out})
	case "DisassociateAccessPolicy":
		i := slices.IndexFunc(en.policies, func(ap *accessPolicy) bool { return ap.arn == p[5] })
		if i < 0 {
			eksError(w, r, http.StatusNotFound, errResourceNotFound, "The specified policy %s is not associated with principal %s.", p[5], principal)
			return true
		}
		en.policies = slices.Delete(en.policies, i, i+1)
		writeJSONDoc(w, map[string]any{})
	}
	return true
}

func (e *Emulator) createAccessEntry(w http.ResponseWriter, r *http.Request, cluster string, doc map[string]any, entries map[string]*accessEntry) {
	principal, _ := doc["principalArn"].(string)
	typ, _ := doc["type"].(string)
	if typ == "" {
		typ = "STANDARD"
	}
	switch {
	case strings.Contains(principal, ":sts::") || strings.Contains(principal, ":assumed-role/"):
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "The specified principalArn is invalid: STS session principals (%s) cannot be used with access entries; use the IAM role's ARN.", principal)
		return
	case !principalRE.MatchString(principal):
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "The specified principalArn is invalid: invalid ARN %q.", principal)
		return
	case !slices.Contains([]string{"STANDARD", "EC2", "EC2_LINUX", "EC2_WINDOWS", "FARGATE_LINUX", "HYBRID_LINUX"}, typ):
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "The access entry type %s is not valid.", typ)
		return
	case typ != "STANDARD" && !strings.Contains(principal, ":role/"):
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "An access entry of type %s needs an IAM role ARN.", typ)
		return
	}
	var groups []string
	if raw, ok := doc["kubernetesGroups"]; ok {
		var msg string
		if groups, msg = checkGroups(raw, typ); msg != "" {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "%s", msg)
			return
		}
	}
	if entries[principal] != nil {
		eksError(w, r, http.StatusConflict, errResourceInUse, "The specified access entry resource is already in use on this cluster.")
		return
	}
	tags := map[string]string{}
	if t, ok := doc["tags"].(map[string]any); ok {
		for k, v := range t {
			s, _ := v.(string)
			if strings.HasPrefix(strings.ToLower(k), "aws:") {
				eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Tag keys cannot start with aws: (%s).", k)
				return
			}
			tags[k] = s
		}
	}
	user, _ := doc["username"].(string)
	if user == "" {
		user = principal
	}
	now := time.Now()
	en := &accessEntry{principal: principal, typ: typ, username: user, groups: groups, tags: tags, created: now, modified: now}
	entries[principal] = en
	writeJSONDoc(w, map[string]any{"accessEntry": entryDoc(cluster, "", en)})
}

// checkGroups reads kubernetesGroups, refusing what EKS refuses.
func checkGroups(raw any, typ string) ([]string, string) {
	list, ok := raw.([]any)
	if !ok {
		return nil, "kubernetesGroups must be a list of strings."
	}
	if typ != "STANDARD" && len(list) > 0 {
		return nil, "kubernetesGroups can only be specified for access entries of type STANDARD."
	}
	var out []string
	for _, g := range list {
		s, _ := g.(string)
		switch {
		case s == "":
			return nil, "A Kubernetes group name cannot be empty."
		case strings.HasPrefix(s, "system:"):
			return nil, "The kubernetesGroups " + s + " is invalid: group names can't start with system:."
		}
		out = append(out, s)
	}
	return out, ""
}

// checkScope says what EKS refuses in an accessScope ("" when nothing).
func checkScope(scope map[string]any) string {
	if scope == nil {
		return "accessScope is required."
	}
	ns, _ := scope["namespaces"].([]any)
	switch scope["type"] {
	case "cluster":
		if len(ns) > 0 {
			return "namespaces can only be specified with accessScope type namespace."
		}
	case "namespace":
		if len(ns) == 0 {
			return "accessScope type namespace needs at least one namespace."
		}
	default:
		return "accessScope type must be cluster or namespace."
	}
	return ""
}

// nodeRoleEntry gives a node group's IAM role the EC2_LINUX access entry
// EKS makes for it on a cluster whose mode has access entries ("When you
// create a managed node group, Amazon EKS creates an access entry for the
// node IAM role", EKS user guide, access-entries.html); it carries no tag.
func (e *Emulator) nodeRoleEntry(key, role string) {
	e.access.mu.Lock()
	defer e.access.mu.Unlock()
	if m := e.access.modes[key]; m == "" || m == "CONFIG_MAP" || role == "" {
		return
	}
	if e.access.entries[key] == nil {
		e.access.entries[key] = map[string]*accessEntry{}
	}
	if e.access.entries[key][role] != nil {
		return
	}
	now := time.Now()
	e.access.entries[key][role] = &accessEntry{principal: role, typ: "EC2_LINUX", username: "system:node:{{EC2PrivateDNSName}}",
		groups: []string{}, tags: map[string]string{}, created: now, modified: now}
}

// authModeUpdates are the changes UpdateClusterConfig allows: never back
// to CONFIG_MAP, never from API
// (https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateAccessConfigRequest.html,
// user guide setting-up-access-entries.html: "You can't change back").
var authModeUpdates = map[string][]string{"CONFIG_MAP": {"API_AND_CONFIG_MAP", "API"}, "API_AND_CONFIG_MAP": {"API"}}

// updateAccessConfig is UpdateClusterConfig with accessConfig: POST
// /clusters/{name}/update-config. Other fields are refused (not emulated).
func (e *Emulator) updateAccessConfig(w http.ResponseWriter, r *http.Request, b *backend, body []byte, key, name string) {
	req, ok := onlyField(w, r, body, "UpdateClusterConfig", "accessConfig")
	if !ok {
		return
	}
	var ac struct {
		AuthenticationMode string `json:"authenticationMode"`
	}
	if raw, ok := req["accessConfig"]; !ok || json.Unmarshal(raw, &ac) != nil || ac.AuthenticationMode == "" {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "No changes needed: the request has no accessConfig.authenticationMode.")
		return
	}
	cl, ok := e.currentCluster(w, r, b, key, name)
	if !ok {
		return
	}
	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()
	c := e.eks.state(key) // settles first: a finished update counts
	if c.pending != nil {
		eksError(w, r, http.StatusConflict, errResourceInUse, "Cluster %s has an update in progress (%s); wait for it to finish.", name, c.pending.ID)
		return
	}
	e.overlayAccessConfig(key, cl)
	have := str(cl["accessConfig"].(map[string]any), "authenticationMode")
	if !slices.Contains(authModeUpdates[have], ac.AuthenticationMode) {
		eksError(w, r, http.StatusBadRequest, errInvalidParameter, "Unsupported authentication mode update from %s to %s", have, ac.AuthenticationMode)
		return
	}
	up := &eksUpdate{ID: newUpdateID(), Type: "AccessConfigUpdate", CreatedAt: time.Now(),
		Params: []eksUpdateParam{{Type: "AuthenticationMode", Value: ac.AuthenticationMode}}}
	up.apply = func() {
		e.access.mu.Lock()
		e.access.modes[key] = ac.AuthenticationMode
		e.access.mu.Unlock()
	}
	c.pending = up
	c.updates[up.ID] = up
	writeUpdate(w, up, "InProgress")
}

func entryDoc(cluster, region string, en *accessEntry) map[string]any {
	groups := en.groups
	if groups == nil {
		groups = []string{}
	}
	return map[string]any{
		"clusterName": cluster, "principalArn": en.principal, "kubernetesGroups": groups,
		"accessEntryArn": "arn:aws:eks:" + region + ":123456789012:access-entry/" + cluster + "/" + en.principal,
		"createdAt":      float64(en.created.Unix()), "modifiedAt": float64(en.modified.Unix()),
		"tags": en.tags, "username": en.username, "type": en.typ,
	}
}

func policyDoc(ap *accessPolicy) map[string]any {
	return map[string]any{"policyArn": ap.arn, "accessScope": ap.scope, "associatedAt": float64(ap.associated.Unix()), "modifiedAt": float64(ap.associated.Unix())}
}

func writeJSONDoc(w http.ResponseWriter, doc any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}
