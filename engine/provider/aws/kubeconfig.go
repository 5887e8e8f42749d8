package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/engine"
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

// kubeconfigLockWait bounds how long kiln waits for a kubeconfig lock held
// by kubectl (which holds it for milliseconds) or another kiln. A variable
// so tests need not wait 30 s for a lock that is never released.
var kubeconfigLockWait = 30 * time.Second

// WriteKubeconfig adds or updates the cluster, user and context of e in
// the kubeconfig at path, leaving every other entry as it was (see
// editKubeconfig for how it coexists with kubectl). The user entry holds
// no secret: it runs `kiln aws token`. The first entry kiln writes into a
// file without a current context becomes the current context.
func WriteKubeconfig(ctx context.Context, path string, e KubeconfigEntry) (warnings []string, err error) {
	ca, err := base64.StdEncoding.DecodeString(e.CAData)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: CA data of %s: %w", path, e.Cluster, err)
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
	return editKubeconfig(ctx, path, true, func(cfg *clientcmdapi.Config) bool {
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
		return true
	})
}

// RemoveKubeconfig removes what WriteKubeconfig wrote for cluster: the
// context kiln-aws-NAME (when it still points at kiln's cluster and user
// entries), and those entries when no other context uses them; a
// current-context naming the removed context is cleared. A missing file
// is left missing. It reports whether anything was removed.
func RemoveKubeconfig(ctx context.Context, path, cluster string) (removed bool, warnings []string, err error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil, nil
	}
	name := ContextName(cluster)
	warnings, err = editKubeconfig(ctx, path, false, func(cfg *clientcmdapi.Config) bool {
		if c, ok := cfg.Contexts[name]; ok && c.Cluster == name && c.AuthInfo == name {
			delete(cfg.Contexts, name)
			removed = true
		}
		used := func(match func(*clientcmdapi.Context) bool) bool {
			for _, c := range cfg.Contexts {
				if match(c) {
					return true
				}
			}
			return false
		}
		if _, ok := cfg.Clusters[name]; ok && !used(func(c *clientcmdapi.Context) bool { return c.Cluster == name }) {
			delete(cfg.Clusters, name)
			removed = true
		}
		if u, ok := cfg.AuthInfos[name]; ok && isKilnUser(u, cluster) && !used(func(c *clientcmdapi.Context) bool { return c.AuthInfo == name }) {
			delete(cfg.AuthInfos, name)
			removed = true
		}
		if cfg.CurrentContext == name {
			cfg.CurrentContext = ""
			removed = true
		}
		return removed
	})
	return removed, warnings, err
}

// isKilnUser reports whether u is the exec credential kiln writes for cluster.
func isKilnUser(u *clientcmdapi.AuthInfo, cluster string) bool {
	if u.Exec == nil {
		return false
	}
	args := strings.Join(u.Exec.Args, " ")
	return strings.HasPrefix(args, "aws token --cluster "+cluster+" ")
}

// editKubeconfig applies edit to the kubeconfig at path so that kubectl
// keeps working, before, during and after, even if kiln is killed:
//
//   - Writers are serialized with client-go's convention: PATH.lock created
//     exclusively (O_EXCL semantics, through link(2) so the file appears
//     with its content) and removed when done. kubectl refuses to write
//     while it exists; kiln waits (up to 30 s) while kubectl holds it.
//     PATH is the name as given (like kubectl, which locks the name from
//     $KUBECONFIG, not a symlink's target).
//   - kiln's lock file records "kiln pid=… host=… boot=… start=…". A lock
//     from a kiln of this host that is provably dead (another boot, no such
//     pid, or the pid now belongs to a process started at another time) is
//     stale and removed; kubectl's lock (empty), another host's, or a live
//     process's is never removed. Stale-lock clearing is itself serialized
//     among kiln processes by an flock on the kubeconfig's directory, so
//     two kilns never judge and remove the same lock.
//   - The file is written through a symlink to its target, as a temp file
//     next to the target with the target's mode (0600 for a new file),
//     fsynced, renamed over it, and the directory fsynced: readers see the
//     old file or the new one, never a partial one.
//
// edit returns whether it changed anything; nothing is written otherwise.
// create says whether a missing file may be created.
func editKubeconfig(ctx context.Context, path string, create bool, edit func(*clientcmdapi.Config) bool) (warnings []string, err error) {
	path = filepath.Clean(path)
	target, err := resolveLinks(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	unguard, err := guardDir(filepath.Dir(path), kubeconfigLockWait)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: serialize with other kiln processes: %w", path, err)
	}
	defer unguard()
	warnings = sweepLeftovers(path, target)
	lockPath := path + ".lock"
	w, err := takeKubeconfigLock(lockPath)
	warnings = append(warnings, w...)
	if err != nil {
		return warnings, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	defer os.Remove(lockPath)
	engine.Checkpoint(ctx, "kubeconfig-locked")

	mode := os.FileMode(0o600)
	cfg, err := clientcmd.LoadFromFile(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !create {
			return warnings, nil
		}
		cfg = clientcmdapi.NewConfig()
	case err != nil:
		return warnings, fmt.Errorf("kubeconfig %s: %w", path, err)
	default:
		if fi, err := os.Stat(target); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	if !edit(cfg) {
		return warnings, nil
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return warnings, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := replaceFile(ctx, target, data, mode); err != nil {
		return warnings, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return warnings, nil
}

// resolveLinks follows path's symlinks (a dangling one too: the file is
// then created at its target).
func resolveLinks(path string) (string, error) {
	p := path
	for range 40 {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		link, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(p), link)
		}
		p = link
	}
	return "", fmt.Errorf("too many levels of symbolic links")
}

// tempPrefix names kiln's temp files next to a kubeconfig target.
func tempPrefix(target string) string { return "." + filepath.Base(target) + ".kiln-" }

// lockTempPrefix names the files kiln links to PATH.lock.
func lockTempPrefix(path string) string { return "." + filepath.Base(path) + ".lock.kiln-" }

// replaceFile writes data to a temp file next to target with mode, fsyncs
// it, renames it over target and fsyncs the directory.
func replaceFile(ctx context.Context, target string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(target), tempPrefix(target)+"*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	half := len(data) / 2
	if _, err := tmp.Write(data[:half]); err != nil {
		tmp.Close()
		return err
	}
	engine.Checkpoint(ctx, "kubeconfig-half-written")
	if _, err := tmp.Write(data[half:]); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	return syncDir(filepath.Dir(target))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil && !errors.Is(serr, os.ErrInvalid) {
		return serr
	}
	return cerr
}

// sweepLeftovers removes temp files a killed kiln left (only kiln's own
// names; called under the directory guard).
func sweepLeftovers(path, target string) []string {
	var warnings []string
	for _, pair := range [][2]string{{filepath.Dir(target), tempPrefix(target)}, {filepath.Dir(path), lockTempPrefix(path)}} {
		entries, err := os.ReadDir(pair[0])
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), pair[1]) && e.Type().IsRegular() {
				if os.Remove(filepath.Join(pair[0], e.Name())) == nil {
					warnings = append(warnings, fmt.Sprintf("removed %s left by a killed kiln", filepath.Join(pair[0], e.Name())))
				}
			}
		}
	}
	return warnings
}

