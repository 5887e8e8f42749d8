package trace

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTransportTracesRequestsWithoutSecrets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer srv.Close()
	get := func(ctx context.Context, rt http.RoundTripper, url string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer secret-token")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var lines []string
	rec := func(s string) { lines = append(lines, s) }
	k8s := &Transport{Next: http.DefaultTransport, System: "k8s", Query: true}

	get(context.Background(), k8s, srv.URL+"/api/v1/pods?labelSelector=a%3Db")
	if len(lines) != 0 {
		t.Fatalf("traced without a trace in the context: %v", lines)
	}
	get(With(context.Background(), rec, 1), k8s, srv.URL+"/api/v1/pods?labelSelector=a%3Db")
	get(With(context.Background(), rec, 2), k8s, srv.URL+"/api/v1/pods?labelSelector=a%3Db")
	aws := Client{Next: http.DefaultClient}
	req, _ := http.NewRequestWithContext(With(context.Background(), rec, 2), http.MethodGet, srv.URL+"/clusters?X-Amz-Signature=abc", nil)
	resp, err := aws.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if len(lines) != 3 {
		t.Fatalf("lines %v", lines)
	}
	if !strings.HasPrefix(lines[0], "k8s GET /api/v1/pods -> 418 (") {
		t.Errorf("detail 1: %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "k8s GET /api/v1/pods?labelSelector=a%3Db -> 418 (") {
		t.Errorf("detail 2: %q", lines[1])
	}
	if !strings.Contains(lines[2], "aws GET 127.0.0.1:") || strings.Contains(lines[2], "Signature") {
		t.Errorf("aws: %q", lines[2])
	}
	for _, l := range lines {
		if strings.Contains(l, "secret-token") || strings.Contains(l, "Bearer") {
			t.Errorf("header traced: %q", l)
		}
	}
}
