package aws

// An independent check of kiln's EKS tokens against every rule the EKS
// authenticator (kubernetes-sigs/aws-iam-authenticator, pkg/token, Verify)
// applies before it replays the URL to STS, plus the SigV4 signature that
// STS itself recomputes. Written from the rules, not from that code.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// eksVerifier holds what the authenticator of one cluster knows.
type eksVerifier struct {
	cluster string
	// partition is the AWS partition of the cluster (aws, aws-cn, aws-us-gov).
	partition string
	// endpoint, when set, is a custom STS endpoint the authenticator is
	// configured with; the URL must then be on its scheme and host.
	endpoint *url.URL
	// secrets maps access key id to secret key: what STS knows.
	secrets map[string]string
	now     time.Time
}

// The query parameters the authenticator accepts (compared lower-case).
var allowedParams = map[string]bool{
	"action": true, "version": true, "x-amz-algorithm": true, "x-amz-credential": true,
	"x-amz-date": true, "x-amz-expires": true, "x-amz-security-token": true,
	"x-amz-signature": true, "x-amz-signedheaders": true,
}

// stsHosts are the STS hostnames of each partition: the global endpoint
// and the regional (and FIPS) ones.
var stsHosts = map[string]*regexp.Regexp{
	"aws":        regexp.MustCompile(`^sts(-fips)?(\.(us|eu|ap|sa|ca|me|af|il|mx)-[a-z]+-[0-9])?\.amazonaws\.com$`),
	"aws-cn":     regexp.MustCompile(`^sts\.cn-[a-z]+-[0-9]\.amazonaws\.com\.cn$`),
	"aws-us-gov": regexp.MustCompile(`^sts(-fips)?\.us-gov-[a-z]+-[0-9]\.amazonaws\.com$`),
}

const maxEKSTokenLen = 4096

func (v eksVerifier) verify(token string) error {
	if len(token) > maxEKSTokenLen {
		return errors.New("size: token longer than 4096 bytes")
	}
	if !strings.HasPrefix(token, TokenPrefix) {
		return errors.New("prefix: no k8s-aws-v1. prefix")
	}
	raw, err := base64.RawURLEncoding.DecodeString(token[len(TokenPrefix):])
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if v.endpoint != nil {
		if u.Scheme != v.endpoint.Scheme || u.Host != v.endpoint.Host {
			return fmt.Errorf("host: %s://%s is not the configured endpoint %s", u.Scheme, u.Host, v.endpoint)
		}
	} else {
		if u.Scheme != "https" {
			return fmt.Errorf("scheme: %q, want https", u.Scheme)
		}
		re := stsHosts[v.partition]
		if re == nil || !re.MatchString(u.Host) {
			return fmt.Errorf("host: %q is not an STS host of partition %s", u.Host, v.partition)
		}
	}
	if u.Path != "/" {
		return fmt.Errorf("path: %q, want /", u.Path)
	}
	params, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	lower := map[string]string{}
	for k, vals := range params {
		if !allowedParams[strings.ToLower(k)] {
			return fmt.Errorf("query: parameter %q is not allowed", k)
		}
		if len(vals) != 1 {
			return fmt.Errorf("query: parameter %q has %d values", k, len(vals))
		}
		lower[strings.ToLower(k)] = vals[0]
	}
	if lower["action"] != "GetCallerIdentity" {
		return fmt.Errorf("action: %q", lower["action"])
	}
	signed := strings.Split(lower["x-amz-signedheaders"], ";")
	if !containsFold(signed, ClusterIDHeader) {
		return fmt.Errorf("signed headers: %s is not signed (%q)", ClusterIDHeader, lower["x-amz-signedheaders"])
	}
	expires, err := strconv.Atoi(lower["x-amz-expires"])
	if _, present := lower["x-amz-expires"]; !present || err != nil || expires < 0 || expires > 900 {
		return fmt.Errorf("X-Amz-Expires: %q is missing or not in 0..900", lower["x-amz-expires"])
	}
	date, err := time.Parse("20060102T150405Z", lower["x-amz-date"])
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %q: %w", lower["x-amz-date"], err)
	}
	if d := v.now.Sub(date); d > 15*time.Minute || d < -15*time.Minute {
		return fmt.Errorf("X-Amz-Date: %s is %s from now, more than 15 minutes", date, d)
	}
	return v.checkSignature(u, params, lower, signed, date)
}

