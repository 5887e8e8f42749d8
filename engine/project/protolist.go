package project

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/engine/kubeapi"
)

// Reading a LIST object by object.
//
// client-go reads a LIST's whole answer into memory (io.ReadAll, growing
// a buffer as it goes), then decodes it into a List whose Items hold every
// object at once, each whole. At 2,000 projects that reading and decoding
// was half of `kiln project list`'s CPU, most of it spent on what kiln
// never reads: objects' managedFields (half of every Deployment's and
// pod's bytes), pods' specs, and growing and clearing buffers and Items.
// protoItems instead reads the answer's protobuf as it arrives and
// decodes one object at a time into one reused object, with the generated
// decoder of its type, after slimming the object's bytes (slimmer): its
// metadata without managedFields and, for kinds that say so, its spec
// with only the fields kiln reads. What it decodes is what client-go
// would decode of those fields (TestProtoItemsDecodesWhatTheRowsRead holds
// the rows built from both to be equal), and kiln's memory stays one
// object deep however many there are, so a kind can be read in one LIST
// (see DefaultPageSize).

// protoMagic starts every protobuf answer of the API server
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protoMagic = []byte("k8s\x00")

// protoAccept asks for protobuf, JSON where the server has none.
const protoAccept = "application/vnd.kubernetes.protobuf, application/json"

// itemKind describes one kind's LIST for protoItems: the List kind the
// answer must carry, its JSON form's items (for a server that answers
// JSON, decoded with codecs, client-go's when nil), which of its spec's
// fields to keep (nil: all of them), and the Accept header (protoAccept
// when empty).
type itemKind[T any, L runtime.Object] struct {
	listKind string
	newList  func() L
	items    func(L) []T
	spec     *shape
	accept   string
	codecs   *serializer.CodecFactory
}

// protoItems lists resource in namespace through rc and hands each object
// of the answer to each as it is read, decoded into one object reused for
// the next: each must keep nothing of it but copies (strings are). It
// returns the answer's list metadata (its continue token) for pages. The
// body is read as it arrives (a kubeapi.Streamed request): one cut short
// is a kubeapi.CutError, which pages retries. The answer's format is told
// by its first bytes, as the API machinery's own serializers tell theirs.
func protoItems[T any, PT interface {
	*T
	Unmarshal([]byte) error
}, L runtime.Object](rc rest.Interface, namespace, resource string, k itemKind[T, L], each func(*T)) func(context.Context, metav1.ListOptions) (*metav1.ListMeta, error) {
	var (
		x   T
		sl  slimmer
		buf []byte
		br  = bufio.NewReaderSize(nil, 64<<10)
	)
	accept := k.accept
	if accept == "" {
		accept = protoAccept
	}
	obj := objectShape(k.spec)
	codecs := k.codecs
	if codecs == nil {
		codecs = &scheme.Codecs
	}
	return func(ctx context.Context, opts metav1.ListOptions) (*metav1.ListMeta, error) {
		stream, err := rc.Get().Namespace(namespace).Resource(resource).
			VersionedParams(&opts, scheme.ParameterCodec).
			SetHeader("Accept", accept).
			Stream(kubeapi.Streamed(ctx))
		if err != nil {
			return nil, err
		}
		defer func() { _ = stream.Close() }()
		br.Reset(stream)
		defer br.Reset(nil)
		if head, err := br.Peek(len(protoMagic)); !bytes.Equal(head, protoMagic) {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, &kubeapi.CutError{Err: err}
			}
			raw, err := io.ReadAll(br)
			if err != nil {
				return nil, &kubeapi.CutError{Err: err}
			}
			l := k.newList()
			if _, _, err := codecs.UniversalDeserializer().Decode(raw, nil, l); err != nil {
				return nil, fmt.Errorf("decode %s: %w", k.listKind, err)
			}
			items := k.items(l)
			for i := range items {
				each(&items[i])
			}
			return listMeta(l)
		}
		lm, err := eachProtoItem(&protoReader{r: br}, k.listKind, &buf, func(b []byte) error {
			b, err := sl.slim(b, obj)
			if err != nil {
				return err
			}
			var zero T
			x = zero
			if err := PT(&x).Unmarshal(b); err != nil {
				return err
			}
			each(&x)
			return nil
		})
		var cut *kubeapi.CutError
		if err != nil && !errors.As(err, &cut) {
			err = fmt.Errorf("decode %s: %w", k.listKind, err)
		}
		return lm, err
	}
}

