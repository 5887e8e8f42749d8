package faultproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// upstream is a stand-in API server for the proxy's own logic: it counts
// what reaches it, answers writes with a JSON object and streams a watch
// until the client goes away.
type upstream struct {
	srv     *httptest.Server
	reached atomic.Int64
	mu      sync.Mutex
	auth    []string
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.reached.Add(1)
		u.mu.Lock()
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.mu.Unlock()
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", "application/json")
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "{\"type\":\"ADDED\",\"n\":%d}\n", i); err != nil {
					return
				}
				http.NewResponseController(w).Flush()
				if r.Context().Err() != nil {
					return
				}
			}
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1"}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func startProxy(t *testing.T, u *upstream, rates map[Kind]float64) (*Proxy, *http.Client) {
	t.Helper()
	up := &rest.Config{Host: u.srv.URL, BearerToken: "upstream-token", TLSClientConfig: rest.TLSClientConfig{CAData: pemOf(u.srv)}}
	p, err := Start(Options{Upstream: up, Seed: 7, Rates: rates})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	rt, err := rest.TransportFor(p.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return p, &http.Client{Transport: rt}
}

func pemOf(s *httptest.Server) []byte {
	p := &Proxy{srv: s}
	return p.CAData()
}

func TestEachFaultKind(t *testing.T) {
	cases := []struct {
		kind      Kind
		method    string
		watch     bool
		wantCode  int
		wantErr   bool
		reachesUp bool
	}{
		{InternalError, http.MethodGet, false, 500, false, false},
		{TooManyRequests, http.MethodPost, false, 429, false, false},
		{ResetBeforeRequest, http.MethodPost, false, 0, true, false},
		{AnswerLost, http.MethodPost, false, 0, true, true},
		{AnswerLost, http.MethodGet, true, 200, false, true}, // never applies to a watch
		{WatchCut, http.MethodGet, false, 200, false, true},  // only applies to a watch
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s/watch=%v", tc.kind, tc.method, tc.watch), func(t *testing.T) {
			u := startUpstream(t)
			p, client := startProxy(t, u, map[Kind]float64{tc.kind: 1})
			url := p.URL + "/api/v1/namespaces/x/configmaps"
			if tc.watch {
				url += "?watch=true"
			}
			req, _ := http.NewRequest(tc.method, url, strings.NewReader(`{"kind":"ConfigMap"}`))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := client.Do(req.WithContext(ctx))
			if tc.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("want a transport error, got %s", resp.Status)
				}
			} else {
				if err != nil {
					t.Fatalf("want %d, got error %v", tc.wantCode, err)
				}
				if resp.StatusCode != tc.wantCode {
					t.Fatalf("want %d, got %s", tc.wantCode, resp.Status)
				}
				if tc.kind == TooManyRequests && resp.Header.Get("Retry-After") != "1" {
					t.Errorf("429 without Retry-After: 1: %v", resp.Header)
				}
				if tc.wantCode >= 400 && !strings.Contains(resp.Header.Get("Content-Type"), "json") {
					t.Errorf("fault answer is not a JSON Status")
				}
				if tc.watch {
					// Read a few events and stop: the stream is not cut.
					sc := bufio.NewScanner(resp.Body)
					for i := 0; i < 3 && sc.Scan(); i++ {
					}
					cancel()
				}
				resp.Body.Close()
			}
			if got := u.reached.Load() > 0; got != tc.reachesUp {
				t.Errorf("request reached the upstream: %v, want %v", got, tc.reachesUp)
			}
			wantCount := 1
			if (tc.kind == AnswerLost && tc.watch) || (tc.kind == WatchCut && !tc.watch) {
				wantCount = 0
			}
			if got := p.Counts()[tc.kind]; got != wantCount {
				t.Errorf("count of %s = %d, want %d (%s)", tc.kind, got, wantCount, p)
			}
		})
	}
}

func TestWatchCutEndsTheStream(t *testing.T) {
	u := startUpstream(t)
	p, client := startProxy(t, u, map[Kind]float64{WatchCut: 1})
	resp, err := client.Get(p.URL + "/api/v1/configmaps?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The upstream streams forever; only the cut ends the body, and it ends
	// it as a broken stream, not a clean end.
	_, err = io.Copy(io.Discard, resp.Body)
	if err == nil {
		t.Fatal("the watch stream ended cleanly; want it cut")
	}
	if p.Counts()[WatchCut] != 1 {
		t.Fatalf("watch cuts: %s", p)
	}
}

// A watch refused with watch-gone is what client-go takes for an expired
// resourceVersion (the reflector relists on it): an Error event whose
// Status is 410 Expired. It never reaches the upstream.
func TestWatchGoneIsAnExpiredWatchToClientGo(t *testing.T) {
	u := startUpstream(t)
	p, _ := startProxy(t, u, map[Kind]float64{WatchGone: 1})
	cs, err := kubernetes.NewForConfig(p.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().ConfigMaps("").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev, ok := <-w.ResultChan()
	if !ok || ev.Type != watch.Error {
		t.Fatalf("first event %v (open %v), want an Error event", ev.Type, ok)
	}
	if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) || apierrors.ReasonForError(err) != metav1.StatusReasonExpired {
		t.Fatalf("event error %v: client-go does not take it for an expired watch", err)
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Error("the stream goes on after the 410")
	}
	if u.reached.Load() != 0 || p.Counts()[WatchGone] != 1 {
		t.Fatalf("upstream reached %d times; %s", u.reached.Load(), p)
	}
}

// Latency delays every request; SetLatency(0) ends it.
func TestLatencyDelaysEveryRequest(t *testing.T) {
	u := startUpstream(t)
	p, client := startProxy(t, u, nil)
	p.SetLatency(300 * time.Millisecond)
	start := time.Now()
	resp, err := client.Get(p.URL + "/api")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("the request took %s through a proxy with 300ms latency", d)
	}
}

