package awsemu

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// EKS add-ons, which kumo v0.33.1 does not implement (CreateAddon,
// DescribeAddon, UpdateAddon, DescribeAddonVersions, ListAddons), emulated
// with the rules the EKS API reference states
// (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAddon.html,
// API_UpdateAddon.html, API_DescribeAddonVersions.html, API_Addon.html):
//
//   - the cluster must exist (ResourceNotFoundException);
//   - the add-on name must be one EKS offers, and addonVersion one that is
//     compatible with the cluster's Kubernetes version (else
//     InvalidParameterException);
//   - configurationValues must satisfy the add-on's configuration schema
//     (unknown keys or values are InvalidParameterException);
//   - a second CreateAddon of one add-on is ResourceInUseException, and
//     so is an UpdateAddon while the add-on is updating;
//   - an add-on is CREATING (UPDATING after an update) for a while, then
//     ACTIVE.
//
// Deleting the cluster deletes its add-ons.

// addonState is one emulated add-on.
type addonState struct {
	name, version, config string
	createdAt, modifiedAt time.Time
	busyUntil             time.Time
	status                string // CREATING or UPDATING until busyUntil, then ACTIVE
}

type addonStore struct {
	mu     sync.Mutex
	addons map[string]map[string]*addonState // region/cluster -> name -> add-on
}

// addonCatalog is what DescribeAddonVersions offers: per add-on, a version
// for each Kubernetes minor (the default one for that minor).
var addonCatalog = map[string]func(minor int) string{
	"vpc-cni":    func(m int) string { return fmt.Sprintf("v1.%d.0-eksbuild.1", m-11) },
	"kube-proxy": func(m int) string { return fmt.Sprintf("v1.%d.0-eksbuild.2", m) },
	"coredns":    func(m int) string { return fmt.Sprintf("v1.11.%d-eksbuild.3", m-26) },
}

// addonSchemas are the configurationValues keys each add-on accepts (a
// small part of the real schemas, with their allowed values; nil: any
// string).
var addonSchemas = map[string]map[string][]string{
	"vpc-cni":    {"enableNetworkPolicy": {"true", "false"}, "env": nil},
	"kube-proxy": {"mode": {"iptables", "ipvs"}},
	"coredns":    {"replicaCount": nil},
}

// AddonStatus reports an emulated add-on's version, configurationValues
// and status ("" when there is none), for tests.
func (e *Emulator) AddonStatus(region, cluster, name string) (version, config, status string) {
	e.addons.mu.Lock()
	defer e.addons.mu.Unlock()
	a := e.addons.addons[region+"/"+cluster][name]
	if a == nil {
		return "", "", ""
	}
	settleAddon(a)
	return a.version, a.config, a.status
}

func settleAddon(a *addonState) {
	if a.status != "ACTIVE" && !time.Now().Before(a.busyUntil) {
		a.status = "ACTIVE"
	}
}

// serveAddons answers the add-on operations; false for other requests.
func (e *Emulator) serveAddons(w http.ResponseWriter, r *http.Request, b *backend, body []byte) bool {
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(p) == 2 && p[0] == "addons" && p[1] == "supported-versions" && r.Method == http.MethodGet {
		e.describeAddonVersions(w, r)
		return true
	}
	if len(p) < 3 || p[0] != "clusters" || p[2] != "addons" {
		return false
	}
	cluster := p[1]
	version, found, err := e.clusterVersion(r, b, cluster)
	switch {
	case err != nil:
		writeAWSError(w, r, "eks", http.StatusServiceUnavailable, ErrCodeServiceUnavailable, err.Error())
		return true
	case !found:
		eksError(w, r, http.StatusNotFound, errResourceNotFound, "No cluster found for name: %s.", cluster)
		return true
	}
	key := b.region + "/" + cluster
	e.eks.mu.Lock()
	busy := e.eks.duration
	e.eks.mu.Unlock()
	e.addons.mu.Lock()
	defer e.addons.mu.Unlock()
	if e.addons.addons[key] == nil {
		e.addons.addons[key] = map[string]*addonState{}
	}
	addons := e.addons.addons[key]
	switch {
	case len(p) == 3 && r.Method == http.MethodPost:
		var req struct {
			AddonName, AddonVersion, ConfigurationValues string
		}
		_ = json.Unmarshal(body, &req)
		if msg := checkAddon(req.AddonName, req.AddonVersion, req.ConfigurationValues, version); msg != "" {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "%s", msg)
			return true
		}
		if addons[req.AddonName] != nil {
			eksError(w, r, http.StatusConflict, errResourceInUse, "Addon already exists.")
			return true
		}
		v := req.AddonVersion
		if v == "" {
			v = defaultAddonVersion(req.AddonName, version)
		}
		now := time.Now()
		a := &addonState{name: req.AddonName, version: v, config: req.ConfigurationValues, createdAt: now, modifiedAt: now, busyUntil: now.Add(busy), status: "CREATING"}
		addons[req.AddonName] = a
		writeAddon(w, cluster, a)
	case len(p) == 3 && r.Method == http.MethodGet:
		var names []string
		for n := range addons {
			names = append(names, n)
		}
		slices.Sort(names)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"addons": names})
	case len(p) == 4 && r.Method == http.MethodGet:
		a := addons[p[3]]
		if a == nil {
			eksError(w, r, http.StatusNotFound, errResourceNotFound, "No addon: %s found in cluster: %s", p[3], cluster)
			return true
		}
		settleAddon(a)
		writeAddon(w, cluster, a)
	case len(p) == 5 && p[4] == "update" && r.Method == http.MethodPost:
		a := addons[p[3]]
		if a == nil {
			eksError(w, r, http.StatusNotFound, errResourceNotFound, "No addon: %s found in cluster: %s", p[3], cluster)
			return true
		}
		settleAddon(a)
		if a.status != "ACTIVE" {
			eksError(w, r, http.StatusConflict, errResourceInUse, "Addon %s is in %s state; an update cannot start until it is ACTIVE.", a.name, a.status)
			return true
		}
		var req struct {
			AddonVersion        string
			ConfigurationValues *string
		}
		_ = json.Unmarshal(body, &req)
		cfg := a.config
		if req.ConfigurationValues != nil {
			cfg = *req.ConfigurationValues
		}
		v := a.version
		if req.AddonVersion != "" {
			v = req.AddonVersion
		}
		if msg := checkAddon(a.name, v, cfg, version); msg != "" {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "%s", msg)
			return true
		}
		now := time.Now()
		a.version, a.config, a.modifiedAt, a.busyUntil, a.status = v, cfg, now, now.Add(busy), "UPDATING"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"update": map[string]any{
			"id": newUpdateID(), "status": "InProgress", "type": "AddonUpdate", "createdAt": float64(now.Unix()),
			"params": []map[string]string{{"type": "AddonVersion", "value": v}},
		}})
	default:
		return false
	}
	return true
}

