package aws

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/kubeapi"
)

// TokenPrefix starts every EKS bearer token.
const TokenPrefix = "k8s-aws-v1."

// ClusterIDHeader binds a token to one cluster: it is signed into the
// presigned request, so the token is useless for any other cluster.
const ClusterIDHeader = "x-k8s-aws-id"

// tokenLifetime is how long EKS accepts a token (the presigned URL's 15
// minutes); kiln reports one minute less so clients refresh in time.
const tokenLifetime = 14 * time.Minute

// presignExpires is the X-Amz-Expires of the presigned URL, in seconds. The
// EKS authenticator rejects a token whose X-Amz-Expires is missing or
// outside 0..900; STS ignores the value (a presigned GetCallerIdentity is
// good for 15 minutes after X-Amz-Date whatever it says), so kiln sends
// the 60 that aws-iam-authenticator and the AWS CLI send.
const presignExpires = 60

// Token is an EKS bearer token and when it stops being accepted.
type Token struct {
	Value      string
	Expiration time.Time
}

// NewToken produces an EKS bearer token the way aws-iam-authenticator does:
// an STS GetCallerIdentity request presigned (SigV4, query string) with the
// x-k8s-aws-id header naming the cluster, base64url-encoded without padding
// after the k8s-aws-v1. prefix. EKS replays the URL to learn who is calling.
func NewToken(ctx context.Context, cfg aws.Config, cluster string) (Token, error) {
	now := time.Now()
	presigner := sts.NewPresignClient(sts.NewFromConfig(cfg))
	req, err := presigner.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(o *sts.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, func(so *sts.Options) {
			so.APIOptions = append(so.APIOptions, smithyhttp.AddHeaderValue(ClusterIDHeader, cluster), addExpires)
		})
	})
	if err != nil {
		return Token{}, fmt.Errorf("presign sts GetCallerIdentity for cluster %s in %s: %w", cluster, cfg.Region, err)
	}
	return Token{
		Value:      TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)),
		Expiration: now.Add(tokenLifetime),
	}, nil
}

// addExpires puts X-Amz-Expires into the query before the request is
// signed (the build step runs before the presigner's finalize step), so the
// signature covers it. The SDK's SigV4 presigner adds no expiry for STS.
func addExpires(stack *middleware.Stack) error {
	return stack.Build.Add(middleware.BuildMiddlewareFunc("kilnPresignExpires",
		func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok {
				q := req.URL.Query()
				q.Set("X-Amz-Expires", strconv.Itoa(presignExpires))
				req.URL.RawQuery = q.Encode()
			}
			return next.HandleBuild(ctx, in)
		}), middleware.After)
}

// ExecCredential renders a token as the client.authentication.k8s.io
// ExecCredential a kubeconfig exec plugin prints.
func ExecCredential(t Token) ([]byte, error) {
	v := map[string]any{
		"kind":       "ExecCredential",
		"apiVersion": "client.authentication.k8s.io/v1beta1",
		"spec":       map[string]any{},
		"status": map[string]any{
			"token":               t.Value,
			"expirationTimestamp": t.Expiration.UTC().Format(time.RFC3339),
		},
	}
	return json.Marshal(v)
}

// kubeClient reaches the EKS cluster's Kubernetes API: through the mapped
// override when KubeOverride is set, else at the cluster's
// endpoint with its CA and a kiln-generated token (refreshed before it
// expires).
func (p *Provider) kubeClient(ctx context.Context, cfg aws.Config, c *ekstypes.Cluster) (*rest.Config, kubernetes.Interface, error) {
	if p.KubeOverride != nil {
		return p.KubeOverride()
	}
	name := aws.ToString(c.Name)
	if c.Endpoint == nil || c.CertificateAuthority == nil || c.CertificateAuthority.Data == nil {
		return nil, nil, fmt.Errorf("EKS cluster %s has no endpoint or CA yet", name)
	}
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(c.CertificateAuthority.Data))
	if err != nil {
		return nil, nil, fmt.Errorf("EKS cluster %s: CA data: %w", name, err)
	}
	src := &tokenSource{cfg: cfg, cluster: name}
	rc := &rest.Config{
		Host:            aws.ToString(c.Endpoint),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		QPS:             50, Burst: 100, UserAgent: "kiln",
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return &bearer{src: src, next: rt}
		},
	}
	kubeapi.Wrap(rc) // outside the bearer wrapper: each retry carries a fresh token
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, input.New(failure.Failed, input.KubeContextOverride, name, "EKS cluster %s at %s: %v (an emulator's cluster has no real API server: map it to a kubeconfig context with {input} or %s)",
			name, rc.Host, err, KubeContextEnv)
	}
	return rc, cs, nil
}

// tokenSource caches a token until shortly before it expires.
type tokenSource struct {
	cfg     aws.Config
	cluster string
	mu      sync.Mutex
	tok     Token
}

func (s *tokenSource) token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok.Value == "" || time.Until(s.tok.Expiration) < 2*time.Minute {
		t, err := NewToken(ctx, s.cfg, s.cluster)
		if err != nil {
			return "", err
		}
		s.tok = t
	}
	return s.tok.Value, nil
}

type bearer struct {
	src  *tokenSource
	next http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := b.src.token(req.Context())
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return b.next.RoundTrip(req)
}
