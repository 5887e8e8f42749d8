package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Discovery runs a context's exec credential plugin itself rather than
// through client-go: client-go's exec authenticator takes no context, so
// nothing would bound a plugin that hangs on an expired SSO session, and it
// hands the plugin the terminal. Here the plugin runs with a deadline, in
// its own process group (killed whole when abandoned), with stdin closed
// and spec.interactive=false.

// pluginError is a credential plugin outcome put plainly. It never holds
// the plugin's stdout (that is where the credential is).
type pluginError struct {
	cause      string
	needsLogin bool
}

func (e *pluginError) Error() string { return e.cause }

// credential is what an ExecCredential's status carries.
type credential struct {
	token     string
	cert, key []byte
	expires   time.Time
}

// clusterInfo is spec.cluster of KUBERNETES_EXEC_INFO (provideClusterInfo).
type clusterInfo struct {
	Server                   string `json:"server"`
	TLSServerName            string `json:"tls-server-name,omitempty"`
	InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify,omitempty"`
	CertificateAuthorityData string `json:"certificate-authority-data,omitempty"`
	ProxyURL                 string `json:"proxy-url,omitempty"`
}

func newClusterInfo(c *clientcmdapi.Cluster) *clusterInfo {
	if c == nil {
		return nil
	}
	ca := c.CertificateAuthorityData
	if len(ca) == 0 && c.CertificateAuthority != "" {
		ca, _ = os.ReadFile(c.CertificateAuthority)
	}
	ci := &clusterInfo{Server: c.Server, TLSServerName: c.TLSServerName, InsecureSkipTLSVerify: c.InsecureSkipTLSVerify, ProxyURL: c.ProxyURL}
	if len(ca) > 0 {
		ci.CertificateAuthorityData = base64.StdEncoding.EncodeToString(ca)
	}
	return ci
}

// pluginName is how messages name a plugin: its command's base name.
func pluginName(ec *clientcmdapi.ExecConfig) string {
	return filepath.Base(ec.Command)
}

// loginHint matches what credential plugins print when they need a person:
// an expired SSO session, a device code, a browser, a refused prompt.
var loginHint = regexp.MustCompile(`(?i)interactive|log ?in\b|login|browser|device code|reauth|sso|expired|prompt|tty|terminal|stdin`)

// runPlugin runs ec once, non-interactively, until ctx ends; bound is only
// for the message ("did not answer within 5s").
func runPlugin(ctx context.Context, ec *clientcmdapi.ExecConfig, cluster *clusterInfo, bound time.Duration) (*credential, error) {
	name := pluginName(ec)
	if ec.InteractiveMode == clientcmdapi.AlwaysExecInteractiveMode {
		return nil, &pluginError{needsLogin: true,
			cause: fmt.Sprintf("needs login (credential plugin `%s` always asks for a terminal; run kubectl against it once)", name)}
	}
	switch ec.APIVersion {
	case "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1":
	default:
		return nil, &pluginError{cause: fmt.Sprintf("credential plugin `%s`: the kubeconfig names apiVersion %q; kiln speaks client.authentication.k8s.io/v1 and v1beta1", name, ec.APIVersion)}
	}
	info := map[string]any{"apiVersion": ec.APIVersion, "kind": "ExecCredential", "spec": map[string]any{"interactive": false}}
	if ec.ProvideClusterInfo && cluster != nil {
		info["spec"] = map[string]any{"interactive": false, "cluster": cluster}
	}
	infoJSON, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("credential plugin `%s`: %w", name, err)
	}
	cmd := exec.CommandContext(ctx, ec.Command, ec.Args...)
	cmd.Env = os.Environ()
	for _, v := range ec.Env {
		cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
	}
	cmd.Env = append(cmd.Env, "KUBERNETES_EXEC_INFO="+string(infoJSON))
	cmd.Stdin = nil // /dev/null: nothing to answer a prompt with
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &limited{w: &stderr, n: 64 << 10}
	killGroupOnCancel(cmd)
	cmd.WaitDelay = 500 * time.Millisecond
	err = cmd.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return nil, &pluginError{cause: fmt.Sprintf("credential plugin `%s` did not answer within %s", name, bound)}
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		msg := fmt.Sprintf("credential plugin `%s` is not installed", name)
		if ec.InstallHint != "" {
			msg += ": " + firstLine(ec.InstallHint)
		}
		return nil, &pluginError{cause: msg}
	case err != nil:
		line := firstLine(stderr.String())
		if loginHint.MatchString(stderr.String()) {
			cause := "needs login (run kubectl against it once)"
			if line != "" {
				cause += fmt.Sprintf("; credential plugin `%s` said: %s", name, line)
			}
			return nil, &pluginError{needsLogin: true, cause: cause}
		}
		cause := fmt.Sprintf("credential plugin `%s` failed (%v)", name, exitStatus(err))
		if line != "" {
			cause += ": " + line
		}
		return nil, &pluginError{cause: cause}
	}
	return parseCredential(stdout.Bytes(), ec.APIVersion, name)
}

