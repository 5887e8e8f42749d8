package aws

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigEntry is what a kubeconfig needs to reach an EKS cluster with
// kiln's exec credential.
type KubeconfigEntry struct {
	Cluster, Region, Profile string
	// Endpoint and CAData (base64, as EKS returns it) of the API server.
	Endpoint, CAData string
	// KilnPath is the kiln executable the exec credential runs.
	KilnPath string
}

// ContextName is the kubeconfig context (and cluster and user) name kiln
// writes for an aws cluster.
func ContextName(cluster string) string { return "kiln-aws-" + cluster }

// WriteKubeconfig adds or updates the cluster, user and context of e in
// the kubeconfig at path, leaving every other entry as it was. Writers are
// serialized with an advisory lock on PATH.lock and the file is replaced
// atomically, so concurrent kiln runs never lose each other's entries. The
// user entry holds no secret: it runs `kiln aws token`.
func WriteKubeconfig(path string, e KubeconfigEntry) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return fmt.Errorf("kubeconfig %s: lock: %w", path, err)
	}
	defer unlock()

	cfg, err := clientcmd.LoadFromFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cfg = clientcmdapi.NewConfig()
	case err != nil:
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	ca, err := base64.StdEncoding.DecodeString(e.CAData)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: CA data of %s: %w", path, e.Cluster, err)
	}
	name := ContextName(e.Cluster)
	kiln := e.KilnPath
	if kiln == "" {
		kiln = "kiln"
	}
	args := []string{"aws", "token", "--cluster", e.Cluster, "--region", e.Region}
	if e.Profile != "" {
		args = append(args, "--profile", e.Profile)
	}
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: e.Endpoint, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      "client.authentication.k8s.io/v1beta1",
		Command:         kiln,
		Args:            args,
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	if cfg.CurrentContext == "" {
		cfg.CurrentContext = name
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*")
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}
