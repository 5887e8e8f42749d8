package awsemu

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"
)

// Error codes the router itself returns.
const (
	// ErrCodeRegionNotServed is returned (HTTP 400) for a request whose
	// credential scope names a region the emulator does not serve.
	ErrCodeRegionNotServed = "RegionNotServed"

	// ErrCodeMissingAuthenticationToken is returned (HTTP 403) for a request
	// without a SigV4 credential scope: it cannot be routed to a region.
	ErrCodeMissingAuthenticationToken = "MissingAuthenticationToken"

	// ErrCodeServiceUnavailable is returned (HTTP 503) when a region's kumo
	// cannot be reached. The SDK retries it like a real 503.
	ErrCodeServiceUnavailable = "ServiceUnavailable"
)

// iamSigningName is the credential-scope service name of IAM, which is
// global and therefore always routed to the primary region.
const iamSigningName = "iam"

// eksSigningName is the credential-scope service name of EKS.
const eksSigningName = "eks"

// ServeHTTP routes a request to the kumo of the region in its SigV4
// credential scope.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scope, ok := credentialScope(r)
	if !ok {
		writeAWSError(w, r, "", http.StatusForbidden, ErrCodeMissingAuthenticationToken,
			"awsemu: request has no SigV4 credential scope (Authorization Credential=AKID/DATE/REGION/SERVICE/aws4_request or X-Amz-Credential), so no region to route it to")

		return
	}

	e.countMu.Lock()
	e.counts[scope.region]++
	e.countMu.Unlock()

	b, ok := e.backends[scope.region]
	if !ok {
		writeAWSError(w, r, scope.service, http.StatusBadRequest, ErrCodeRegionNotServed,
			fmt.Sprintf("region %q is not served by the kiln AWS emulator (serving %s)", scope.region, strings.Join(e.regions, ", ")))

		return
	}

	if b.latency > 0 {
		t := time.NewTimer(b.latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()

			return
		}
	}

	if scope.service == iamSigningName {
		b = e.backends[e.primary]
	}

	// Read the request body before forwarding. Streaming it lets kumo answer
	// before the transport has seen the inbound body's EOF; the server then
	// closes that body while the transport still reads it, the transport
	// drops the upstream connection, and the client gets a truncated
	// response (a few percent of Describe* answers of tens of kilobytes).
	// AWS API request bodies are small.
	var body []byte

	if r.Body != nil && r.Body != http.NoBody {
		var err error

		body, err = io.ReadAll(r.Body)
		_ = r.Body.Close()

		if err != nil {
			writeAWSError(w, r, scope.service, http.StatusBadRequest, ErrCodeServiceUnavailable,
				fmt.Sprintf("awsemu: reading the request body: %v", err))

			return
		}

		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}

	e.countWrite(scope.region, r, body)

	if e.injectFault(w, r, scope.service, body) {
		return
	}

	// EKS operations kumo lacks (UpdateClusterVersion, …) are emulated
	// here, and overlaid on kumo's Describe answers.
	if scope.service == eksSigningName && (e.serveFargate(w, r, b, body) || e.serveAddons(w, r, b, body) || e.serveAccess(w, r, b, body) || e.serveEKS(w, r, b, body)) {
		return
	}
	if scope.service == "ec2" && (e.serveLaunchTemplates(w, r, b, body) || e.serveNetwork(w, r, b, body) || e.serveEC2(w, r, b, body)) {
		return
	}

	b.proxy.ServeHTTP(w, r)
}

func (e *Emulator) newProxy(p *kumoProc) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.url)
			// Keep the Host the client signed, as real AWS would see it.
			pr.Out.Host = pr.In.Host
		},
		Transport: e.tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			scope, _ := credentialScope(r)
			writeAWSError(w, r, scope.service, http.StatusServiceUnavailable, ErrCodeServiceUnavailable,
				fmt.Sprintf("awsemu: kumo for region %q unreachable: %v", p.region, err))
		},
	}
}

// scope is the routing-relevant part of a SigV4 credential scope.
type scope struct {
	region  string
	service string
}

