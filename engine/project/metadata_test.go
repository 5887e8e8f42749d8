package project

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// decodeMetadataList reads the list in either encoding the API server may
// answer the Accept header with (the e2e state tests read Secrets through
// a real API server, which answers protobuf), and names what it cannot.
func TestDecodeMetadataList(t *testing.T) {
	now := metav1.Now()
	want := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{Continue: "next"},
		Items: []metav1.PartialObjectMetadata{
			{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
				ObjectMeta: metav1.ObjectMeta{Name: "web-auth", Namespace: "kiln-tenant-t", Annotations: map[string]string{AnnotationKey: "k1"}}},
			{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
				ObjectMeta: metav1.ObjectMeta{Name: "api-auth", Namespace: "kiln-tenant-t", DeletionTimestamp: &now}},
		},
	}
	for _, media := range []string{"application/vnd.kubernetes.protobuf", "application/json"} {
		info, ok := runtime.SerializerInfoForMediaType(metaCodecs.SupportedMediaTypes(), media)
		if !ok {
			t.Fatalf("no encoder for %s", media)
		}
		var buf bytes.Buffer
		if err := info.Serializer.Encode(want, &buf); err != nil {
			t.Fatal(err)
		}
		got, err := decodeMetadataList(buf.Bytes(), media+";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
		if err != nil {
			t.Fatalf("%s: %v", media, err)
		}
		got.TypeMeta = want.TypeMeta
		for i := range got.Items {
			got.Items[i].TypeMeta = want.Items[i].TypeMeta
			if d := got.Items[i].DeletionTimestamp; d != nil {
				got.Items[i].DeletionTimestamp = &metav1.Time{Time: d.Rfc3339Copy().Time}
			}
		}
		if w := want.Items[1].DeletionTimestamp; w != nil {
			want.Items[1].DeletionTimestamp = &metav1.Time{Time: w.Rfc3339Copy().Time}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, want %+v", media, got, want)
		}
	}
	if _, err := decodeMetadataList([]byte("x"), "text/html"); err == nil || !strings.Contains(err.Error(), "text/html") {
		t.Errorf("an answer as text/html: %v, want an error naming it", err)
	}
}
