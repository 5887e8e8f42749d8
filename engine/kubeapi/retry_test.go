package kubeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/internal/testenv/faultproxy"
)

var fast = Policy{Attempts: 5, Base: time.Millisecond, Max: 4 * time.Millisecond, MaxRetryAfter: 3 * time.Second}

// server answers each request with the next code of codes (the last one
// repeats) and records the bodies it received.
type server struct {
	mu     sync.Mutex
	codes  []int
	bodies []string
	header http.Header
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	i := min(len(s.bodies), len(s.codes)) - 1
	code := s.codes[i]
	s.mu.Unlock()
	for k, v := range s.header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
}

func (s *server) tries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

type observed struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (o *observed) observe(_ *http.Request, _ int, _ string, d time.Duration) {
	o.mu.Lock()
	o.waits = append(o.waits, d)
	o.mu.Unlock()
}

func TestStatusCodes(t *testing.T) {
	cases := []struct {
		name      string
		codes     []int
		header    http.Header
		wantCode  int
		wantTries int
	}{
		{"500 then ok", []int{500, 200}, nil, 200, 2},
		{"502 503 504 then ok", []int{502, 503, 504, 200}, nil, 200, 4},
		{"429 then ok", []int{429, 201}, http.Header{"Retry-After": {"0"}}, 201, 2},
		{"always 500: bounded", []int{500}, nil, 500, 5},
		{"400 fails fast", []int{400, 200}, nil, 400, 1},
		{"403 fails fast", []int{403, 200}, nil, 403, 1},
		{"404 fails fast", []int{404, 200}, nil, 404, 1},
		{"409 fails fast", []int{409, 200}, nil, 409, 1},
		{"422 fails fast", []int{422, 200}, nil, 422, 1},
		{"501 fails fast", []int{501, 200}, nil, 501, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{codes: tc.codes, header: tc.header}
			srv := httptest.NewServer(s)
			defer srv.Close()
			rt := &Transport{Next: http.DefaultTransport, Policy: fast}
			body := `{"kind":"ConfigMap","metadata":{"name":"x"}}`
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/a/configmaps", strings.NewReader(body))
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode || s.tries() != tc.wantTries {
				t.Fatalf("got %d after %d tries, want %d after %d", resp.StatusCode, s.tries(), tc.wantCode, tc.wantTries)
			}
			for i, b := range s.bodies {
				if b != body {
					t.Errorf("try %d sent body %q, want the original", i+1, b)
				}
			}
			if resp.Header.Get("Retry-After") != "" {
				t.Error("a final answer kept Retry-After: client-go would retry the whole round again")
			}
		})
	}
}

func TestRetryAfterIsHonouredAndCapped(t *testing.T) {
	for _, tc := range []struct {
		after string
		want  time.Duration
	}{{"2", 2 * time.Second}, {"60", 3 * time.Second}} {
		s := &server{codes: []int{429, 200}, header: http.Header{"Retry-After": {tc.after}}}
		srv := httptest.NewServer(s)
		var o observed
		p := fast
		p.MaxRetryAfter = tc.want
		if tc.after == "60" {
			p.MaxRetryAfter = 3 * time.Second
		}
		rt := &Transport{Next: http.DefaultTransport, Policy: p, Observe: o.observe}
		// A deadline shorter than the wait: the transport answers the 429
		// at once instead of sleeping into the timeout.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 429 || s.tries() != 1 || len(o.waits) != 0 {
			t.Fatalf("Retry-After %s within a 1s deadline: got %d after %d tries (waits %v), want the 429 at once", tc.after, resp.StatusCode, s.tries(), o.waits)
		}
		// Without a deadline it waits what the server asked, capped.
		wait := &observed{}
		rt.Observe = wait.observe
		s2 := &server{codes: []int{429, 200}, header: http.Header{"Retry-After": {tc.after}}}
		srv.Config.Handler = s2
		ctx, cancel = context.WithCancel(context.Background())
		rt.Observe = func(r *http.Request, a int, c string, d time.Duration) {
			wait.observe(r, a, c, d)
			cancel() // no need to sleep it out: the decision is what is tested
		}
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		_, err = rt.RoundTrip(req)
		if err == nil {
			t.Fatal("want the cancellation")
		}
		if len(wait.waits) != 1 || wait.waits[0] != tc.want {
			t.Fatalf("Retry-After %s: waited %v, want %v", tc.after, wait.waits, tc.want)
		}
		srv.Close()
	}
}