// credentialScope extracts region and service from the request's SigV4
// credential scope: the Authorization header's
// "Credential=AKID/DATE/REGION/SERVICE/aws4_request", or the X-Amz-Credential
// query parameter of a presigned URL. SigV4a scopes
// (AKID/DATE/SERVICE/aws4_request) are accepted when X-Amz-Region-Set names
// exactly one region.
func credentialScope(r *http.Request) (scope, bool) {
	var cred string

	if auth := r.Header.Get("Authorization"); auth != "" {
		if _, after, found := strings.Cut(auth, "Credential="); found {
			cred = after
			if end := strings.IndexAny(cred, ", "); end >= 0 {
				cred = cred[:end]
			}
		}
	}

	if cred == "" {
		cred = r.URL.Query().Get("X-Amz-Credential")
	}

	parts := strings.Split(cred, "/")
	n := len(parts)

	switch {
	case n >= 5 && parts[n-1] == "aws4_request":
		s := scope{region: parts[n-3], service: parts[n-2]}

		return s, s.region != "" && s.service != ""
	case n == 4 && parts[3] == "aws4_request":
		set := r.Header.Get("X-Amz-Region-Set")
		if set == "" {
			set = r.URL.Query().Get("X-Amz-Region-Set")
		}

		s := scope{region: strings.TrimSpace(set), service: parts[2]}

		return s, s.region != "" && !strings.ContainsAny(s.region, ",*") && s.service != ""
	default:
		return scope{}, false
	}
}

// writeAWSError writes an error in the wire protocol the calling service
// uses, so the SDK decodes it into a smithy.APIError with the given code and
// message instead of a deserialization failure:
//   - ec2 (ec2query): <Response><Errors><Error>…</Error></Errors>…
//   - awsquery services (IAM, STS, …; form-encoded or ?Action=):
//     <ErrorResponse><Error>…</Error>…
//   - s3: <Error>…</Error>
//   - everything else (restjson, awsjson): JSON body plus X-Amzn-ErrorType.
func writeAWSError(w http.ResponseWriter, r *http.Request, service string, status int, code, message string) {
	reqID := newRequestID()
	h := w.Header()
	h.Set("X-Amzn-RequestId", reqID)
	h.Set("X-Amz-Request-Id", reqID)

	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	isQuery := mediaType == "application/x-www-form-urlencoded" || r.URL.Query().Has("Action")

	switch {
	case service == "ec2":
		type xmlError struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		}

		writeXML(w, status, struct {
			XMLName   xml.Name   `xml:"Response"`
			Errors    []xmlError `xml:"Errors>Error"`
			RequestID string     `xml:"RequestID"`
		}{Errors: []xmlError{{Code: code, Message: message}}, RequestID: reqID})
	case isQuery:
		type xmlError struct {
			Type    string `xml:"Type"`
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		}

		writeXML(w, status, struct {
			XMLName   xml.Name `xml:"ErrorResponse"`
			Error     xmlError `xml:"Error"`
			RequestID string   `xml:"RequestId"`
		}{Error: xmlError{Type: senderOrReceiver(status), Code: code, Message: message}, RequestID: reqID})
	case service == "s3":
		writeXML(w, status, struct {
			XMLName   xml.Name `xml:"Error"`
			Code      string   `xml:"Code"`
			Message   string   `xml:"Message"`
			RequestID string   `xml:"RequestId"`
		}{Code: code, Message: message, RequestID: reqID})
	default:
		ct := "application/json"
		if strings.HasPrefix(mediaType, "application/x-amz-json") {
			ct = mediaType
		}

		h.Set("Content-Type", ct)
		h.Set("X-Amzn-ErrorType", code)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
	}
}

func writeXML(w http.ResponseWriter, status int, v any) {
	body, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)

		return
	}

	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}

func senderOrReceiver(status int) string {
	if status >= 500 {
		return "Receiver"
	}

	return "Sender"
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])

	return hex.EncodeToString(b[:])
}
