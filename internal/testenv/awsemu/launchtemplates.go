package awsemu

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EC2 launch templates, which kumo v0.33.1 does not implement
// (CreateLaunchTemplate, DescribeLaunchTemplates, DeleteLaunchTemplate),
// emulated with the EC2 API reference's rules:
//
//   - CreateLaunchTemplate: LaunchTemplateName 3–128 characters of
//     [a-zA-Z0-9().\-/_], unique in the region
//     (InvalidLaunchTemplateName.AlreadyExistsException);
//     MetadataOptions.HttpTokens optional|required, HttpEndpoint
//     enabled|disabled, HttpPutResponseHopLimit 1–64
//     (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateLaunchTemplate.html,
//     https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateInstanceMetadataOptionsRequest.html).
//   - DescribeLaunchTemplates: by LaunchTemplateId.N, LaunchTemplateName.N
//     or Filter tag:KEY / launch-template-name; an unknown id is
//     InvalidLaunchTemplateId.NotFound, an unknown name
//     InvalidLaunchTemplateName.NotFoundException.
//   - DeleteLaunchTemplate: by id or name; unknown is the same NotFound.
//
// EKS's CreateNodegroup refuses a launchTemplate that does not exist, and,
// with one, a request that sets diskSize or remoteAccess ("If you specify
// launchTemplate, then don't specify diskSize/remoteAccess, or the node
// group deployment will fail":
// https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html).

// LaunchTemplate is one emulated launch template (version 1 only).
type LaunchTemplate struct {
	ID, Name string
	Tags     map[string]string
	// Data is the LaunchTemplateData of the request, as its query
	// parameters without the "LaunchTemplateData." prefix
	// (MetadataOptions.HttpTokens=required, …).
	Data    map[string]string
	Created time.Time
}

type ltStore struct {
	mu       sync.Mutex
	byRegion map[string]map[string]*LaunchTemplate // region -> id -> template
}

// LaunchTemplates returns the launch templates of region (tests read what
// kiln asked for).
func (e *Emulator) LaunchTemplates(region string) []LaunchTemplate {
	e.lt.mu.Lock()
	defer e.lt.mu.Unlock()
	var out []LaunchTemplate
	for _, t := range e.lt.byRegion[region] {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b LaunchTemplate) int { return strings.Compare(a.ID, b.ID) })
	return out
}

var ltNameRE = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

type ltXML struct {
	ID      string   `xml:"launchTemplateId"`
	Name    string   `xml:"launchTemplateName"`
	Created string   `xml:"createTime"`
	By      string   `xml:"createdBy"`
	Default int      `xml:"defaultVersionNumber"`
	Latest  int      `xml:"latestVersionNumber"`
	Tags    []tagXML `xml:"tagSet>item"`
}

type tagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func (t *LaunchTemplate) xml() ltXML {
	x := ltXML{ID: t.ID, Name: t.Name, Created: t.Created.UTC().Format(time.RFC3339), By: "arn:aws:iam::000000000000:root", Default: 1, Latest: 1}
	for k, v := range t.Tags {
		x.Tags = append(x.Tags, tagXML{k, v})
	}
	slices.SortFunc(x.Tags, func(a, b tagXML) int { return strings.Compare(a.Key, b.Key) })
	return x
}

