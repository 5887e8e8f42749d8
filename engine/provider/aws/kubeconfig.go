package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
	// LockWait bounds the wait for the kubeconfig's lock (0:
	// DefaultKubeconfigLockWait).
	LockWait time.Duration
	// Hooks are test hooks (engine.Hooks) for the write's checkpoints
	// (kubeconfig-locked, kubeconfig-half-written); nil: none.
	Hooks engine.Hooks
}

// ContextName is the kubeconfig context (and cluster and user) name kiln
// writes for an aws cluster.
func ContextName(cluster string) string { return "kiln-aws-" + cluster }

// DefaultKubeconfigLockWait bounds how long kiln waits for a kubeconfig
// lock held by kubectl (which holds it for milliseconds) or another kiln;
// KubeconfigEntry.LockWait and Limits.KubeconfigLockWait set another bound.
const DefaultKubeconfigLockWait = 30 * time.Second

// WriteKubeconfig adds or updates the cluster, user and context of e in
// the kubeconfig at path (a file, or a list of files as in $KUBECONFIG),
// leaving every other entry as it was (see editKubeconfig for which file
// gets what and how it coexists with kubectl). The user entry holds
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
	return editKubeconfig(ctx, path, true, e.LockWait, e.Hooks, func(cfg *clientcmdapi.Config) bool {
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
// current-context naming the removed context is cleared. path is as for
// WriteKubeconfig; entries are removed from the file that defines them. A
// missing file is left missing. It reports whether anything was removed.
func RemoveKubeconfig(ctx context.Context, path, cluster string) (removed bool, warnings []string, err error) {
	return removeKubeconfig(ctx, path, cluster, 0, nil)
}

// removeKubeconfig is RemoveKubeconfig waiting up to lockWait for a lock
// (0: DefaultKubeconfigLockWait), reporting its checkpoints to hooks.
func removeKubeconfig(ctx context.Context, path, cluster string, lockWait time.Duration, hooks engine.Hooks) (removed bool, warnings []string, err error) {
	name := ContextName(cluster)
	warnings, err = editKubeconfig(ctx, path, false, lockWait, hooks, func(cfg *clientcmdapi.Config) bool {
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

// editKubeconfig applies edit to the kubeconfig at path — one file, or a
// list of them as in $KUBECONFIG — so that kubectl keeps working, before,
// during and after, even if kiln is killed.
//
// clientcmd does the kubeconfig semantics: the files are merged by its
// loading rules, and the edit goes back as clientcmd.ModifyConfig (kubectl
// config set-*/delete-*) writes it: an entry changes in the file that
// defines it; a new entry and a new current-context go to the file
// PathOptions.GetDefaultFilename picks (the first existing one, else the
// last); a cleared current-context is cleared in the first file that sets
// it; writers lock every file as FILE.lock, in sorted order. Files are
// read by clientcmd.LoadFromFile and serialized by clientcmd.Write.
//
// ModifyConfig itself is not called: with editKubeconfig reduced to it,
// three tests fail.
//
//   - TestKubeconfigKilledDuringWrite: it writes with os.WriteFile, which
//     truncates the file in place, and once per changed cluster, user and
//     context; killed inside a write it leaves a truncated file (14 of 40
//     SIGKILLs timed into writes of a 1.8 MB kubeconfig left it empty,
//     which kubectl reads as no contexts at all). kiln writes a temp file
//     next to the target, fsyncs it, renames it over the target.
//   - TestKubeconfigNeverRemovesALiveLock (a dead kiln's lock) and
//     TestKubeconfigKilledDuringWrite/kubeconfig-locked: its lock is an
//     empty FILE.lock, left behind by a killed process (35 of those 40
//     kills) and never cleared; the next write fails at once with "open
//     FILE.lock: file exists". kiln's lock says "kiln pid=… host=… boot=…
//     start=…", so a later kiln can prove it stale and remove it; an empty
//     (kubectl's), foreign or live lock is waited for, up to
//     lockWait, and never removed. Judging stale locks and
//     sweeping a killed kiln's temp files are serialized among kiln
//     processes by an flock on each file's directory (guardDir).
//   - TestWriteKubeconfigKeepsOtherEntries: for the same reason concurrent
//     writers fail instead of taking turns.
//
// A file is locked under its name as given (like kubectl: not a symlink's
// target) and written through its symlinks, keeping the target's mode
// (0600 for a new file). edit returns whether it changed anything; nothing
// is written otherwise. create says whether a missing default file may be
// created. lockWait bounds the wait for each lock (0:
// DefaultKubeconfigLockWait). Its checkpoints are reported to hooks (nil:
// none).
func editKubeconfig(ctx context.Context, path string, create bool, lockWait time.Duration, hooks engine.Hooks, edit func(*clientcmdapi.Config) bool) (warnings []string, err error) {
	if lockWait <= 0 {
		lockWait = DefaultKubeconfigLockWait
	}
	var files []string
	for _, f := range filepath.SplitList(path) {
		if f = filepath.Clean(f); !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	def := defaultFile(files)
	var locked, dirs []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil || (f == def && create) {
			locked = append(locked, f)
			if !slices.Contains(dirs, filepath.Dir(f)) {
				dirs = append(dirs, filepath.Dir(f))
			}
		}
	}
	if len(locked) == 0 {
		return nil, nil
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		unguard, err := guardDir(dir, lockWait)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: serialize with other kiln processes: %w", path, err)
		}
		defer unguard()
	}
	targets := map[string]string{}
	for _, f := range slices.Sorted(slices.Values(locked)) { // in ModifyConfig's order
		if targets[f], err = resolveLinks(f); err != nil {
			return warnings, fmt.Errorf("kubeconfig %s: %w", f, err)
		}
		warnings = append(warnings, sweepLeftovers(f, targets[f])...)
		w, err := takeKubeconfigLock(f, lockWait)
		warnings = append(warnings, w...)
		if err != nil {
			return warnings, fmt.Errorf("kubeconfig %s: %w", f, err)
		}
		defer os.Remove(f + ".lock")
	}
	engine.Checkpoint(ctx, hooks, "kubeconfig-locked")

	before, err := (&clientcmd.ClientConfigLoadingRules{Precedence: locked, DoNotResolvePaths: true}).Load()
	if err != nil {
		return warnings, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	after := before.DeepCopy()
	if !edit(after) {
		return warnings, nil
	}
	// Each file's own content, and which of them change.
	cfgs, changed := map[string]*clientcmdapi.Config{}, map[string]bool{}
	for _, f := range locked {
		cfg, err := clientcmd.LoadFromFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			cfg, err = clientcmdapi.NewConfig(), nil
		}
		if err != nil {
			return warnings, fmt.Errorf("kubeconfig %s: %w", f, err)
		}
		cfgs[f] = cfg
	}
	in := func(f string) *clientcmdapi.Config { changed[f] = true; return cfgs[f] }
	moveEntries(before.Clusters, after.Clusters, def, func(c *clientcmdapi.Cluster) string { return c.LocationOfOrigin }, func(f string) map[string]*clientcmdapi.Cluster { return in(f).Clusters })
	moveEntries(before.AuthInfos, after.AuthInfos, def, func(u *clientcmdapi.AuthInfo) string { return u.LocationOfOrigin }, func(f string) map[string]*clientcmdapi.AuthInfo { return in(f).AuthInfos })
	moveEntries(before.Contexts, after.Contexts, def, func(c *clientcmdapi.Context) string { return c.LocationOfOrigin }, func(f string) map[string]*clientcmdapi.Context { return in(f).Contexts })
	for k, c := range before.Contexts {
		if after.Contexts[k] == nil && cfgs[c.LocationOfOrigin].CurrentContext == k {
			in(c.LocationOfOrigin).CurrentContext = "" // no file names a context it lost
		}
	}
	if after.CurrentContext != before.CurrentContext {
		if after.CurrentContext != "" {
			in(def).CurrentContext = after.CurrentContext
		} else if i := slices.IndexFunc(locked, func(f string) bool { return cfgs[f].CurrentContext != "" }); i >= 0 {
			in(locked[i]).CurrentContext = ""
		}
	}
	for _, f := range files {
		if !changed[f] {
			continue
		}
		data, err := clientcmd.Write(*cfgs[f])
		if err != nil {
			return warnings, fmt.Errorf("kubeconfig %s: %w", f, err)
		}
		if err := replaceFile(ctx, targets[f], data, hooks); err != nil {
			return warnings, fmt.Errorf("kubeconfig %s: %w", f, err)
		}
	}
	return warnings, nil
}

// defaultFile is clientcmd's PathOptions.GetDefaultFilename for files:
// the only one, else the first that exists, else the last.
func defaultFile(files []string) string {
	for _, f := range files {
		if _, err := os.Stat(f); err == nil || len(files) == 1 {
			return f
		}
	}
	return files[len(files)-1]
}

// moveEntries applies the difference between before and after (one kind
// of entry of the merged kubeconfig) to the files, as ModifyConfig does:
// a changed entry goes to the file that defined it (def for a new one), a
// removed one is deleted from the file that defined it.
func moveEntries[T any](before, after map[string]*T, def string, origin func(*T) string, in func(file string) map[string]*T) {
	for k, v := range after {
		old, ok := before[k]
		if ok && reflect.DeepEqual(old, v) {
			continue
		}
		f := origin(v)
		switch {
		case f != "":
		case ok:
			f = origin(old)
		default:
			f = def
		}
		in(f)[k] = v
	}
	for k, v := range before {
		if _, ok := after[k]; !ok {
			delete(in(origin(v)), k)
		}
	}
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

// replaceFile writes data to a temp file next to target with target's
// mode (0600 for a new file), fsyncs it, renames it over target and fsyncs
// the directory: readers see the old file or the new one, never a partial
// one. The half-written file is a checkpoint for hooks (nil: none).
func replaceFile(ctx context.Context, target string, data []byte, hooks engine.Hooks) error {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(target); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return err
	}
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
	engine.Checkpoint(ctx, hooks, "kubeconfig-half-written")
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

// takeKubeconfigLock creates path.lock exclusively with kiln's record,
// clearing a stale kiln lock and waiting up to wait while anyone else
// holds it.
func takeKubeconfigLock(path string, wait time.Duration) (warnings []string, err error) {
	lockPath := path + ".lock"
	deadline := time.Now().Add(wait)
	for {
		tmp, err := os.CreateTemp(filepath.Dir(path), lockTempPrefix(path)+"*")
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
				lockPath, holder, wait, lockPath)
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