// checkSignature recomputes the SigV4 query signature as STS does, with
// the x-k8s-aws-id header the authenticator sends (its own cluster id).
func (v eksVerifier) checkSignature(u *url.URL, params url.Values, lower map[string]string, signed []string, date time.Time) error {
	if lower["x-amz-algorithm"] != "AWS4-HMAC-SHA256" {
		return fmt.Errorf("signature: algorithm %q", lower["x-amz-algorithm"])
	}
	scope := strings.Split(lower["x-amz-credential"], "/")
	if len(scope) != 5 || scope[3] != "sts" || scope[4] != "aws4_request" || scope[1] != date.Format("20060102") {
		return fmt.Errorf("signature: credential scope %q", lower["x-amz-credential"])
	}
	secret, ok := v.secrets[scope[0]]
	if !ok {
		return fmt.Errorf("signature: unknown access key %s", scope[0])
	}
	var keys []string
	for k := range params {
		if k != "X-Amz-Signature" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var q []string
	for _, k := range keys {
		q = append(q, uriEncode(k)+"="+uriEncode(params.Get(k)))
	}
	headers := map[string]string{"host": u.Host, ClusterIDHeader: v.cluster}
	sort.Strings(signed)
	var canonHeaders strings.Builder
	for _, h := range signed {
		val, ok := headers[strings.ToLower(h)]
		if !ok {
			return fmt.Errorf("signature: signed header %q is not one the authenticator sends", h)
		}
		fmt.Fprintf(&canonHeaders, "%s:%s\n", strings.ToLower(h), strings.TrimSpace(val))
	}
	emptyHash := sha256.Sum256(nil)
	canonical := strings.Join([]string{
		"GET", "/", strings.Join(q, "&"), canonHeaders.String(), strings.Join(signed, ";"), hex.EncodeToString(emptyHash[:]),
	}, "\n")
	crHash := sha256.Sum256([]byte(canonical))
	toSign := strings.Join([]string{
		"AWS4-HMAC-SHA256", lower["x-amz-date"], strings.Join(scope[1:], "/"), hex.EncodeToString(crHash[:]),
	}, "\n")
	key := []byte("AWS4" + secret)
	for _, part := range scope[1:] {
		key = hmacSHA256(key, part)
	}
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(lower["x-amz-signature"])) {
		return errors.New("signature: does not verify")
	}
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// uriEncode is SigV4's encoding: unreserved characters as they are,
// everything else %XX (upper case).
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

const (
	testAKID   = "AKIAKILNTEST0000000"
	testSecret = "kilnTestSecretKey/ForEKSTokenVerification"
)

// offlineConfig is an AWS configuration without a custom endpoint: the
// presigned URL is the one real AWS would get (presigning needs no network).
func offlineConfig(region string) aws.Config {
	return aws.Config{
		Region: region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, Source: "test"}, nil
		}),
	}
}

// presignRaw presigns a GetCallerIdentity the way kiln did before it sent
// X-Amz-Expires (and optionally without the cluster header): the tokens
// the verifier must refuse.
func presignRaw(t *testing.T, cfg aws.Config, cluster string, withExpires bool) string {
	t.Helper()
	req, err := sts.NewPresignClient(sts.NewFromConfig(cfg)).PresignGetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{},
		func(o *sts.PresignOptions) {
			o.ClientOptions = append(o.ClientOptions, func(so *sts.Options) {
				if cluster != "" {
					so.APIOptions = append(so.APIOptions, smithyhttp.AddHeaderValue(ClusterIDHeader, cluster))
				}
				if withExpires {
					so.APIOptions = append(so.APIOptions, addExpires)
				}
			})
		})
	if err != nil {
		t.Fatal(err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL))
}

// rewrite decodes a token, lets edit change its URL, and encodes it again.
func rewrite(t *testing.T, token string, edit func(u *url.URL, q url.Values)) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, TokenPrefix))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	edit(u, q)
	u.RawQuery = q.Encode()
	return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(u.String()))
}

