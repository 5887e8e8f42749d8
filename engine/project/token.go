package project

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/kilnctl/kiln/engine/event"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A project token is an opaque bearer secret: 32 random bytes, base64url.
// It is not a JWT signed with the cluster key: the project's own Secret is
// the only place it is checked against, rotation must not depend on the
// operator's local token dir, and an opaque value leaks nothing if logged
// by the application. kiln never prints it; only its SHA-256 appears, as
// the pod template annotation kiln.dev/token-sha256.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate project token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// TokenHash is the hex SHA-256 of a token.
func TokenHash(token []byte) string {
	sum := sha256.Sum256(token)
	return hex.EncodeToString(sum[:])
}

func keyNumber(key string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(key, tokenKeyPrefix))
	return n
}

func nextKey(s *corev1.Secret) string {
	max := 0
	for k := range s.Data {
		if n := keyNumber(k); n > max {
			max = n
		}
	}
	return fmt.Sprintf("%s%d", tokenKeyPrefix, max+1)
}

// currentKey is the Secret key holding the token in force.
func (o *Ops) currentKey(s *corev1.Secret, r Ref) (string, error) {
	k := s.Annotations[AnnotationKey]
	if _, ok := s.Data[k]; k == "" || !ok {
		return "", fmt.Errorf("secret %s/%s: annotation %s names no key it holds (%q); the token is lost: run `%s`", s.Namespace, s.Name, AnnotationKey, k, o.command("rotate-token", r))
	}
	return k, nil
}

func (o *Ops) getSecret(ctx context.Context, r Ref) (*corev1.Secret, error) {
	s, err := o.Client.CoreV1().Secrets(r.Namespace()).Get(ctx, SecretName(r.Project), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", r.Namespace(), SecretName(r.Project), err)
	}
	return s, nil
}

// ensureSecret creates Secret P-auth with a first token when it is missing
// and returns the key in force and its token's hash. An existing Secret is
// never changed here: starting a project never rotates its token.
func (o *Ops) ensureSecret(ctx context.Context, r Ref) (key, hash string, err error) {
	s, err := o.getSecret(ctx, r)
	if err != nil {
		return "", "", err
	}
	if s == nil {
		tok, err := newToken()
		if err != nil {
			return "", "", err
		}
		key = tokenKeyPrefix + "1"
		obj := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: SecretName(r.Project), Namespace: r.Namespace(), Labels: o.labels(r),
				Annotations: map[string]string{AnnotationKey: key},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{key: []byte(tok)},
		}
		s, err = o.Client.CoreV1().Secrets(r.Namespace()).Create(ctx, obj, metav1.CreateOptions{FieldManager: "kiln"})
		if apierrors.IsAlreadyExists(err) {
			// Our create landed although its answer was lost, or another
			// start created it first: either way the stored Secret is
			// the one in force, and it is never changed here.
			s, err = o.getSecret(ctx, r)
			if err == nil && s == nil {
				err = fmt.Errorf("created, then not found")
			}
		}
		if err != nil {
			return "", "", fmt.Errorf("create secret %s/%s: %w", r.Namespace(), SecretName(r.Project), err)
		}
		o.R.Logf(event.LevelInfo, "secret %s/%s: new project token (sha256 %s)", r.Namespace(), SecretName(r.Project), TokenHash([]byte(tok))[:12])
	}
	key, err = o.currentKey(s, r)
	if err != nil {
		return "", "", err
	}
	o.R.Resource("Secret", r.Namespace(), s.Name, "Current", "token "+key)
	return key, TokenHash(s.Data[key]), nil
}

// updateSecret changes the Secret with its resourceVersion as precondition,
// re-reading and re-applying change on a conflict.
func (o *Ops) updateSecret(ctx context.Context, r Ref, change func(*corev1.Secret) error) (*corev1.Secret, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err := conflictBackoff(ctx, attempt); err != nil {
			return nil, err
		}
		s, err := o.getSecret(ctx, r)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, fmt.Errorf("secret %s/%s: not found", r.Namespace(), SecretName(r.Project))
		}
		upd := s.DeepCopy()
		if err := change(upd); err != nil {
			return nil, err
		}
		out, err := o.Client.CoreV1().Secrets(r.Namespace()).Update(ctx, upd, metav1.UpdateOptions{FieldManager: "kiln"})
		if apierrors.IsConflict(err) {
			// A retried update whose first answer was lost meets its own
			// landed write: a new token is random, so a Secret equal to
			// what we sent is ours. Applying change again would add a
			// second new token.
			cur, gerr := o.getSecret(ctx, r)
			if gerr != nil {
				return nil, gerr
			}
			if cur != nil && maps.EqualFunc(cur.Data, upd.Data, bytes.Equal) && maps.Equal(cur.Annotations, upd.Annotations) {
				return cur, nil
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("update secret %s/%s: %w", r.Namespace(), SecretName(r.Project), err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("update secret %s/%s: too many concurrent changes", r.Namespace(), SecretName(r.Project))
}

// recordToken records the Secret key in force and its token's hash as
// annotations of the spec ConfigMap, where a role that cannot read
// Secrets can compare them with the Deployment. It patches annotations
// only (never the spec data, whose revision counts operations) and only
// when they change.
func (o *Ops) recordToken(ctx context.Context, r Ref, key, hash string) error {
	cms := o.Client.CoreV1().ConfigMaps(r.Namespace())
	cm, err := cms.Get(ctx, SpecName(r.Project), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile: nothing to record on
	}
	if err != nil {
		return fmt.Errorf("get configmap %s/%s: %w", r.Namespace(), SpecName(r.Project), err)
	}
	if cm.Annotations[AnnotationSpecKey] == key && cm.Annotations[AnnotationToken] == hash {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		AnnotationSpecKey: key, AnnotationToken: hash,
	}}})
	if err != nil {
		return err
	}
	if _, err := cms.Patch(ctx, cm.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kiln"}); err != nil {
		return fmt.Errorf("record token in force on configmap %s/%s: %w", r.Namespace(), SpecName(r.Project), err)
	}
	return nil
}

// keepOnly makes key the token in force, removes every other key and
// records key on the spec ConfigMap.
func (o *Ops) keepOnly(ctx context.Context, r Ref, key string) error {
	s, err := o.updateSecret(ctx, r, func(s *corev1.Secret) error {
		if _, ok := s.Data[key]; !ok {
			return fmt.Errorf("secret %s/%s: key %s missing", s.Namespace, s.Name, key)
		}
		for k := range s.Data {
			if k != key {
				delete(s.Data, k)
			}
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[AnnotationKey] = key
		return nil
	})
	if err != nil {
		return err
	}
	return o.recordToken(ctx, r, key, TokenHash(s.Data[key]))
}

// deploymentTokenKey is the Secret key the Deployment's pods read the token
// from: the key its token volume mounts ("" when it mounts none).
func deploymentTokenKey(d *appsv1.Deployment) string {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == tokenVolume && v.Secret != nil && len(v.Secret.Items) == 1 {
			return v.Secret.Items[0].Key
		}
	}
	return ""
}