// Connection faults come from the fault proxy: a reset before the request,
// and a write that landed whose answer was lost.
func TestConnectionFaultsAreRetried(t *testing.T) {
	for _, tc := range []struct {
		kind  faultproxy.Kind
		http2 bool
	}{{faultproxy.ResetBeforeRequest, false}, {faultproxy.AnswerLost, false}, {faultproxy.ResetBeforeRequest, true}, {faultproxy.AnswerLost, true}} {
		kind := tc.kind
		t.Run(fmt.Sprintf("%s/http2=%v", kind, tc.http2), func(t *testing.T) {
			s := &server{codes: []int{200}}
			up := httptest.NewTLSServer(s)
			defer up.Close()
			p, err := faultproxy.Start(faultproxy.Options{Upstream: &rest.Config{Host: up.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, Rates: map[faultproxy.Kind]float64{kind: 1}, HTTP2: tc.http2})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			base, err := rest.TransportFor(p.RESTConfig())
			if err != nil {
				t.Fatal(err)
			}
			rt := &Transport{Next: base, Policy: fast}
			req, _ := http.NewRequest(http.MethodPost, p.URL+"/api/v1/namespaces/a/configmaps", strings.NewReader("{}"))
			_, err = rt.RoundTrip(req)
			if err == nil {
				t.Fatal("every try failed, yet no error")
			}
			if p.Counts()[kind] != fast.Attempts {
				t.Fatalf("the proxy saw %d tries, want %d: %s", p.Counts()[kind], fast.Attempts, p)
			}
			// client-go retries a GET on an error that looks like a reset
			// or an EOF; the exhausted error must not, or the attempts
			// multiply.
			if utilnet.IsProbableEOF(err) || utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) {
				t.Fatalf("exhausted error looks transient to client-go: %v", err)
			}
			p.SetRates(map[faultproxy.Kind]float64{kind: 0.5})
			ok := 0
			for i := 0; i < 20; i++ {
				req, _ = http.NewRequest(http.MethodPost, p.URL+"/api/v1/namespaces/a/configmaps", strings.NewReader("{}"))
				resp, err := rt.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
					ok++
				}
			}
			// At 50% with 5 tries a request fails with probability 1/32;
			// the seeded sequence makes this exact.
			if ok < 17 {
				t.Fatalf("only %d of 20 requests through a 50%% %s proxy succeeded", ok, kind)
			}
		})
	}
}

func TestUnreplayableBodyIsNotRetried(t *testing.T) {
	s := &server{codes: []int{503, 200}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	rt := &Transport{Next: http.DefaultTransport, Policy: fast}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("x")))
	req.GetBody = nil
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || s.tries() != 1 {
		t.Fatalf("got %d after %d tries; a body that cannot be replayed must not be sent twice", resp.StatusCode, s.tries())
	}
}

func TestCancelledContextStopsRetrying(t *testing.T) {
	s := &server{codes: []int{500}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	rt := &Transport{Next: http.DefaultTransport, Policy: Policy{Attempts: 100, Base: time.Hour, Max: time.Hour},
		Observe: func(*http.Request, int, string, time.Duration) { cancel() }}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	_, err := rt.RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "context canceled") || s.tries() != 1 {
		t.Fatalf("after cancel: err %v, %d tries", err, s.tries())
	}
}

func TestContains(t *testing.T) {
	stored := map[string]any{
		"metadata": map[string]any{"name": "x", "resourceVersion": "9", "uid": "u", "labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"holder": "me", "n": 3.0, "list": []any{"a", "b"}, "defaulted": "yes"},
	}
	cases := []struct {
		name string
		sent map[string]any
		want bool
	}{
		{"same fields, older resourceVersion", map[string]any{"metadata": map[string]any{"name": "x", "resourceVersion": "8", "labels": map[string]any{"a": "b"}}, "spec": map[string]any{"holder": "me", "n": 3.0, "list": []any{"a", "b"}}}, true},
		{"nulls and empties the server fills or drops", map[string]any{"metadata": map[string]any{"name": "x", "creationTimestamp": nil}, "spec": map[string]any{"holder": "me", "missing": "", "empty": map[string]any{}}, "status": map[string]any{}}, true},
		{"another holder", map[string]any{"spec": map[string]any{"holder": "you"}}, false},
		{"another number", map[string]any{"spec": map[string]any{"n": 4.0}}, false},
		{"another list", map[string]any{"spec": map[string]any{"list": []any{"a"}}}, false},
		{"a label the stored object lacks", map[string]any{"metadata": map[string]any{"labels": map[string]any{"c": "d"}}}, false},
		{"a field the stored object lacks", map[string]any{"spec": map[string]any{"extra": "v"}}, false},
	}
	for _, tc := range cases {
		if got := contains(stored, tc.sent, true); got != tc.want {
			t.Errorf("%s: contains = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An answer whose body is cut after its headers (the API server gone in
// the middle of it; over HTTP/2 "stream error when reading response body")
// is a failed try like any other: the next try's answer is what the caller
// reads.
func TestBodyCutMidAnswerIsRetried(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			var tries atomic.Int32
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if tries.Add(1) == 1 {
					w.Header().Set("Content-Length", "100")
					w.WriteHeader(http.StatusOK)
					_, _ = w.Write([]byte(`{"kind":`))
					w.(http.Flusher).Flush()
					panic(http.ErrAbortHandler) // cut: a reset stream or a closed connection
				}
				_, _ = w.Write([]byte(`{"kind":"ConfigMap"}`))
			}))
			up.EnableHTTP2 = h2
			up.StartTLS()
			defer up.Close()
			rt := &Transport{Next: up.Client().Transport, Policy: fast}
			req, _ := http.NewRequest(http.MethodGet, up.URL+"/api/v1/namespaces/a/configmaps/b", nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || string(body) != `{"kind":"ConfigMap"}` {
				t.Fatalf("body %q, err %v after %d tries", body, err, tries.Load())
			}
			if tries.Load() != 2 {
				t.Fatalf("%d tries, want 2", tries.Load())
			}
		})
	}
}