// lockRecord is what kiln writes into PATH.lock.
func lockRecord() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("kiln pid=%d host=%s boot=%s start=%s\n", os.Getpid(), host, bootID(), processStart(os.Getpid()))
}

// takeKubeconfigLock creates lockPath exclusively with kiln's record,
// clearing a stale kiln lock and waiting while anyone else holds it.
func takeKubeconfigLock(lockPath string) (warnings []string, err error) {
	deadline := time.Now().Add(kubeconfigLockWait)
	for {
		tmp, err := os.CreateTemp(filepath.Dir(lockPath), lockTempPrefix(filepath.Join(filepath.Dir(lockPath), strings.TrimSuffix(filepath.Base(lockPath), ".lock")))+"*")
		if err != nil {
			return warnings, err
		}
		_, werr := tmp.WriteString(lockRecord())
		serr := tmp.Sync()
		cerr := tmp.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			os.Remove(tmp.Name())
			return warnings, err
		}
		// link(2) fails if lockPath exists: exclusive creation, and the
		// lock appears with its content already in it.
		lerr := os.Link(tmp.Name(), lockPath)
		os.Remove(tmp.Name())
		if lerr == nil {
			return warnings, nil
		}
		if !errors.Is(lerr, fs.ErrExist) {
			return warnings, lerr
		}
		data, rerr := os.ReadFile(lockPath)
		if errors.Is(rerr, fs.ErrNotExist) {
			continue // released meanwhile
		}
		if why, stale := staleKilnLock(string(data)); stale {
			if err := os.Remove(lockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return warnings, err
			}
			warnings = append(warnings, fmt.Sprintf("removed stale lock %s (%s)", lockPath, why))
			continue
		}
		if time.Now().After(deadline) {
			holder := "kubectl or another program (the file is empty)"
			if s := strings.TrimSpace(string(data)); s != "" {
				holder = s
			}
			return warnings, fmt.Errorf("%s is held by %s for more than %s; if no kubectl or kiln is writing this kubeconfig, remove %s",
				lockPath, holder, kubeconfigLockWait, lockPath)
		}
		time.Sleep(50 * time.Millisecond) // kubectl holds its lock for milliseconds and offers nothing to wait on
	}
}

// staleKilnLock reports whether a lock file's content is a kiln record of
// this host whose process is provably gone, and why.
func staleKilnLock(content string) (string, bool) {
	fields := strings.Fields(content)
	if len(fields) == 0 || fields[0] != "kiln" {
		return "", false
	}
	rec := map[string]string{}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			rec[k] = v
		}
	}
	host, _ := os.Hostname()
	pid, err := strconv.Atoi(rec["pid"])
	if rec["host"] != host || err != nil || pid <= 0 {
		return "", false
	}
	if boot := bootID(); boot != "" && rec["boot"] != "" && rec["boot"] != boot {
		return fmt.Sprintf("kiln pid %d ran before this host's last boot", pid), true
	}
	if pid == os.Getpid() {
		return "", false
	}
	if !processAlive(pid) {
		return fmt.Sprintf("kiln pid %d is not running", pid), true
	}
	if start := processStart(pid); start != "" && rec["start"] != "" && start != rec["start"] {
		return fmt.Sprintf("pid %d now belongs to another process", pid), true
	}
	return "", false
}
