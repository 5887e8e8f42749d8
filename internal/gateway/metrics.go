package gateway

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Metric names (Prometheus text exposition format 0.0.4). Written by hand:
// four series do not justify client_golang and its dependencies in every
// kiln binary.
const (
	metricRequests = "kiln_gateway_requests_total"
	metricDuration = "kiln_gateway_request_duration_seconds"
	metricReloads  = "kiln_gateway_key_reloads_total"
	metricKeys     = "kiln_gateway_trusted_keys"
	metricLimited  = "kiln_gateway_tenant_limited_total"
	metricKeysOK   = "kiln_gateway_keys_file_ok"
	metricDropped  = "kiln_gateway_log_dropped_lines_total"
)

// durationBuckets are the latency histogram's upper bounds in seconds.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

type requestKey struct {
	tenant string
	code   int
}

type metrics struct {
	mu       sync.Mutex
	requests map[requestKey]uint64
	buckets  []uint64 // cumulative counts are computed on output
	count    uint64
	sum      float64
	reloads  map[string]uint64
	keys     int
	limits   map[string]uint64 // per verified tenant
	keysOK   bool
	// logDropped counts the log lines dropped (logBuffer.Dropped).
	logDropped func() uint64
}

func newMetrics() *metrics {
	return &metrics{
		requests: map[requestKey]uint64{},
		buckets:  make([]uint64, len(durationBuckets)),
		reloads:  map[string]uint64{"success": 0, "failure": 0},
		limits:   map[string]uint64{},
	}
}

// limited counts a request refused because its (verified) tenant had
// too many in flight.
func (m *metrics) limited(tenant string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.limits[tenant]++
}

// request records one finished request. tenant is the verified token's
// tenant, never a name taken from the request: label values an anonymous
// caller could choose would let anyone grow the series without bound.
func (m *metrics) request(tenant string, code int, d time.Duration) {
	s := d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[requestKey{tenant, code}]++
	m.count++
	m.sum += s
	for i, b := range durationBuckets {
		if s <= b {
			m.buckets[i]++
			break
		}
	}
}

// keyReload records a reload; keys < 0 leaves the gauge as it was.
func (m *metrics) keyReload(ok bool, keys int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.reloads["success"]++
	} else {
		m.reloads["failure"]++
	}
	m.keysOK = ok
	if keys >= 0 {
		m.keys = keys
	}
}

func (m *metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.write(w)
}

func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s Requests the gateway answered, by the verified token's tenant (empty when none verified) and HTTP status code.\n", metricRequests)
	fmt.Fprintf(&b, "# TYPE %s counter\n", metricRequests)
	keys := make([]requestKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].tenant != keys[j].tenant {
			return keys[i].tenant < keys[j].tenant
		}
		return keys[i].code < keys[j].code
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "%s{tenant=\"%s\",code=\"%d\"} %d\n", metricRequests, escapeLabel(k.tenant), k.code, m.requests[k])
	}
	fmt.Fprintf(&b, "# HELP %s Time from request to the end of the response.\n", metricDuration)
	fmt.Fprintf(&b, "# TYPE %s histogram\n", metricDuration)
	var cum uint64
	for i, le := range durationBuckets {
		cum += m.buckets[i]
		fmt.Fprintf(&b, "%s_bucket{le=\"%s\"} %d\n", metricDuration, strconv.FormatFloat(le, 'g', -1, 64), cum)
	}
	fmt.Fprintf(&b, "%s_bucket{le=\"+Inf\"} %d\n", metricDuration, m.count)
	fmt.Fprintf(&b, "%s_sum %s\n", metricDuration, strconv.FormatFloat(m.sum, 'g', -1, 64))
	fmt.Fprintf(&b, "%s_count %d\n", metricDuration, m.count)
	fmt.Fprintf(&b, "# HELP %s Reloads of keys.json, by result.\n", metricReloads)
	fmt.Fprintf(&b, "# TYPE %s counter\n", metricReloads)
	for _, r := range []string{"failure", "success"} {
		fmt.Fprintf(&b, "%s{result=\"%s\"} %d\n", metricReloads, r, m.reloads[r])
	}
	fmt.Fprintf(&b, "# HELP %s Keys in the key set in force.\n", metricKeys)
	fmt.Fprintf(&b, "# TYPE %s gauge\n", metricKeys)
	fmt.Fprintf(&b, "%s %d\n", metricKeys, m.keys)
	fmt.Fprintf(&b, "# HELP %s 1 when the last read of keys.json succeeded; 0 while it cannot be read or parsed (the gateway is then not ready).\n", metricKeysOK)
	fmt.Fprintf(&b, "# TYPE %s gauge\n", metricKeysOK)
	ok := 0
	if m.keysOK {
		ok = 1
	}
	fmt.Fprintf(&b, "%s %d\n", metricKeysOK, ok)
	fmt.Fprintf(&b, "# HELP %s Requests refused with 503 because the tenant had too many in flight.\n", metricLimited)
	fmt.Fprintf(&b, "# TYPE %s counter\n", metricLimited)
	tenants := make([]string, 0, len(m.limits))
	for t := range m.limits {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	for _, t := range tenants {
		fmt.Fprintf(&b, "%s{tenant=\"%s\"} %d\n", metricLimited, escapeLabel(t), m.limits[t])
	}
	if m.logDropped != nil {
		fmt.Fprintf(&b, "# HELP %s Log lines (access log included) dropped because the log output fell behind by more than the log buffer.\n", metricDropped)
		fmt.Fprintf(&b, "# TYPE %s counter\n", metricDropped)
		fmt.Fprintf(&b, "%s %d\n", metricDropped, m.logDropped())
	}
	_, _ = io.WriteString(w, b.String())
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
