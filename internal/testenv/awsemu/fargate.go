package awsemu

// Fargate profiles, which kumo v0.33.1 does not implement, at the paths
// aws-sdk-go-v2 sends: CreateFargateProfile (POST
// /clusters/NAME/fargate-profiles), ListFargateProfiles (GET, same path),
// DescribeFargateProfile and DeleteFargateProfile (GET / DELETE
// /clusters/NAME/fargate-profiles/PROFILE). A profile is ACTIVE at once;
// deleted, it is DELETING for [fargateDeleting] and then gone, and EKS's
// rule "only one Fargate profile in a cluster can be in the DELETING
// status at a time" is kept (ResourceInUseException —
// https://docs.aws.amazon.com/eks/latest/APIReference/API_DeleteFargateProfile.html).
// DeleteCluster is refused with ResourceInUseException while the cluster
// has a profile (API_DeleteCluster.html: "If you have … Fargate profiles
// attached to the cluster, you must delete them first").

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

const fargateDeleting = 2 * time.Second

type fargateProfile struct {
	Name, Status, Arn string
	CreatedAt         time.Time
	Deleted           time.Time
	Doc               map[string]any
}

type fargateStore struct {
	mu       sync.Mutex
	profiles map[string]map[string]*fargateProfile // region/cluster -> name
}

// of is the profiles of key (region/cluster), without those whose
// deletion finished (the caller holds mu).
func (s *fargateStore) of(key string) map[string]*fargateProfile {
	if s.profiles == nil {
		s.profiles = map[string]map[string]*fargateProfile{}
	}
	m := s.profiles[key]
	if m == nil {
		m = map[string]*fargateProfile{}
		s.profiles[key] = m
	}
	for n, p := range m {
		if p.Status == "DELETING" && time.Since(p.Deleted) > fargateDeleting {
			delete(m, n)
		}
	}
	return m
}

func (e *Emulator) serveFargate(w http.ResponseWriter, r *http.Request, b *backend, body []byte) bool {
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(p) < 2 || p[0] != "clusters" {
		return false
	}
	cluster := p[1]
	key := b.region + "/" + cluster
	if len(p) == 2 && r.Method == http.MethodDelete {
		e.fargate.mu.Lock()
		n := len(e.fargate.of(key))
		e.fargate.mu.Unlock()
		if n > 0 {
			eksError(w, r, http.StatusConflict, errResourceInUse, "Cluster has fargate profiles attached")
			return true
		}
		return false
	}
	if len(p) < 3 || p[2] != "fargate-profiles" {
		return false
	}
	cl, ok := e.currentCluster(w, r, b, key, cluster)
	if !ok {
		return true
	}
	e.fargate.mu.Lock()
	defer e.fargate.mu.Unlock()
	m := e.fargate.of(key)
	answer := func(v any) bool {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
		return true
	}
	switch {
	case len(p) == 3 && r.Method == http.MethodPost:
		var doc map[string]any
		if json.Unmarshal(body, &doc) != nil {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "invalid request body")
			return true
		}
		name, _ := doc["fargateProfileName"].(string)
		if name == "" {
			eksError(w, r, http.StatusBadRequest, errInvalidParameter, "fargateProfileName is required")
			return true
		}
		if m[name] != nil {
			eksError(w, r, http.StatusConflict, errResourceInUse, "A Fargate Profile already exists with this name in this cluster.")
			return true
		}
		arn := strings.Replace(str(cl, "arn"), ":cluster/", ":fargateprofile/", 1) + "/" + name + "/" + newRequestID()[:8]
		m[name] = &fargateProfile{Name: name, Status: "ACTIVE", Arn: arn, CreatedAt: time.Now(), Doc: doc}
		return answer(map[string]any{"fargateProfile": m[name].json(cluster)})
	case len(p) == 3 && r.Method == http.MethodGet:
		names := []string{}
		for _, n := range sortedKeys(m) {
			names = append(names, n)
		}
		return answer(map[string]any{"fargateProfileNames": names})
	case len(p) == 4 && (r.Method == http.MethodGet || r.Method == http.MethodDelete):
		fp := m[p[3]]
		if fp == nil {
			eksError(w, r, http.StatusNotFound, errResourceNotFound, "No Fargate Profile found with name: %s.", p[3])
			return true
		}
		if r.Method == http.MethodDelete && fp.Status != "DELETING" {
			for _, o := range m {
				if o.Status == "DELETING" {
					eksError(w, r, http.StatusConflict, errResourceInUse, "Only one Fargate profile in a cluster can be in the DELETING status at a time: %s is being deleted.", o.Name)
					return true
				}
			}
			fp.Status, fp.Deleted = "DELETING", time.Now()
		}
		return answer(map[string]any{"fargateProfile": fp.json(cluster)})
	}
	return false
}

func (fp *fargateProfile) json(cluster string) map[string]any {
	out := map[string]any{}
	for k, v := range fp.Doc {
		if k != "clientRequestToken" {
			out[k] = v
		}
	}
	out["fargateProfileName"], out["fargateProfileArn"], out["clusterName"] = fp.Name, fp.Arn, cluster
	out["status"], out["createdAt"] = fp.Status, float64(fp.CreatedAt.Unix())
	return out
}
