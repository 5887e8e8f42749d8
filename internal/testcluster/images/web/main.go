// Command web is the real node's test web server: it answers every request
// on :8080 (or $PORT) with 200 and a line naming the pod, and logs each
// request to stdout, so a test reads it back through pods/log.
// GET /lookup?name=NAME answers with NAME's addresses as the pod's resolver
// (cluster DNS) finds them, one a line.
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
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
		fmt.Fprintf(w, "kiln-web %s\n", host)
	}))
	log.Fatal(err)
}
