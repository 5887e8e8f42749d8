package project

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/randfill"

	"github.com/kilnctl/kiln/engine/readiness"
)

// The lists readScope asks for, by resource: random objects of every
// kind (every field filled at random, managedFields included), and some
// made as kiln makes them (a token volume, annotations, labels), so the
// fields the rows read are set.
type testLists struct {
	cms     corev1.ConfigMapList
	deps    appsv1.DeploymentList
	svcs    corev1.ServiceList
	ings    networkingv1.IngressList
	leases  coordinationv1.LeaseList
	slices  discoveryv1.EndpointSliceList
	pods    corev1.PodList
	secrets metav1.PartialObjectMetadataList
}

func randomLists(seed int64, n int) *testLists {
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []any {
		return []any{
			// Quantities are valid ones (the random bytes of one are not).
			func(q *resource.Quantity, c randfill.Continue) {
				*q = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
			},
		}
	}), rand.NewSource(seed), scheme.Codecs).NilChance(0.2).NumElements(0, 3)
	l := &testLists{}
	mf := []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{}}}`)}}}
	for i := range n {
		fill := func(obj any, meta *metav1.ObjectMeta) {
			f.Fill(obj)
			meta.ManagedFields = append(meta.ManagedFields, mf...)
		}
		var cm corev1.ConfigMap
		fill(&cm, &cm.ObjectMeta)
		if i%2 == 0 {
			cm.Name = SpecName(fmt.Sprintf("p%d", i))
		}
		l.cms.Items = append(l.cms.Items, cm)
		var d appsv1.Deployment
		fill(&d, &d.ObjectMeta)
		if i%3 == 0 {
			d.Spec.Template.Annotations = map[string]string{AnnotationToken: fmt.Sprintf("hash%d", i)}
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: tokenVolume, VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "x", Items: []corev1.KeyToPath{{Key: fmt.Sprintf("k%d", i), Path: "token"}}}}})
		}
		l.deps.Items = append(l.deps.Items, d)
		var s corev1.Service
		fill(&s, &s.ObjectMeta)
		l.svcs.Items = append(l.svcs.Items, s)
		var ing networkingv1.Ingress
		fill(&ing, &ing.ObjectMeta)
		l.ings.Items = append(l.ings.Items, ing)
		var le coordinationv1.Lease
		fill(&le, &le.ObjectMeta)
		l.leases.Items = append(l.leases.Items, le)
		var es discoveryv1.EndpointSlice
		fill(&es, &es.ObjectMeta)
		l.slices.Items = append(l.slices.Items, es)
		var p corev1.Pod
		fill(&p, &p.ObjectMeta)
		if i%2 == 0 {
			p.Labels = map[string]string{LabelProject: fmt.Sprintf("p%d", i%5)}
		}
		l.pods.Items = append(l.pods.Items, p)
		var sec metav1.PartialObjectMetadata
		fill(&sec, &sec.ObjectMeta)
		if i%2 == 0 {
			sec.Annotations = map[string]string{AnnotationKey: fmt.Sprintf("k%d", i)}
		}
		l.secrets.Items = append(l.secrets.Items, sec)
	}
	l.cms.Continue, l.pods.ResourceVersion = "", "42"
	return l
}

// byResource are the lists by the resource of their URL, their types set
// as the API server sets them.
func (l *testLists) byResource() map[string]runtime.Object {
	l.cms.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}
	l.deps.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeploymentList"}
	l.svcs.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceList"}
	l.ings.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressList"}
	l.leases.TypeMeta = metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "LeaseList"}
	l.slices.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"}
	l.pods.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}
	l.secrets.TypeMeta = metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}
	return map[string]runtime.Object{
		"configmaps": &l.cms, "deployments": &l.deps, "services": &l.svcs, "ingresses": &l.ings,
		"leases": &l.leases, "endpointslices": &l.slices, "pods": &l.pods, "secrets": &l.secrets,
	}
}

// encode encodes each list as the API server answers it in media.
func encodeLists(t *testing.T, lists map[string]runtime.Object, media string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for res, obj := range lists {
		codecs := scheme.Codecs
		if res == "secrets" {
			codecs = metaCodecs
		}
		info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), media)
		if !ok {
			t.Fatalf("no serializer for %s", media)
		}
		var b bytes.Buffer
		if err := info.Serializer.Encode(obj, &b); err != nil {
			t.Fatalf("encode %s as %s: %v", res, media, err)
		}
		out[res] = b.Bytes()
	}
	return out
}

// fakeLists serves bodies by the last element of the request's path, each
// LIST's answer cut in the middle while cut says so for its resource, and
// counts the requests.
type fakeLists struct {
	bodies map[string][]byte
	media  string
	mu     sync.Mutex
	cuts   map[string]int // answers still to cut, by resource
	asked  map[string]int
}

func (f *fakeLists) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	f.mu.Lock()
	f.asked[res]++
	cut := f.cuts[res] > 0
	if cut {
		f.cuts[res]--
	}
	f.mu.Unlock()
	b, ok := f.bodies[res]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.media)
	if cut {
		// Half the answer, then the connection dropped: what a client
		// sees when the API server stops after its headers.
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		_, _ = w.Write(b[:len(b)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	_, _ = w.Write(b)
}

func serveLists(t *testing.T, bodies map[string][]byte, media string) (*fakeLists, *Ops) {
	t.Helper()
	f := &fakeLists{bodies: bodies, media: media, cuts: map[string]int{}, asked: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return f, &Ops{Client: cs}
}

// referenceSnapshot is the snapshot the rows of readScope make from each
// list decoded whole, as client-go decodes it (the way kiln read them
// before protoItems).
func referenceSnapshot(t *testing.T, bodies map[string][]byte) *snapshot {
	t.Helper()
	decode := func(res string, into runtime.Object) {
		codecs := scheme.Codecs
		if res == "secrets" {
			codecs = metaCodecs
		}
		if _, _, err := codecs.UniversalDeserializer().Decode(bodies[res], nil, into); err != nil {
			t.Fatalf("decode %s: %v", res, err)
		}
	}
	s := newSnapshot()
	var l testLists
	decode("configmaps", &l.cms)
	for i := range l.cms.Items {
		if cm := &l.cms.Items[i]; strings.HasPrefix(cm.Name, specPrefix) {
			cm.ManagedFields = nil
			s.specs = append(s.specs, *cm)
		}
	}
	decode("deployments", &l.deps)
	for i := range l.deps.Items {
		x := &l.deps.Items[i]
		s.deps[key(x.Namespace, x.Name)] = newDepRow(x)
	}
	decode("services", &l.svcs)
	for i := range l.svcs.Items {
		x := &l.svcs.Items[i]
		s.svcs[key(x.Namespace, x.Name)] = &svcRow{res: judge(readiness.KindService, x)}
	}
	decode("ingresses", &l.ings)
	for i := range l.ings.Items {
		x := &l.ings.Items[i]
		s.ings[key(x.Namespace, x.Name)] = newIngRow(x)
	}
	decode("leases", &l.leases)
	for i := range l.leases.Items {
		y := &l.leases.Items[i]
		s.leases[key(y.Namespace, y.Name)] = newLeaseRow(y)
	}
	decode("endpointslices", &l.slices)
	for i := range l.slices.Items {
		x := &l.slices.Items[i]
		s.ready[key(x.Namespace, x.Labels[discoveryv1.LabelServiceName])] += readiness.CountReady(l.slices.Items[i : i+1])
	}
	decode("pods", &l.pods)
	for i := range l.pods.Items {
		x := &l.pods.Items[i]
		k := key(x.Namespace, x.Labels[LabelProject])
		s.pods[k] = append(s.pods[k], newPodRow(x))
	}
	decode("secrets", &l.secrets)
	for i := range l.secrets.Items {
		y := &l.secrets.Items[i]
		s.secrets[key(y.Namespace, y.Name)] = &secRow{deleting: y.DeletionTimestamp != nil, key: y.Annotations[AnnotationKey]}
	}
	return s
}

func allScope() scope {
	opts := metav1.ListOptions{LabelSelector: "kiln.dev/cluster=c,kiln.dev/project"}
	return scope{cms: opts, deps: opts, svcs: opts, ings: &opts, leases: opts, slices: opts, pods: opts, secrets: opts}
}

// TestProtoItemsDecodesWhatTheRowsRead: readScope, reading each kind's
// answer object by object with its bytes slimmed (protoItems), makes the
// same snapshot as the rows made of every list decoded whole by
// client-go, for random objects of every kind, whether the server
// answers protobuf or JSON. A row that reads a field slim leaves out (of
// a pod's spec, say) differs here.
func TestProtoItemsDecodesWhatTheRowsRead(t *testing.T) {
	for seed := range int64(4) {
		lists := randomLists(seed, 25).byResource()
		for _, media := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
			t.Run(fmt.Sprintf("seed%d/%s", seed, media), func(t *testing.T) {
				bodies := encodeLists(t, lists, media)
				_, o := serveLists(t, bodies, media)
				got, err := o.readScope(context.Background(), "kiln-tenant-t", allScope())
				if err != nil {
					t.Fatal(err)
				}
				want := referenceSnapshot(t, bodies)
				compareSnapshots(t, got, want)
			})
		}
	}
}

func compareSnapshots(t *testing.T, got, want *snapshot) {
	t.Helper()
	if len(want.specs) == 0 || len(want.deps) == 0 || len(want.pods) == 0 || len(want.secrets) == 0 {
		t.Fatalf("the reference snapshot is empty: %d specs, %d deployments, %d pods, %d secrets", len(want.specs), len(want.deps), len(want.pods), len(want.secrets))
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"specs", got.specs, want.specs}, {"deployments", got.deps, want.deps}, {"services", got.svcs, want.svcs},
		{"routes", got.ings, want.ings}, {"leases", got.leases, want.leases}, {"ready endpoints", got.ready, want.ready},
		{"pods", got.pods, want.pods}, {"secrets", got.secrets, want.secrets},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s differ:\n got %s\nwant %s", c.name, dump(c.got), dump(c.want))
		}
	}
}

func dump(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map {
		return fmt.Sprintf("%+v", v)
	}
	var b strings.Builder
	for _, k := range rv.MapKeys() {
		e := rv.MapIndex(k)
		if e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		fmt.Fprintf(&b, "\n  %v: %+v", k, e)
	}
	return b.String()
}

// TestProtoItemsRetriesAnAnswerCutShort: an answer whose body stops in the
// middle (the API server gone after its headers: kiln's transport does
// not read streamed answers whole, so cannot retry them itself) is read
// again from the start, and what the cut one gave is dropped, not kept
// twice; an answer that is not a list kiln can decode is not retried and
// is named.
func TestProtoItemsRetriesAnAnswerCutShort(t *testing.T) {
	lists := randomLists(7, 25).byResource()
	bodies := encodeLists(t, lists, runtime.ContentTypeProtobuf)
	f, o := serveLists(t, bodies, runtime.ContentTypeProtobuf)
	f.cuts["pods"], f.cuts["deployments"] = 2, 1
	got, err := o.readScope(context.Background(), "kiln-tenant-t", allScope())
	if err != nil {
		t.Fatal(err)
	}
	compareSnapshots(t, got, referenceSnapshot(t, bodies))
	if f.asked["pods"] != 3 || f.asked["deployments"] != 2 || f.asked["services"] != 1 {
		t.Errorf("LISTs asked: %v, want pods 3 (two cut), deployments 2 (one cut), every other kind 1", f.asked)
	}

	for _, bad := range []struct{ media, body, want string }{
		{runtime.ContentTypeProtobuf, "k8s\x00\x0a\x02garbage", "decode PodList"},
		{"text/html", "<html>x</html>", "decode PodList"},
		{runtime.ContentTypeProtobuf, string(bodies["services"]), `answer is a "ServiceList", not a PodList`},
	} {
		b := map[string][]byte{}
		for k, v := range bodies {
			b[k] = v
		}
		b["pods"] = []byte(bad.body)
		f, o := serveLists(t, b, bad.media)
		_, err := o.readScope(context.Background(), "kiln-tenant-t", allScope())
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "list pods") {
			t.Errorf("pods answered %q as %s: %v, want an error naming the pods' LIST and %q", bad.body, bad.media, err, bad.want)
		}
		if f.asked["pods"] != 1 {
			t.Errorf("pods answered %q: asked %d times, want once (not a cut answer: not retried)", bad.body, f.asked["pods"])
		}
	}
}

// TestProtoItemsPages: with a page size, readScope follows the continue
// token and reads each page object by object.
func TestProtoItemsPages(t *testing.T) {
	lists := randomLists(3, 6).byResource()
	first := lists["pods"].(*corev1.PodList)
	second := first.DeepCopy()
	first.Items, second.Items = first.Items[:3], second.Items[3:]
	first.Continue, second.Continue = "page2", ""
	whole := encodeLists(t, lists, runtime.ContentTypeProtobuf)
	lists["pods"] = second
	page2 := encodeLists(t, lists, runtime.ContentTypeProtobuf)
	var asked []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		b := whole[res]
		if res == "pods" {
			mu.Lock()
			asked = append(asked, r.URL.Query().Get("limit")+"/"+r.URL.Query().Get("continue"))
			mu.Unlock()
			if r.URL.Query().Get("continue") == "page2" {
				b = page2[res]
			}
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	o := &Ops{Client: cs, PageSize: 3}
	got, err := o.readScope(context.Background(), "kiln-tenant-t", allScope())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rows := range got.pods {
		n += len(rows)
	}
	if n != 6 || strings.Join(asked, " ") != "3/ 3/page2" {
		t.Errorf("read %d pods asking %v, want 6 pods in two pages (3/ 3/page2)", n, asked)
	}
}

// TestProtoItemsBoundsObjectsNotTheList: a length past maxMessage is
// refused for one object (a corrupt answer, not an allocation to make),
// never for the list around them, which is read object by object however
// long it is.
func TestProtoItemsBoundsObjectsNotTheList(t *testing.T) {
	defer func(m uint64) { maxMessage = m }(maxMessage)
	lists := randomLists(5, 25).byResource()
	bodies := encodeLists(t, lists, runtime.ContentTypeProtobuf)
	big := 0
	for _, p := range lists["pods"].(*corev1.PodList).Items {
		big = max(big, p.Size())
	}
	maxMessage = uint64(big) // every pod fits, the list of 25 does not
	if len(bodies["pods"]) <= big {
		t.Fatalf("the pods' list (%d bytes) is no longer than its largest pod (%d)", len(bodies["pods"]), big)
	}
	_, o := serveLists(t, bodies, runtime.ContentTypeProtobuf)
	got, err := o.readScope(context.Background(), "kiln-tenant-t", allScope())
	if err != nil {
		t.Fatalf("objects within the bound: %v", err)
	}
	compareSnapshots(t, got, referenceSnapshot(t, bodies))
	maxMessage = uint64(big) - 1
	if _, err := o.readScope(context.Background(), "kiln-tenant-t", allScope()); err == nil || !strings.Contains(err.Error(), "protobuf: message of") {
		t.Errorf("a pod past the bound: %v, want it refused", err)
	}
}