// serveLaunchTemplates answers the launch-template actions; false: not one.
func (e *Emulator) serveLaunchTemplates(w http.ResponseWriter, r *http.Request, b *backend, body []byte) bool {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return false
	}
	fail := func(code, format string, args ...any) bool {
		writeAWSError(w, r, "ec2", http.StatusBadRequest, code, fmt.Sprintf(format, args...))
		return true
	}
	switch form.Get("Action") {
	case "CreateLaunchTemplate":
		name := form.Get("LaunchTemplateName")
		if !ltNameRE.MatchString(name) {
			return fail("InvalidParameterValue", "launch template name %q: 3 to 128 characters of a-z A-Z 0-9 ( ) . - / _", name)
		}
		data := map[string]string{}
		for k := range form {
			if rest, ok := strings.CutPrefix(k, "LaunchTemplateData."); ok {
				data[rest] = form.Get(k)
			}
		}
		if v := data["MetadataOptions.HttpTokens"]; v != "" && v != "optional" && v != "required" {
			return fail("InvalidParameterValue", "MetadataOptions.HttpTokens %q: optional or required", v)
		}
		if v := data["MetadataOptions.HttpEndpoint"]; v != "" && v != "enabled" && v != "disabled" {
			return fail("InvalidParameterValue", "MetadataOptions.HttpEndpoint %q: enabled or disabled", v)
		}
		if v := data["MetadataOptions.HttpPutResponseHopLimit"]; v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 64 {
				return fail("InvalidParameterValue", "MetadataOptions.HttpPutResponseHopLimit %q: 1 to 64", v)
			}
		}
		tags := map[string]string{}
		for i := 1; form.Has(fmt.Sprintf("TagSpecification.%d.ResourceType", i)); i++ {
			if rt := form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i)); rt != "launch-template" {
				return fail("InvalidParameterValue", "TagSpecification.%d.ResourceType %q: CreateLaunchTemplate tags a launch-template", i, rt)
			}
			for j := 1; form.Has(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j)); j++ {
				tags[form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j))] = form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Value", i, j))
			}
		}
		e.lt.mu.Lock()
		defer e.lt.mu.Unlock()
		reg := e.lt.byRegion[b.region]
		if reg == nil {
			reg = map[string]*LaunchTemplate{}
			e.lt.byRegion[b.region] = reg
		}
		for _, t := range reg {
			if t.Name == name {
				return fail("InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
			}
		}
		var id [9]byte
		_, _ = rand.Read(id[:])
		t := &LaunchTemplate{ID: "lt-" + hex.EncodeToString(id[:])[:17], Name: name, Tags: tags, Data: data, Created: time.Now()}
		reg[t.ID] = t
		writeXML(w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"CreateLaunchTemplateResponse"`
			RequestID string   `xml:"requestId"`
			LT        ltXML    `xml:"launchTemplate"`
		}{RequestID: newRequestID(), LT: t.xml()})
		return true
	case "DescribeLaunchTemplates":
		e.lt.mu.Lock()
		defer e.lt.mu.Unlock()
		reg := e.lt.byRegion[b.region]
		var ids, names []string
		for i := 1; form.Has(fmt.Sprintf("LaunchTemplateId.%d", i)); i++ {
			ids = append(ids, form.Get(fmt.Sprintf("LaunchTemplateId.%d", i)))
		}
		for i := 1; form.Has(fmt.Sprintf("LaunchTemplateName.%d", i)); i++ {
			names = append(names, form.Get(fmt.Sprintf("LaunchTemplateName.%d", i)))
		}
		for _, id := range ids {
			if reg[id] == nil {
				return fail("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
			}
		}
		for _, n := range names {
			if !slices.ContainsFunc(mapValues(reg), func(t *LaunchTemplate) bool { return t.Name == n }) {
				return fail("InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
			}
		}
		var items []ltXML
		for _, t := range mapValues(reg) {
			if len(ids) > 0 && !slices.Contains(ids, t.ID) || len(names) > 0 && !slices.Contains(names, t.Name) || !ltMatches(form, t) {
				continue
			}
			items = append(items, t.xml())
		}
		slices.SortFunc(items, func(a, b ltXML) int { return strings.Compare(a.ID, b.ID) })
		writeXML(w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"DescribeLaunchTemplatesResponse"`
			RequestID string   `xml:"requestId"`
			Items     []ltXML  `xml:"launchTemplates>item"`
		}{RequestID: newRequestID(), Items: items})
		return true
	case "DeleteLaunchTemplate":
		e.lt.mu.Lock()
		defer e.lt.mu.Unlock()
		reg := e.lt.byRegion[b.region]
		var t *LaunchTemplate
		if id := form.Get("LaunchTemplateId"); id != "" {
			t = reg[id]
			if t == nil {
				return fail("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
			}
		} else {
			for _, c := range reg {
				if c.Name == form.Get("LaunchTemplateName") {
					t = c
				}
			}
			if t == nil {
				return fail("InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
			}
		}
		delete(reg, t.ID)
		writeXML(w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"DeleteLaunchTemplateResponse"`
			RequestID string   `xml:"requestId"`
			LT        ltXML    `xml:"launchTemplate"`
		}{RequestID: newRequestID(), LT: t.xml()})
		return true
	}
	return false
}

func mapValues(m map[string]*LaunchTemplate) []*LaunchTemplate {
	out := make([]*LaunchTemplate, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	return out
}

// ltMatches applies DescribeLaunchTemplates' filters tag:KEY and
// launch-template-name.
func ltMatches(form url.Values, t *LaunchTemplate) bool {
	for i := 1; form.Has(fmt.Sprintf("Filter.%d.Name", i)); i++ {
		name := form.Get(fmt.Sprintf("Filter.%d.Name", i))
		var values []string
		for j := 1; form.Has(fmt.Sprintf("Filter.%d.Value.%d", i, j)); j++ {
			values = append(values, form.Get(fmt.Sprintf("Filter.%d.Value.%d", i, j)))
		}
		var have string
		var ok bool
		switch {
		case strings.HasPrefix(name, "tag:"):
			have, ok = t.Tags[strings.TrimPrefix(name, "tag:")]
		case name == "launch-template-name":
			have, ok = t.Name, true
		default:
			continue
		}
		if !ok || !slices.Contains(values, have) {
			return false
		}
	}
	return true
}

// checkNodegroupLaunchTemplate refuses, as EKS does, a CreateNodegroup
// whose launch template does not exist in the region, or that sets
// diskSize or remoteAccess together with a launch template; "" when the
// request is fine.
func (e *Emulator) checkNodegroupLaunchTemplate(region string, body []byte) string {
	var req struct {
		LaunchTemplate *struct {
			ID      string `json:"id"`
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"launchTemplate"`
		DiskSize     *int            `json:"diskSize"`
		RemoteAccess json.RawMessage `json:"remoteAccess"`
	}
	if json.Unmarshal(body, &req) != nil || req.LaunchTemplate == nil {
		return ""
	}
	lt := req.LaunchTemplate
	if (lt.ID == "") == (lt.Name == "") {
		return "launchTemplate: specify either id or name, not both and not neither"
	}
	if req.DiskSize != nil {
		return "Disk size must be specified within the launch template."
	}
	if len(req.RemoteAccess) > 0 && string(req.RemoteAccess) != "null" {
		return "Remote access configuration cannot be specified with a launch template."
	}
	e.lt.mu.Lock()
	defer e.lt.mu.Unlock()
	for _, t := range e.lt.byRegion[region] {
		if t.ID == lt.ID || t.Name == lt.Name {
			if lt.Version != "" && lt.Version != "1" && lt.Version != "$Default" && lt.Version != "$Latest" {
				return fmt.Sprintf("Launch template %s has no version %s.", t.ID, lt.Version)
			}
			return ""
		}
	}
	return fmt.Sprintf("Launch template %s%s does not exist.", lt.ID, lt.Name)
}
