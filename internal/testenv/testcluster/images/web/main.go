// Command web is the real node's test web server: it answers every request
// on :8080 (or $PORT) with 200 and a line naming the pod, and logs each
// request to stdout, so a test reads it back through pods/log.
// GET /lookup?name=NAME answers with NAME's addresses as the pod's resolver
// (cluster DNS) finds them, one a line. GET /fetch?url=URL fetches URL from
// inside the pod (2 s timeout) and answers with its body, or 502 and the
// error: a test asks one pod to reach another, so NetworkPolicy applies.
// GET /sha256?path=FILE answers with the hex SHA-256 and the permission
// bits of a file in the pod ("HEX 0400"), never its content: a test checks
// a mounted token without the token leaving the pod.
package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	log.SetOutput(os.Stdout)
	log.SetFlags(0)
	log.Printf("kiln-web listening on :%s", port)
	err := http.ListenAndServe(":"+port, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Printf("kiln-web %s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		if r.URL.Path == "/lookup" {
			addrs, err := net.DefaultResolver.LookupHost(r.Context(), r.URL.Query().Get("name"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			fmt.Fprintln(w, strings.Join(addrs, "\n"))
			return
		}
		if r.URL.Path == "/sha256" {
			p := r.URL.Query().Get("path")
			st, err := os.Stat(p)
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			data, err := os.ReadFile(p)
			if err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			fmt.Fprintf(w, "%x %04o\n", sha256.Sum256(data), st.Mode().Perm())
			return
		}
		if r.URL.Path == "/fetch" {
			// A new connection each time: a kept-alive one would be
			// conntrack ESTABLISHED, which a NetworkPolicy does not cut.
			client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Get(r.URL.Query().Get("url"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(w, resp.Body)
			return
		}
		fmt.Fprintf(w, "kiln-web %s\n", host)
	}))
	log.Fatal(err)
}