func parseCredential(out []byte, apiVersion, name string) (*credential, error) {
	var ecred struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Status     *struct {
			ExpirationTimestamp   *time.Time `json:"expirationTimestamp"`
			Token                 string     `json:"token"`
			ClientCertificateData string     `json:"clientCertificateData"`
			ClientKeyData         string     `json:"clientKeyData"`
		} `json:"status"`
	}
	// The output holds the credential: errors name what is wrong, never
	// quote it.
	if err := json.Unmarshal(out, &ecred); err != nil {
		return nil, &pluginError{cause: fmt.Sprintf("credential plugin `%s` printed something that is not an ExecCredential", name)}
	}
	switch {
	case ecred.Kind != "ExecCredential" || ecred.APIVersion != apiVersion:
		return nil, &pluginError{cause: fmt.Sprintf("credential plugin `%s` answered %s %s; the kubeconfig asks for ExecCredential %s", name, ecred.APIVersion, ecred.Kind, apiVersion)}
	case ecred.Status == nil:
		return nil, &pluginError{cause: fmt.Sprintf("credential plugin `%s` answered without a status", name)}
	}
	st := ecred.Status
	c := &credential{token: st.Token}
	if st.ExpirationTimestamp != nil {
		c.expires = *st.ExpirationTimestamp
	}
	if st.ClientCertificateData != "" || st.ClientKeyData != "" {
		if st.ClientCertificateData == "" || st.ClientKeyData == "" {
			return nil, &pluginError{cause: fmt.Sprintf("credential plugin `%s` answered a client certificate without its key (or a key without its certificate)", name)}
		}
		c.cert, c.key = []byte(st.ClientCertificateData), []byte(st.ClientKeyData)
	}
	if c.token == "" && c.cert == nil {
		return nil, &pluginError{cause: fmt.Sprintf("credential plugin `%s` answered no token and no client certificate", name)}
	}
	return c, nil
}

// secretLike matches long runs of token characters: a plugin's error line
// is shown, but never what looks like a credential inside it.
var secretLike = regexp.MustCompile(`[A-Za-z0-9_\-.+/=]{40,}`)

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			l = secretLike.ReplaceAllString(l, "[redacted]")
			if len(l) > 200 {
				l = l[:200] + "…"
			}
			return l
		}
	}
	return ""
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Sprintf("exit %d", ee.ExitCode())
	}
	return err.Error()
}

// limited writes at most n bytes to w and drops the rest.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// execAuth is a context's exec credential, run by kiln: cached until it
// expires or the server rejects it, each run bounded.
type execAuth struct {
	ec      *clientcmdapi.ExecConfig
	cluster *clusterInfo
	bound   time.Duration

	mu   sync.Mutex
	cred *credential
}

// get returns a valid credential, running the plugin when there is none.
func (a *execAuth) get(ctx context.Context) (*credential, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.cred; c != nil && (c.expires.IsZero() || time.Until(c.expires) > 10*time.Second) {
		return c, nil
	}
	rctx, cancel := context.WithTimeout(ctx, a.bound)
	defer cancel()
	c, err := runPlugin(rctx, a.ec, a.cluster, a.bound)
	if err != nil {
		return nil, err
	}
	a.cred = c
	return c, nil
}

// forget drops c after the server rejected it, so the next request runs
// the plugin again.
func (a *execAuth) forget(c *credential) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cred == c {
		a.cred = nil
	}
}

// bearer adds the plugin's token to each request.
type bearer struct {
	auth *execAuth
	next http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return b.next.RoundTrip(req)
	}
	c, err := b.auth.get(req.Context())
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := b.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		b.auth.forget(c)
	}
	return resp, err
}