func TestClientCredentialsPassThrough(t *testing.T) {
	u := startUpstream(t)
	p, _ := startProxy(t, u, nil)
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/api", nil)
	req.Header.Set("Authorization", "Bearer someone-else")
	rt, _ := rest.TransportFor(&rest.Config{Host: p.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.CAData()}})
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.auth) != 1 || u.auth[0] != "Bearer someone-else" {
		t.Fatalf("upstream saw Authorization %q, want the client's own", u.auth)
	}
}

func TestSeededAndRated(t *testing.T) {
	draw := func(seed uint64) []Kind {
		p := &Proxy{opts: Options{WatchCutMin: 1, WatchCutMax: 2}, counts: map[Kind]int{}, rates: Uniform(0.1)}
		p.rng = newRand(seed)
		var ks []Kind
		for i := 0; i < 20000; i++ {
			r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
			if i%2 == 0 {
				r = httptest.NewRequest(http.MethodGet, "/api/v1/pods?watch=true", nil)
			}
			k, _ := p.decide(r)
			ks = append(ks, k)
		}
		return ks
	}
	a, b := draw(42), draw(42)
	faults := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different decision at request %d: %q vs %q", i, a[i], b[i])
		}
		if a[i] != "" {
			faults++
		}
	}
	// 10% of 20,000: 2,000 expected; the binomial's sd is about 42.
	if faults < 1800 || faults > 2200 {
		t.Fatalf("%d faults in 20000 requests at 10%%", faults)
	}
	c := draw(43)
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same == len(a) {
		t.Fatal("a different seed gave the same decisions")
	}
}

func TestNoUpstream(t *testing.T) {
	if _, err := Start(Options{}); err == nil {
		t.Fatal("Start without an upstream succeeded")
	}
}

// Mix gives every request, watch or not, the same total rate, and every
// kind its share.
func TestMixRateOnEveryRequest(t *testing.T) {
	for _, watch := range []bool{false, true} {
		p := &Proxy{opts: Options{WatchCutMin: 1, WatchCutMax: 2}, counts: map[Kind]int{}, rates: Mix(0.2)}
		p.rng = newRand(7)
		target := "/api/v1/pods"
		if watch {
			target += "?watch=true"
		}
		faults := 0
		for i := 0; i < 20000; i++ {
			if k, _ := p.decide(httptest.NewRequest(http.MethodGet, target, nil)); k != "" {
				faults++
			}
		}
		// 20% of 20,000: 4,000 expected; the binomial's sd is about 57.
		if faults < 3700 || faults > 4300 {
			t.Errorf("watch=%v: %d faults in 20000 requests at 20%%", watch, faults)
		}
		for _, k := range Kinds {
			applies := (k != AnswerLost || !watch) && ((k != WatchCut && k != WatchGone) || watch)
			if applies != (p.counts[k] > 0) {
				t.Errorf("watch=%v: %s drawn %d times", watch, k, p.counts[k])
			}
		}
	}
}

// AtLeastOnce injects a named kind into the first request it applies to
// when the dice have not, once, and never into a request it does not
// apply to.
func TestAtLeastOnce(t *testing.T) {
	p := &Proxy{opts: Options{WatchCutMin: 1, WatchCutMax: 2, AtLeastOnce: []Kind{WatchGone}}, counts: map[Kind]int{}, rates: map[Kind]float64{}}
	p.rng = newRand(7)
	for i := 0; i < 5; i++ {
		if k, _ := p.decide(httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)); k != "" {
			t.Fatalf("a LIST was answered with %s", k)
		}
	}
	var got []Kind
	for i := 0; i < 5; i++ {
		k, _ := p.decide(httptest.NewRequest(http.MethodGet, "/api/v1/pods?watch=true", nil))
		got = append(got, k)
	}
	if want := []Kind{WatchGone, "", "", "", ""}; !slices.Equal(got, want) {
		t.Fatalf("watches answered %q, want %q", got, want)
	}
	if p.counts[WatchGone] != 1 {
		t.Fatalf("watch-gone counted %d times, want 1", p.counts[WatchGone])
	}
}