func TestEKSTokenPassesEveryAuthenticatorRule(t *testing.T) {
	ctx := context.Background()
	v := eksVerifier{cluster: "dev1", partition: "aws", secrets: map[string]string{testAKID: testSecret}, now: time.Now()}
	for _, region := range []string{"eu-west-1", "us-east-1", "ap-northeast-1"} {
		tok, err := NewToken(ctx, offlineConfig(region), "dev1")
		if err != nil {
			t.Fatal(err)
		}
		if err := v.verify(tok.Value); err != nil {
			t.Errorf("%s: kiln's token is refused: %v", region, err)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok.Value, TokenPrefix))
		u, _ := url.Parse(string(raw))
		if got := u.Query().Get("X-Amz-Expires"); got != "60" {
			t.Errorf("%s: X-Amz-Expires = %q, want 60", region, got)
		}
		if u.Host != "sts."+region+".amazonaws.com" {
			t.Errorf("%s: host %s, want the regional STS endpoint", region, u.Host)
		}
	}

	good, err := NewToken(ctx, offlineConfig("eu-west-1"), "dev1")
	if err != nil {
		t.Fatal(err)
	}
	otherCluster := v
	otherCluster.cluster = "dev2"
	later := v
	later.now = v.now.Add(16 * time.Minute)
	cn := v
	cn.partition = "aws-cn"
	for _, tc := range []struct {
		name, token, rule string
		v                 eksVerifier
	}{
		{"without X-Amz-Expires (kiln before this fix)", presignRaw(t, offlineConfig("eu-west-1"), "dev1", false), "X-Amz-Expires", v},
		{"X-Amz-Expires above 900", rewrite(t, good.Value, func(_ *url.URL, q url.Values) { q.Set("X-Amz-Expires", "901") }), "X-Amz-Expires", v},
		{"X-Amz-Expires negative", rewrite(t, good.Value, func(_ *url.URL, q url.Values) { q.Set("X-Amz-Expires", "-1") }), "X-Amz-Expires", v},
		{"cluster header not signed", presignRaw(t, offlineConfig("eu-west-1"), "", true), "signed headers", v},
		{"http", rewrite(t, good.Value, func(u *url.URL, _ url.Values) { u.Scheme = "http" }), "scheme", v},
		{"not an STS host", rewrite(t, good.Value, func(u *url.URL, _ url.Values) { u.Host = "sts.eu-west-1.evil.example" }), "host", v},
		{"host of another partition", good.Value, "host", cn},
		{"path", rewrite(t, good.Value, func(u *url.URL, _ url.Values) { u.Path = "/other" }), "path", v},
		{"extra parameter", rewrite(t, good.Value, func(_ *url.URL, q url.Values) { q.Set("Foo", "bar") }), "not allowed", v},
		{"parameter twice", rewrite(t, good.Value, func(_ *url.URL, q url.Values) { q.Add("Version", "2011-06-15") }), "values", v},
		{"other action", rewrite(t, good.Value, func(_ *url.URL, q url.Values) { q.Set("Action", "AssumeRole") }), "action", v},
		{"no date", rewrite(t, good.Value, func(_ *url.URL, q url.Values) { q.Del("X-Amz-Date") }), "X-Amz-Date", v},
		{"expired", good.Value, "X-Amz-Date", later},
		{"another cluster", good.Value, "signature", otherCluster},
		{"tampered signature", rewrite(t, good.Value, func(_ *url.URL, q url.Values) {
			s := []byte(q.Get("X-Amz-Signature"))
			s[0] ^= 1
			q.Set("X-Amz-Signature", string(s))
		}), "signature", v},
		{"signed expiry changed", rewrite(t, good.Value, func(_ *url.URL, q url.Values) { q.Set("X-Amz-Expires", "900") }), "signature", v},
		{"prefix", strings.TrimPrefix(good.Value, TokenPrefix), "prefix", v},
		{"encoding", TokenPrefix + "%%%", "encoding", v},
		{"too long", TokenPrefix + strings.Repeat("A", maxEKSTokenLen), "size", v},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.v.verify(tc.token)
			if err == nil || !strings.Contains(err.Error(), tc.rule) {
				t.Fatalf("want refusal by the %s rule, got %v", tc.rule, err)
			}
		})
	}
}

// TestEKSTokenAgainstACustomEndpoint: with AWS_ENDPOINT_URL (an emulator)
// the URL is on that endpoint; an authenticator configured with it accepts
// the token, one with the partition's hosts refuses it.
func TestEKSTokenAgainstACustomEndpoint(t *testing.T) {
	e := emulator(t)
	ctx := context.Background()
	cfg, err := e.Config(ctx, "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := NewToken(ctx, cfg, "dev1")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := url.Parse(aws.ToString(cfg.BaseEndpoint))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := eksVerifier{cluster: "dev1", partition: "aws", endpoint: ep, secrets: map[string]string{creds.AccessKeyID: creds.SecretAccessKey}, now: time.Now()}
	if err := v.verify(tok.Value); err != nil {
		t.Errorf("token for the configured endpoint refused: %v", err)
	}
	v.endpoint = nil
	if err := v.verify(tok.Value); err == nil {
		t.Error("a token for a non-AWS host passed the partition's host rule")
	}
}