// clusterVersion is the Kubernetes version of cluster as the emulation
// shows it (kumo's, or an emulated update's).
func (e *Emulator) clusterVersion(r *http.Request, b *backend, cluster string) (string, bool, error) {
	obj, found, err := e.current(r, b, b.region+"/"+cluster, "/clusters/"+cluster, "cluster")
	if err != nil || !found {
		return "", found, err
	}
	v := str(obj, "version")
	e.eks.mu.Lock()
	if c := e.eks.clusters[b.region+"/"+cluster]; c != nil && c.version != "" {
		v = c.version
	}
	e.eks.mu.Unlock()
	return v, true, nil
}

func defaultAddonVersion(name, clusterVersion string) string {
	m, ok := minor(clusterVersion)
	f := addonCatalog[name]
	if !ok || f == nil {
		return ""
	}
	return f(m)
}

// checkAddon says what EKS would refuse in a request for add-on name at
// version with config on a cluster of clusterVersion ("" when nothing).
func checkAddon(name, version, config, clusterVersion string) string {
	if addonCatalog[name] == nil {
		return fmt.Sprintf("Addon %s specified is not supported in %s cluster version", name, clusterVersion)
	}
	if version != "" && version != defaultAddonVersion(name, clusterVersion) {
		return fmt.Sprintf("Addon version specified is not supported: %s is not compatible with Kubernetes %s (compatible: %s)", version, clusterVersion, defaultAddonVersion(name, clusterVersion))
	}
	if config == "" {
		return ""
	}
	var values map[string]any
	if err := json.Unmarshal([]byte(config), &values); err != nil {
		return "ConfigurationValue provided in request is not supported: Json schema validation failed with error: not a JSON object"
	}
	schema := addonSchemas[name]
	for k, v := range values {
		allowed, known := schema[k]
		if !known {
			return fmt.Sprintf("ConfigurationValue provided in request is not supported: Json schema validation failed with error: [$.%s: is not defined in the schema and the schema does not allow additional properties]", k)
		}
		if s, isString := v.(string); allowed != nil && (!isString || !slices.Contains(allowed, s)) {
			return fmt.Sprintf("ConfigurationValue provided in request is not supported: Json schema validation failed with error: [$.%s: does not have a value in the enumeration %v]", k, allowed)
		}
	}
	return ""
}

func writeAddon(w http.ResponseWriter, cluster string, a *addonState) {
	w.Header().Set("Content-Type", "application/json")
	out := map[string]any{
		"addonName": a.name, "addonVersion": a.version, "clusterName": cluster, "status": a.status,
		"createdAt": float64(a.createdAt.Unix()), "modifiedAt": float64(a.modifiedAt.Unix()),
		"health": map[string]any{"issues": []any{}},
	}
	if a.config != "" {
		out["configurationValues"] = a.config
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"addon": out})
}

// describeAddonVersions answers GET /addons/supported-versions.
func (e *Emulator) describeAddonVersions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	names := []string{q.Get("addonName")}
	if names[0] == "" {
		names = []string{"coredns", "kube-proxy", "vpc-cni"}
	}
	kv := q.Get("kubernetesVersion")
	var out []any
	for _, n := range names {
		if addonCatalog[n] == nil {
			continue
		}
		var versions []any
		for m := 28; m <= 40; m++ {
			cv := fmt.Sprintf("1.%d", m)
			if kv != "" && kv != cv {
				continue
			}
			versions = append(versions, map[string]any{
				"addonVersion":    addonCatalog[n](m),
				"compatibilities": []any{map[string]any{"clusterVersion": cv, "defaultVersion": true}},
			})
		}
		out = append(out, map[string]any{"addonName": n, "type": "networking", "owner": "aws", "publisher": "eks", "addonVersions": versions})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"addons": out})
}