func listMeta(l runtime.Object) (*metav1.ListMeta, error) {
	li, ok := l.(metav1.ListInterface)
	if !ok {
		return nil, fmt.Errorf("%T is not a list", l)
	}
	return &metav1.ListMeta{ResourceVersion: li.GetResourceVersion(), Continue: li.GetContinue(), RemainingItemCount: li.GetRemainingItemCount()}, nil
}

// protoReader reads protobuf's wire format from a stream, counting the
// bytes it has read. A read that fails is a kubeapi.CutError: the body
// ended (or the connection failed) inside a message the lengths before it
// said was there.
type protoReader struct {
	r *bufio.Reader
	n int64
}

func (p *protoReader) cut(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return &kubeapi.CutError{Err: err}
}

func (p *protoReader) varint() (uint64, error) {
	var v uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		c, err := p.r.ReadByte()
		if err != nil {
			return 0, p.cut(err)
		}
		p.n++
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("protobuf: varint too long")
}

// tag reads a field's number and wire type.
func (p *protoReader) tag() (protowire.Number, protowire.Type, error) {
	v, err := p.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		return 0, 0, fmt.Errorf("protobuf: invalid field number %d", num)
	}
	return num, typ, nil
}

// bytes reads a length-delimited field's value into *buf (grown to fit)
// and returns it, valid until the next read into *buf.
func (p *protoReader) bytes(buf *[]byte) ([]byte, error) {
	n, err := p.length()
	if err != nil {
		return nil, err
	}
	if uint64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(p.r, b); err != nil {
		return nil, p.cut(err)
	}
	p.n += int64(n)
	return b, nil
}

// maxMessage bounds the length of one message read whole (an object, the
// list's metadata): the API server refuses objects past 1.5 MiB (etcd's
// request limit), so a length far past it is a corrupt answer, not an
// allocation to make. The list around them is not read whole, and has no
// bound.
var maxMessage uint64 = 64 << 20

func (p *protoReader) length() (uint64, error) {
	n, err := p.varint()
	if err == nil && n > maxMessage {
		err = fmt.Errorf("protobuf: message of %d bytes", n)
	}
	return n, err
}

// skip reads past a field's value of wire type typ.
func (p *protoReader) skip(typ protowire.Type) error {
	var n int
	switch typ {
	case protowire.VarintType:
		_, err := p.varint()
		return err
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		l, err := p.length()
		if err != nil {
			return err
		}
		n = int(l)
	default:
		return fmt.Errorf("protobuf: unexpected wire type %d", typ)
	}
	d, err := p.r.Discard(n)
	p.n += int64(d)
	if err != nil {
		return p.cut(err)
	}
	return nil
}

// eachProtoItem reads a protobuf answer of the API server: the magic, a
// runtime.Unknown (typeMeta = 1, raw = 2, contentEncoding = 3) whose raw
// is a List (metadata = 1, items = 2). It checks the kind, hands each
// item's bytes to item in order (in *buf, reused), and returns the list's
// metadata.
func eachProtoItem(p *protoReader, listKind string, buf *[]byte, item func([]byte) error) (*metav1.ListMeta, error) {
	magic := make([]byte, len(protoMagic))
	if _, err := io.ReadFull(p.r, magic); err != nil {
		return nil, p.cut(err)
	}
	if !bytes.Equal(magic, protoMagic) {
		return nil, errors.New("not a Kubernetes protobuf message")
	}
	var (
		kind, encoding string
		lm             *metav1.ListMeta
	)
	for {
		if _, err := p.r.Peek(1); errors.Is(err, io.EOF) {
			break // the answer's end, between two of its fields
		}
		num, typ, err := p.tag()
		if err != nil {
			return nil, err
		}
		switch {
		case num == 1 && typ == protowire.BytesType: // typeMeta: kind = 2
			v, err := p.bytes(buf)
			if err != nil {
				return nil, err
			}
			if err := eachField(v, func(num protowire.Number, v []byte) error {
				if num == 2 {
					kind = string(v)
				}
				return nil
			}); err != nil {
				return nil, err
			}
		case num == 2 && typ == protowire.BytesType: // raw: the List
			if kind != listKind {
				return nil, fmt.Errorf("answer is a %q, not a %s", kind, listKind)
			}
			n, err := p.varint() // not bounded as one message is: it is read item by item
			if err != nil {
				return nil, err
			}
			if lm, err = eachListItem(p, p.n+int64(n), buf, item); err != nil {
				return nil, err
			}
		case num == 3 && typ == protowire.BytesType:
			v, err := p.bytes(buf)
			if err != nil {
				return nil, err
			}
			encoding = string(v)
		default:
			if err := p.skip(typ); err != nil {
				return nil, err
			}
		}
	}
	if lm == nil {
		return nil, fmt.Errorf("answer (a %q) holds no list", kind)
	}
	if encoding != "" {
		return nil, fmt.Errorf("answer has content encoding %q", encoding)
	}
	return lm, nil
}

