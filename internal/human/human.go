// Package human words quantities for people, one way for every frontend:
// the wizard, headless text and the engine's messages show an age, a
// duration or a count alike.
package human

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// Age is an object's age as kubectl get shows it (45s, 7m30s, 5h30m, 3d4h):
// apimachinery's HumanDuration, kubectl's own. A negative age (clock skew)
// is 0s.
func Age(d time.Duration) string {
	if d < 0 {
		return "0s"
	}
	return duration.HumanDuration(d)
}

// Elapsed is how long a step took: milliseconds under a second, else
// rounded to a tenth of a second (1.3s, 2m5.1s).
func Elapsed(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(100 * time.Millisecond).String()
}

// Plural is the plural suffix "s" for n things, "" for one.
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
