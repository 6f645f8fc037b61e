// Package jsonschema writes a JSON Schema (draft 2020-12) of a Go type as encoding/json
// marshals it: the reports' schema is generated from the report types, so it cannot drift from
// what the plugin writes. It covers what the report types use (structs with json tags,
// embedded structs, pointers, slices, string-keyed maps, strings, numbers, booleans,
// time.Time) and refuses the rest: a type that marshals itself, a map with other keys, a
// channel or function, a json ",string" option. A refusal is an error naming the type, never a
// schema that accepts anything.
package jsonschema

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Draft is the JSON Schema dialect written.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// Options say what the Go types cannot.
type Options struct {
	// ID, Title and Description are the root schema's $id, title and description.
	ID, Title, Description string
	// Enums lists the allowed values of a field ("report.Report.Result": the type as reflect
	// prints it, a dot, the Go field name) or of every value of a named type ("result.Status").
	Enums map[string][]any
	// Consts fixes the value of a field (keyed as Enums), such as a schema version.
	Consts map[string]any
	// NonNullCollections: slices and maps are never null (the writer makes nil ones empty), so
	// the schema does not allow null for them. Without it a slice or map field without
	// omitempty may be null, as encoding/json writes a nil one.
	NonNullCollections bool
}

// Generate returns the schema of t (a struct, or a pointer to one), indented, with a final
// newline. Every other named struct it reaches is a definition under $defs, referenced by name.
func Generate(t reflect.Type, opt Options) ([]byte, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("jsonschema: %s is not a struct", t)
	}
	g := &generator{opt: opt, defs: map[string]object{}, names: map[reflect.Type]string{}, used: map[string]bool{}}
	g.names[t] = "" // the root is written inline; a reference to it is "#"
	root, err := g.structSchema(t)
	if err != nil {
		return nil, err
	}
	head := object{{"$schema", Draft}}
	if opt.ID != "" {
		head = append(head, kv{"$id", opt.ID})
	}
	if opt.Title != "" {
		head = append(head, kv{"title", opt.Title})
	}
	if opt.Description != "" {
		head = append(head, kv{"description", opt.Description})
	}
	out := append(head, root...)
	if len(g.defs) > 0 {
		names := make([]string, 0, len(g.defs))
		for n := range g.defs {
			names = append(names, n)
		}
		sort.Strings(names)
		defs := object{}
		for _, n := range names {
			defs = append(defs, kv{n, g.defs[n]})
		}
		out = append(out, kv{"$defs", defs})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("jsonschema: encoding the schema of %s: %w", t, err)
	}
	return b.Bytes(), nil
}

// kv is one member of an object, and object an object whose members keep their order.
type kv struct {
	key   string
	value any
}

type object []kv

// MarshalJSON writes the members in order.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

