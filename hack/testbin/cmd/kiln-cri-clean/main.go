// Command kiln-cri-clean stops and removes every pod sandbox (and so every
// container) of the container runtime at a CRI socket, the way the kubelet
// tears a pod down: StopPodSandbox runs the CNI DEL that frees the pod's IP
// and unmounts its network namespace. internal/testenv/testcluster runs it when a
// real node stops, after the kubelet, so no container outlives the test.
//
//	kiln-cri-clean unix:///path/to/containerd.sock
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kiln-cri-clean unix:///path/to/cri.sock")
		os.Exit(2)
	}
	if err := clean(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-cri-clean:", err)
		os.Exit(1)
	}
}

func clean(endpoint string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	pods, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var failed error
	for _, p := range pods.Items {
		name := p.GetMetadata().GetNamespace() + "/" + p.GetMetadata().GetName()
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			failed = fmt.Errorf("stop pod %s: %w", name, err)
			fmt.Fprintln(os.Stderr, failed)
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			failed = fmt.Errorf("remove pod %s: %w", name, err)
			fmt.Fprintln(os.Stderr, failed)
			continue
		}
		fmt.Printf("removed pod %s (%s)\n", name, p.Id)
	}
	return failed
}
