// Command kumoregion runs one in-process kumo AWS emulator for a single
// region. It is the child process that package awsemu starts once per
// emulated region; it is not meant to be run by hand.
//
// kumo creates every service's storage in package init() and reads the
// region from AWS_DEFAULT_REGION at that moment, so the region is fixed for
// the life of the process. The parent therefore sets AWS_DEFAULT_REGION in
// this process's environment before exec.
//
// Protocol with the parent:
//   - once the server is listening, one JSON line {"url":..., "region":...,
//     "pid":...} is written to stdout;
//   - the process exits when stdin reaches EOF (the parent closed it, or the
//     parent died and the kernel closed it), or on SIGTERM/SIGINT.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sivchari/kumo"
)

type ready struct {
	URL    string `json:"url"`
	Region string `json:"region"`
	PID    int    `json:"pid"`
}

func main() {
	region := os.Getenv("AWS_DEFAULT_REGION")
	if region == "" {
		fmt.Fprintln(os.Stderr, "kumoregion: AWS_DEFAULT_REGION must be set")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	srv := kumo.NewServer()

	if err := json.NewEncoder(os.Stdout).Encode(ready{URL: srv.URL, Region: region, PID: os.Getpid()}); err != nil {
		fmt.Fprintln(os.Stderr, "kumoregion: writing ready line:", err)
		srv.Close()
		os.Exit(1)
	}

	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()

	<-ctx.Done()
	srv.Close()
}
