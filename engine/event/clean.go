package event

import (
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// CleanText removes what could drive a terminal or disguise text from a
// string that may come from a cluster (object names, messages, spec
// fields, Event reasons): C0 control characters except newline and tab,
// DEL, C1 controls (U+0080–U+009F) and the Unicode bidirectional overrides
// and isolates, and bytes that are not UTF-8. Escape sequences lose their ESC and print as inert text.
func CleanText(s string) string {
	if strings.IndexFunc(s, unsafeRune) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unsafeRune(r) {
			return -1
		}
		return r
	}, s)
}

func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == utf8.RuneError: // an invalid byte: 0x9b alone is CSI to some terminals
		return true
	}
	return false
}

var timeType = reflect.TypeOf(time.Time{})

// CleanDeep applies CleanText to every string reachable from v (a pointer):
// struct fields, slices, maps' string values, pointers, interfaces (but
// not errors, which are not the event's text). Every event a Reporter
// sends goes through it, so a field added later is covered without anyone
// remembering to.
func CleanDeep(v any) {
	cleanValue(reflect.ValueOf(v), 0)
}

// cleanPayload cleans a copy of p: a payload held by value is copied, one
// held by pointer is cleaned in place.
func cleanPayload(p Payload) Payload {
	if p == nil {
		return nil
	}
	v := reflect.New(reflect.TypeOf(p))
	v.Elem().Set(reflect.ValueOf(p))
	cleanValue(v, 0)
	return v.Elem().Interface().(Payload)
}

var errorType = reflect.TypeOf((*error)(nil)).Elem()

func cleanValue(v reflect.Value, depth int) {
	if depth > 16 || !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			cleanValue(v.Elem(), depth+1)
		}
	case reflect.Interface:
		if v.IsNil() || v.Type() == errorType {
			return
		}
		// An interface's value cannot be set in place: clean a copy.
		e := v.Elem()
		cp := reflect.New(e.Type()).Elem()
		cp.Set(e)
		cleanValue(cp, depth+1)
		if v.CanSet() {
			v.Set(cp)
		}
	case reflect.String:
		if v.CanSet() {
			if s := v.String(); strings.IndexFunc(s, unsafeRune) >= 0 {
				v.SetString(CleanText(s))
			}
		}
	case reflect.Struct:
		if v.Type() == timeType {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				cleanValue(v.Field(i), depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			cleanValue(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.Type().Elem().Kind() != reflect.String {
			return
		}
		for _, k := range v.MapKeys() {
			if s := v.MapIndex(k).String(); strings.IndexFunc(s, unsafeRune) >= 0 {
				v.SetMapIndex(k, reflect.ValueOf(CleanText(s)).Convert(v.Type().Elem()))
			}
		}
	}
}