// eachListItem reads a List's fields up to byte end of the stream.
func eachListItem(p *protoReader, end int64, buf *[]byte, item func([]byte) error) (*metav1.ListMeta, error) {
	lm := &metav1.ListMeta{}
	for p.n < end {
		num, typ, err := p.tag()
		if err != nil {
			return nil, err
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, err := p.bytes(buf)
			if err != nil {
				return nil, err
			}
			if err := lm.Unmarshal(v); err != nil {
				return nil, err
			}
		case num == 2 && typ == protowire.BytesType:
			v, err := p.bytes(buf)
			if err != nil {
				return nil, err
			}
			if err := item(v); err != nil {
				return nil, err
			}
		default:
			if err := p.skip(typ); err != nil {
				return nil, err
			}
		}
	}
	if p.n != end {
		return nil, errors.New("protobuf: list overruns its length")
	}
	return lm, nil
}

// eachField calls f with the number and bytes of each length-delimited
// field of the protobuf message b, in order, and skips every other field.
func eachField(b []byte, f func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, field, tag, err := nextField(b)
		if err != nil {
			return err
		}
		b = b[len(field):]
		if typ != protowire.BytesType {
			continue
		}
		v, _ := protowire.ConsumeBytes(field[tag:])
		if err := f(num, v); err != nil {
			return err
		}
	}
	return nil
}

// nextField parses the first field of b: its number, wire type, whole
// bytes (tag and value) and the length of its tag.
func nextField(b []byte) (protowire.Number, protowire.Type, []byte, int, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, 0, protowire.ParseError(n)
	}
	m := protowire.ConsumeFieldValue(num, typ, b[n:])
	if m < 0 {
		return 0, 0, nil, 0, protowire.ParseError(m)
	}
	return num, typ, b[:n+m], n, nil
}

// Field numbers of what slim rewrites (k8s.io/api's generated.proto).
const (
	fieldMetadata      protowire.Number = 1  // of every object
	fieldSpec          protowire.Number = 2  // of every object with a spec
	fieldManagedFields protowire.Number = 17 // of ObjectMeta
)

// A shape says what of a message to keep: with only set, just the fields
// it names, each reduced to its own shape (nil: whole); otherwise every
// field but drop, those reduce names reduced to their shape.
type shape struct {
	only   map[protowire.Number]*shape
	reduce map[protowire.Number]*shape
	drop   protowire.Number
}

// The shapes of what kiln reads (newPodRow, newDepRow, and every row's
// metadata).
var (
	// An object's metadata: all but its managedFields.
	metadataShape = &shape{drop: fieldManagedFields}
	// A pod's spec: nodeName.
	podSpecShape = &shape{only: map[protowire.Number]*shape{10: nil}}
	// A Deployment's spec: all but its pod template's spec, of which
	// only the volumes (the token's, deploymentTokenKey).
	deploymentSpecShape = &shape{reduce: map[protowire.Number]*shape{
		3: {reduce: map[protowire.Number]*shape{ // template
			2: {only: map[protowire.Number]*shape{1: nil}}, // spec: volumes
		}},
	}}
)

// objectShape is an object's shape: its metadata's, and its spec's when
// spec is not nil; every other field whole.
func objectShape(spec *shape) *shape {
	return &shape{reduce: map[protowire.Number]*shape{fieldMetadata: metadataShape, fieldSpec: spec}}
}

