package kubeapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStreamedAnswerIsNotReadWhole: the answer to a request made with a
// Streamed context reaches the caller while the server is still sending
// it (Transport reads every other answer whole before returning it: this
// one would never return, as the server sends its rest only once the
// caller has read its start).
func TestStreamedAnswerIsNotReadWhole(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "rest")
	}))
	defer srv.Close()
	defer close(release)
	tr := &Transport{Next: http.DefaultTransport, Policy: DefaultPolicy}
	req, err := http.NewRequestWithContext(Streamed(context.Background()), http.MethodGet, srv.URL+"/api/v1/pods", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := make([]byte, len("first "))
	if _, err := io.ReadFull(resp.Body, start); err != nil || string(start) != "first " {
		t.Fatalf("read %q, %v", start, err)
	}
	release <- struct{}{}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "rest" {
		t.Fatalf("read the rest %q, %v", rest, err)
	}
}

// TestRetryCutRetriesOnlyCutAnswers: a read that fails with a CutError is
// run again until it succeeds; any other failure ends it at once, and so
// does its context.
func TestRetryCutRetriesOnlyCutAnswers(t *testing.T) {
	calls := 0
	err := RetryCut(context.Background(), func() error {
		if calls++; calls < 3 {
			return &CutError{Err: io.ErrUnexpectedEOF}
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("two cut answers then a whole one: %v after %d reads, want nil after 3", err, calls)
	}
	calls = 0
	bad := errors.New("decode PodList: bad")
	if err := RetryCut(context.Background(), func() error { calls++; return bad }); !errors.Is(err, bad) || calls != 1 {
		t.Errorf("an answer that cannot be decoded: %v after %d reads, want it after 1", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = RetryCut(ctx, func() error { calls++; cancel(); return &CutError{Err: io.ErrUnexpectedEOF} })
	var cut *CutError
	if !errors.As(err, &cut) || calls != 1 {
		t.Errorf("cut while its context ends: %v after %d reads, want the CutError after 1", err, calls)
	}
}
