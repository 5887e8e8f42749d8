package platform

import (
	"strconv"
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// Versions recorded on kiln-config (annotations, so config.yaml stays what
// the config decoder reads): the kiln version and the platform schema
// version that last installed or upgraded the platform.
const (
	AnnotationVersion = "kiln.dev/version"
	AnnotationSchema  = "kiln.dev/schema-version"
	// SchemaVersion is the platform schema this kiln installs: the set and
	// shape of the objects of DESIGN.md §5. A kiln refuses to change a
	// platform whose schema is newer than its own.
	SchemaVersion = 1
)

// Stamp records kilnVersion and SchemaVersion on a kiln-config object
// made by ConfigObject.
func Stamp(obj Object, kilnVersion string) Object {
	if cm, ok := obj.Apply.(*corev1ac.ConfigMapApplyConfiguration); ok {
		cm.WithAnnotations(map[string]string{
			AnnotationVersion: kilnVersion,
			AnnotationSchema:  strconv.Itoa(SchemaVersion),
		})
	}
	return obj
}

// Newer reports whether a platform recorded as (version, schema) is newer
// than this kiln (ours, SchemaVersion): its schema is higher, or both
// versions are release versions (vMAJOR.MINOR.PATCH) and its is higher. A
// platform without a record (installed before versions were recorded) is
// never newer.
func Newer(version string, schema int, ours string) bool {
	if schema > SchemaVersion {
		return true
	}
	if schema < SchemaVersion {
		return false
	}
	a, aok := release(version)
	b, bok := release(ours)
	if !aok || !bok {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

// release parses vMAJOR.MINOR.PATCH (a leading v optional, anything
// after - or + ignored).
func release(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