type generator struct {
	opt   Options
	defs  map[string]object
	names map[reflect.Type]string // definition name of each struct type met
	used  map[string]bool         // definition names taken
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// structSchema is the object schema of a struct type: its fields as encoding/json writes them.
func (g *generator) structSchema(t reflect.Type) (object, error) {
	props := object{}
	var required []string
	seen := map[string]string{}
	var addFields func(t reflect.Type) error
	addFields = func(t reflect.Type) error {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, hasTag := f.Tag.Lookup("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" && opts == "" {
				continue
			}
			if f.Anonymous && !hasTag {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					if err := addFields(ft); err != nil {
						return err
					}
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			omitempty := false
			for _, o := range strings.Split(opts, ",") {
				switch o {
				case "":
				case "omitempty", "omitzero":
					omitempty = true
				default:
					return fmt.Errorf("jsonschema: %s.%s: json option %q is not supported", t, f.Name, o)
				}
			}
			if prev, dup := seen[name]; dup {
				return fmt.Errorf("jsonschema: %s: fields %s and %s both marshal as %q", t, prev, f.Name, name)
			}
			seen[name] = f.Name
			key := t.String() + "." + f.Name
			s, err := g.fieldSchema(f.Type, key, !omitempty)
			if err != nil {
				return err
			}
			props = append(props, kv{name, s})
			if !omitempty {
				required = append(required, name)
			}
		}
		return nil
	}
	if err := addFields(t); err != nil {
		return nil, err
	}
	out := object{{"type", "object"}, {"properties", props}}
	if len(required) > 0 {
		out = append(out, kv{"required", required})
	}
	return append(out, kv{"additionalProperties", false}), nil
}

// fieldSchema is the schema of a field of type t; key names it in Options.Enums and Consts, and
// nullable says whether encoding/json may write null for it (a nil pointer, slice or map
// without omitempty).
func (g *generator) fieldSchema(t reflect.Type, key string, nullable bool) (object, error) {
	s, err := g.typeSchema(t, nullable)
	if err != nil {
		return nil, err
	}
	if c, ok := g.opt.Consts[key]; ok {
		if allowsNull(s) {
			return nil, fmt.Errorf("jsonschema: %s may be null: a const cannot say so", key)
		}
		s = append(s, kv{"const", c})
	}
	if e, ok := g.opt.Enums[key]; ok {
		s = withEnum(s, e)
	}
	return s, nil
}

// withEnum restricts s to the values e (and null, where s allows it).
func withEnum(s object, e []any) object {
	if allowsNull(s) {
		e = append(append([]any{}, e...), nil)
	}
	return append(s, kv{"enum", e})
}

// allowsNull reports whether s is a type list with "null" in it.
func allowsNull(s object) bool {
	for _, m := range s {
		if types, ok := m.value.([]string); ok && m.key == "type" {
			for _, t := range types {
				if t == "null" {
					return true
				}
			}
		}
	}
	return false
}

// typeSchema is the schema of a value of type t.
func (g *generator) typeSchema(t reflect.Type, nullable bool) (object, error) {
	if t.Kind() == reflect.Pointer {
		inner, err := g.typeSchema(t.Elem(), false)
		if err != nil || !nullable {
			return inner, err
		}
		return orNull(inner), nil
	}
	if t == timeType {
		return object{{"type", "string"}, {"format", "date-time"}}, nil
	}
	if t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType) {
		return nil, fmt.Errorf("jsonschema: %s marshals itself: its JSON cannot be read from its type", t)
	}
	var s object
	switch t.Kind() {
	case reflect.String:
		s = object{{"type", "string"}}
	case reflect.Bool:
		s = object{{"type", "boolean"}}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s = object{{"type", "integer"}}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s = object{{"type", "integer"}, {"minimum", 0}}
	case reflect.Float32, reflect.Float64:
		s = object{{"type", "number"}}
	case reflect.Interface:
		return object{}, nil // any JSON value
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil, fmt.Errorf("jsonschema: %s: byte slices (base64 strings) are not supported", t)
		}
		items, err := g.typeSchema(t.Elem(), true)
		if err != nil {
			return nil, err
		}
		s = object{{"type", "array"}, {"items", items}}
		if t.Kind() == reflect.Array {
			s = append(s, kv{"minItems", t.Len()}, kv{"maxItems", t.Len()})
		} else if nullable && !g.opt.NonNullCollections {
			s = orNull(s)
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("jsonschema: %s: only maps with string keys are supported", t)
		}
		values, err := g.typeSchema(t.Elem(), true)
		if err != nil {
			return nil, err
		}
		s = object{{"type", "object"}, {"additionalProperties", values}}
		if nullable && !g.opt.NonNullCollections {
			s = orNull(s)
		}
	case reflect.Struct:
		ref, err := g.ref(t)
		if err != nil {
			return nil, err
		}
		s = object{{"$ref", ref}}
	default:
		return nil, fmt.Errorf("jsonschema: %s (%s) has no JSON form", t, t.Kind())
	}
	if e, ok := g.opt.Enums[t.String()]; ok && t.Name() != "" {
		s = withEnum(s, e)
	}
	return s, nil
}

// ref returns the reference to struct type t's definition, writing the definition first.
func (g *generator) ref(t reflect.Type) (string, error) {
	if name, ok := g.names[t]; ok {
		if name == "" {
			return "#", nil
		}
		return "#/$defs/" + name, nil
	}
	if t.Name() == "" {
		return "", fmt.Errorf("jsonschema: anonymous struct types are not supported (%s)", t)
	}
	name := t.Name()
	if g.used[name] {
		// Two packages' types of one name: qualify the later one with its package.
		name = strings.ReplaceAll(t.String(), ".", "_")
	}
	g.used[name] = true
	g.names[t] = name
	s, err := g.structSchema(t)
	if err != nil {
		return "", err
	}
	g.defs[name] = s
	return "#/$defs/" + name, nil
}

// orNull widens a schema to allow null too: "type" becomes a list with "null" in it (and an
// enum gets null), or, for a reference, anyOf the schema or null.
func orNull(s object) object {
	if len(s) > 0 && s[0].key == "type" {
		if typ, ok := s[0].value.(string); ok {
			out := object{{"type", []string{typ, "null"}}}
			for _, m := range s[1:] {
				if e, ok := m.value.([]any); ok && m.key == "enum" {
					m = kv{"enum", append(append([]any{}, e...), nil)}
				}
				out = append(out, m)
			}
			return out
		}
	}
	return object{{"anyOf", []any{s, object{{"type", "null"}}}}}
}