// slimmer rewrites an object's protobuf without what kiln never reads,
// into buffers it reuses from one object to the next (one per depth).
type slimmer struct{ bufs [][]byte }

func (s *slimmer) buf(depth int) []byte {
	for len(s.bufs) <= depth {
		s.bufs = append(s.bufs, nil)
	}
	return s.bufs[depth][:0]
}

// slim returns message b reduced to shape sh. The result is valid until
// the next call.
func (s *slimmer) slim(b []byte, sh *shape) ([]byte, error) {
	return s.keep(0, b, sh)
}

func (s *slimmer) keep(depth int, b []byte, sh *shape) ([]byte, error) {
	out := s.buf(depth)
	for len(b) > 0 {
		num, typ, field, tag, err := nextField(b)
		if err != nil {
			return nil, err
		}
		b = b[len(field):]
		var sub *shape
		switch {
		case sh.only != nil:
			var ok bool
			if sub, ok = sh.only[num]; !ok {
				continue
			}
		case num == sh.drop:
			continue
		default:
			sub = sh.reduce[num]
		}
		if sub == nil || typ != protowire.BytesType {
			out = append(out, field...)
			continue
		}
		v, _ := protowire.ConsumeBytes(field[tag:])
		inner, err := s.keep(depth+1, v, sub)
		if err != nil {
			return nil, err
		}
		out = protowire.AppendBytes(protowire.AppendTag(out, num, typ), inner)
	}
	s.bufs[depth] = out
	return out, nil
}

// The kinds a snapshot lists (readScope).
var (
	configMapItems = itemKind[corev1.ConfigMap, *corev1.ConfigMapList]{
		listKind: "ConfigMapList", newList: newList[corev1.ConfigMapList],
		items: func(l *corev1.ConfigMapList) []corev1.ConfigMap { return l.Items },
	}
	deploymentItems = itemKind[appsv1.Deployment, *appsv1.DeploymentList]{
		listKind: "DeploymentList", newList: newList[appsv1.DeploymentList],
		items: func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items },
		spec:  deploymentSpecShape,
	}
	serviceItems = itemKind[corev1.Service, *corev1.ServiceList]{
		listKind: "ServiceList", newList: newList[corev1.ServiceList],
		items: func(l *corev1.ServiceList) []corev1.Service { return l.Items },
	}
	ingressItems = itemKind[networkingv1.Ingress, *networkingv1.IngressList]{
		listKind: "IngressList", newList: newList[networkingv1.IngressList],
		items: func(l *networkingv1.IngressList) []networkingv1.Ingress { return l.Items },
	}
	leaseItems = itemKind[coordinationv1.Lease, *coordinationv1.LeaseList]{
		listKind: "LeaseList", newList: newList[coordinationv1.LeaseList],
		items: func(l *coordinationv1.LeaseList) []coordinationv1.Lease { return l.Items },
	}
	endpointSliceItems = itemKind[discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList]{
		listKind: "EndpointSliceList", newList: newList[discoveryv1.EndpointSliceList],
		items: func(l *discoveryv1.EndpointSliceList) []discoveryv1.EndpointSlice { return l.Items },
	}
	// Secrets as PartialObjectMetadata: names, labels and annotations,
	// never their data (which kiln does not need to judge a project, and
	// must not hold in memory to print a table).
	secretMetadataItems = itemKind[metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList]{
		listKind: "PartialObjectMetadataList", newList: newList[metav1.PartialObjectMetadataList],
		items:  func(l *metav1.PartialObjectMetadataList) []metav1.PartialObjectMetadata { return l.Items },
		accept: metadataListAccept, codecs: &metaCodecs,
	}
	podItems = itemKind[corev1.Pod, *corev1.PodList]{
		listKind: "PodList", newList: newList[corev1.PodList],
		items: func(l *corev1.PodList) []corev1.Pod { return l.Items },
		spec:  podSpecShape,
	}
)

func newList[T any, L interface {
	*T
	runtime.Object
}]() L {
	return L(new(T))
}

// metadataListAccept asks for a PartialObjectMetadataList, protobuf first.
const metadataListAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

// metaCodecs decode meta.k8s.io's own kinds in JSON (client-go's scheme
// does not know PartialObjectMetadataList).
var metaCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s)
}()
