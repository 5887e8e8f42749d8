package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"k8s.io/client-go/kubernetes/scheme"
)

// A create (POST) or update (PUT) whose answer was lost may have landed; its
// retry then meets 409 AlreadyExists or Conflict from its own write. When
// that happens, landed reads the object and, if it holds everything the
// write sent, answers as the write would have: the caller sees its create or
// update succeed instead of a conflict with itself. An object that differs
// in anything sent keeps the 409: someone else's write is never taken for
// ours. (An identical object written by someone else is indistinguishable,
// and as good: nothing the caller wanted is missing.)
func (t *Transport) landed(req *http.Request, resp *http.Response) *http.Response {
	if req.Method == http.MethodDelete && resp.StatusCode == http.StatusNotFound && !req.URL.Query().Has("dryRun") {
		// A repeated delete that finds the object gone: the first one
		// did it (or someone else did; gone is gone).
		return synthesize(req, resp, http.StatusOK, []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}`))
	}
	if (req.Method != http.MethodPost && req.Method != http.MethodPut) || resp.StatusCode != http.StatusConflict ||
		req.GetBody == nil || req.URL.Query().Has("dryRun") {
		return nil
	}
	sent, err := readObject(req.Header.Get("Content-Type"), req.GetBody)
	if err != nil {
		return nil
	}
	url := *req.URL
	url.RawQuery = ""
	if req.Method == http.MethodPost {
		meta, _ := sent["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		if name == "" {
			return nil // generateName: a repeat is a new object, never the same one
		}
		url.Path = strings.TrimSuffix(url.Path, "/") + "/" + name
	}
	get, err := http.NewRequestWithContext(req.Context(), http.MethodGet, url.String(), nil)
	if err != nil {
		return nil
	}
	get.Header = req.Header.Clone()
	get.Header.Del("Content-Type")
	get.Header.Set("Accept", "application/json")
	got, err := t.Next.RoundTrip(get)
	if err != nil {
		return nil
	}
	defer got.Body.Close()
	raw, err := io.ReadAll(got.Body)
	if err != nil || got.StatusCode != http.StatusOK {
		return nil
	}
	var stored map[string]any
	if json.Unmarshal(raw, &stored) != nil || !contains(stored, sent, true) {
		return nil
	}
	code := http.StatusOK
	if req.Method == http.MethodPost {
		code = http.StatusCreated
	}
	return synthesize(req, resp, code, raw)
}

// synthesize is the answer the landed write would have had.
func synthesize(req *http.Request, resp *http.Response, code int, raw []byte) *http.Response {
	return &http.Response{
		Status: http.StatusText(code), StatusCode: code, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(bytes.NewReader(raw)),
		Request: req, ContentLength: int64(len(raw)),
	}
}

// readObject decodes a request body, JSON or (client-go's default for
// built-in types) protobuf, into its JSON form.
func readObject(contentType string, getBody func() (io.ReadCloser, error)) (map[string]any, error) {
	body, err := getBody()
	if err != nil {
		return nil, err
	}
	defer body.Close()
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	if strings.Contains(contentType, "protobuf") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
		if err != nil {
			return nil, err
		}
		if raw, err = json.Marshal(obj); err != nil {
			return nil, err
		}
	} else if !strings.Contains(contentType, "json") {
		return nil, fmt.Errorf("content type %q", contentType)
	}
	var m map[string]any
	return m, json.Unmarshal(raw, &m)
}

// contains says whether stored holds every value of sent. At the top level,
// the metadata the server owns (resourceVersion, the precondition a landed
// update moved past; managedFields; creationTimestamp) is not compared.
func contains(stored, sent any, top bool) bool {
	switch s := sent.(type) {
	case nil:
		return true // a null sent means "unset"; the server may have defaulted it
	case map[string]any:
		st, ok := stored.(map[string]any)
		if !ok {
			return len(s) == 0 && stored == nil
		}
		for k, v := range s {
			if top && k == "metadata" {
				if !containsMeta(st["metadata"], v) {
					return false
				}
				continue
			}
			if !contains(st[k], v, false) {
				return false
			}
		}
		return true
	case []any:
		st, ok := stored.([]any)
		if !ok || len(st) != len(s) {
			return len(s) == 0 && stored == nil
		}
		for i := range s {
			if !contains(st[i], s[i], false) {
				return false
			}
		}
		return true
	case string:
		if s == "" && stored == nil {
			return true // omitted when empty on the way back
		}
	}
	return reflect.DeepEqual(stored, sent)
}

func containsMeta(stored, sent any) bool {
	s, ok := sent.(map[string]any)
	if !ok {
		return contains(stored, sent, false)
	}
	trimmed := make(map[string]any, len(s))
	for k, v := range s {
		switch k {
		case "resourceVersion", "managedFields", "creationTimestamp", "generation", "uid":
		default:
			trimmed[k] = v
		}
	}
	return contains(stored, trimmed, false)
}
