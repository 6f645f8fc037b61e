package jsonschema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
)

// compile compiles a generated schema with an independent validator (formats asserted), which
// also checks it against the draft 2020-12 meta-schema.
func compile(t *testing.T, schema []byte) *validator.Schema {
	t.Helper()
	doc, err := validator.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("the schema is not JSON: %v\n%s", err, schema)
	}
	c := validator.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v\n%s", err, schema)
	}
	return s
}

func validate(s *validator.Schema, instance string) error {
	v, err := validator.UnmarshalJSON(strings.NewReader(instance))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

type status string

type inner struct {
	Name  string   `json:"name"`
	Score *float64 `json:"score"`
}

type embedded struct {
	Shared string `json:"shared"`
}

type outer struct {
	embedded
	Version  int               `json:"version"`
	Result   string            `json:"result"`
	Status   status            `json:"status"`
	Maybe    *status           `json:"maybe"`
	When     time.Time         `json:"when"`
	Tags     []string          `json:"tags"`
	Labels   map[string]string `json:"labels"`
	Inner    *inner            `json:"inner"`
	Inners   []inner           `json:"inners"`
	Optional string            `json:"optional,omitempty"`
	Code     *int              `json:"code,omitempty"`
	Count    uint              `json:"count"`
	Any      any               `json:"any"`
	Fixed    [2]int            `json:"fixed"`
	Ignored  string            `json:"-"`
	private  string
}

var outerOptions = Options{
	ID:    "https://example.com/outer.schema.json",
	Title: "outer",
	Enums: map[string][]any{
		"jsonschema.outer.Result": {"pass", "fail"},
		"jsonschema.status":       {"ok", "bad"},
	},
	Consts: map[string]any{"jsonschema.outer.Version": 3},
}

func TestGenerateRoundTrips(t *testing.T) {
	schema, err := Generate(reflect.TypeFor[outer](), outerOptions)
	if err != nil {
		t.Fatal(err)
	}
	s := compile(t, schema)
	score, bad := 1.5, status("bad")
	code := 0
	valid := []outer{
		{Version: 3, Result: "pass", Status: "ok", When: time.Date(2026, 10, 2, 8, 0, 0, 0, time.UTC)},
		{
			embedded: embedded{Shared: "s"}, Version: 3, Result: "fail", Status: "bad", Maybe: &bad,
			Tags: []string{"a"}, Labels: map[string]string{"k": "v"}, Inner: &inner{Name: "n", Score: &score},
			Inners: []inner{{Name: "x"}}, Optional: "o", Code: &code, Count: 7, Any: map[string]any{"x": []any{1, "y"}},
		},
	}
	for i, v := range valid {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(s, string(b)); err != nil {
			t.Errorf("value %d marshals to %s, which the schema refuses: %v", i, b, err)
		}
	}
}

func TestGenerateRefusesWhatTheTypesForbid(t *testing.T) {
	schema, err := Generate(reflect.TypeFor[outer](), outerOptions)
	if err != nil {
		t.Fatal(err)
	}
	s := compile(t, schema)
	good := map[string]any{}
	if err := json.Unmarshal(must(json.Marshal(outer{Version: 3, Result: "pass", Status: "ok"})), &good); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(m map[string]any)
	}{
		{"a required field missing", func(m map[string]any) { delete(m, "result") }},
		{"an embedded field missing", func(m map[string]any) { delete(m, "shared") }},
		{"an unknown field", func(m map[string]any) { m["extra"] = 1 }},
		{"a value outside the field's enum", func(m map[string]any) { m["result"] = "maybe" }},
		{"a value outside the named type's enum", func(m map[string]any) { m["status"] = "meh" }},
		{"a value outside the enum behind a pointer", func(m map[string]any) { m["maybe"] = "meh" }},
		{"another const", func(m map[string]any) { m["version"] = 2 }},
		{"a string where an integer goes", func(m map[string]any) { m["count"] = "7" }},
		{"a negative unsigned integer", func(m map[string]any) { m["count"] = -1 }},
		{"a fraction where an integer goes", func(m map[string]any) { m["count"] = 1.5 }},
		{"a time that is not RFC 3339", func(m map[string]any) { m["when"] = "yesterday" }},
		{"a nested object with an unknown field", func(m map[string]any) { m["inner"] = map[string]any{"name": "n", "score": nil, "x": 1} }},
		{"a nested object without its required field", func(m map[string]any) { m["inners"] = []any{map[string]any{"score": 1}} }},
		{"null for a non-pointer field", func(m map[string]any) { m["result"] = nil }},
		{"null for an omitempty pointer", func(m map[string]any) { m["code"] = nil }},
		{"a map value of the wrong type", func(m map[string]any) { m["labels"] = map[string]any{"k": 1} }},
		{"an array of the wrong length", func(m map[string]any) { m["fixed"] = []any{1} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]any{}
			_ = json.Unmarshal(must(json.Marshal(good)), &m)
			tt.change(m)
			b := must(json.Marshal(m))
			if err := validate(s, string(b)); err == nil {
				t.Errorf("the schema accepts %s", b)
			}
		})
	}
	// Null is what encoding/json writes for these, so the schema takes it.
	for _, field := range []string{"maybe", "inner", "tags", "labels", "inners"} {
		m := map[string]any{}
		_ = json.Unmarshal(must(json.Marshal(good)), &m)
		m[field] = nil
		if err := validate(s, string(must(json.Marshal(m)))); err != nil {
			t.Errorf("%s: null refused: %v", field, err)
		}
	}
}

func TestNonNullCollections(t *testing.T) {
	opt := outerOptions
	opt.NonNullCollections = true
	schema, err := Generate(reflect.TypeFor[outer](), opt)
	if err != nil {
		t.Fatal(err)
	}
	s := compile(t, schema)
	m := map[string]any{}
	_ = json.Unmarshal(must(json.Marshal(outer{Version: 3, Result: "pass", Status: "ok", Tags: []string{}, Labels: map[string]string{}, Inners: []inner{}})), &m)
	if err := validate(s, string(must(json.Marshal(m)))); err != nil {
		t.Fatalf("empty collections refused: %v", err)
	}
	for _, field := range []string{"tags", "labels", "inners"} {
		c := map[string]any{}
		_ = json.Unmarshal(must(json.Marshal(m)), &c)
		c[field] = nil
		if validate(s, string(must(json.Marshal(c)))) == nil {
			t.Errorf("%s: null accepted with NonNullCollections", field)
		}
	}
}

type node struct {
	Name     string `json:"name"`
	Children []node `json:"children"`
}

type tree struct {
	Root node `json:"root"`
}

func TestGenerateRecursiveTypes(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[node](), reflect.TypeFor[tree]()} {
		schema, err := Generate(typ, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := compile(t, schema)
		var v any = node{Name: "a", Children: []node{{Name: "b", Children: []node{{Name: "c"}}}}}
		if typ == reflect.TypeFor[tree]() {
			v = tree{Root: v.(node)}
		}
		if err := validate(s, string(must(json.Marshal(v)))); err != nil {
			t.Errorf("%s: %v\n%s", typ, err, schema)
		}
		bad := `{"name": "a", "children": [{"name": "b", "children": [{"children": []}]}]}`
		if typ == reflect.TypeFor[tree]() {
			bad = `{"root": ` + bad + `}`
		}
		if validate(s, bad) == nil {
			t.Errorf("%s: a grandchild without its name accepted", typ)
		}
	}
}

type selfMarshaling struct{}

func (selfMarshaling) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

type textMarshaling struct{}

func (textMarshaling) MarshalText() ([]byte, error) { return []byte("x"), nil }

type dupA struct {
	A string `json:"a"`
}

func TestGenerateRefusesWhatItCannotDescribe(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{"not a struct", reflect.TypeFor[[]string](), "is not a struct"},
		{"a JSON marshaler", reflect.TypeFor[struct {
			X selfMarshaling `json:"x"`
		}](), "marshals itself"},
		{"a text marshaler", reflect.TypeFor[struct {
			X textMarshaling `json:"x"`
		}](), "marshals itself"},
		{"int map keys", reflect.TypeFor[struct {
			X map[int]string `json:"x"`
		}](), "string keys"},
		{"a channel", reflect.TypeFor[struct {
			X chan int `json:"x"`
		}](), "no JSON form"},
		{"bytes", reflect.TypeFor[struct {
			X []byte `json:"x"`
		}](), "byte slices"},
		{"the string option", reflect.TypeFor[struct {
			X int `json:"x,string"`
		}](), `option "string"`},
		{"two fields of one name", reflect.TypeFor[struct {
			dupA
			B string `json:"a"`
		}](), `both marshal as "a"`},
		{"an anonymous nested struct", reflect.TypeFor[struct {
			X struct {
				Y int `json:"y"`
			} `json:"x"`
		}](), "anonymous struct"},
		{"a const on a nullable field", reflect.TypeFor[struct {
			V *int `json:"v"`
		}](), "may be null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := Options{Consts: map[string]any{tt.typ.String() + ".V": 1}}
			_, err := Generate(tt.typ, opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	first, err := Generate(reflect.TypeFor[outer](), outerOptions)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		again, err := Generate(reflect.TypeFor[outer](), outerOptions)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("two runs differ:\n%s\n---\n%s", first, again)
		}
	}
	// Properties keep the fields' order: a reader sees them as the Go type lists them.
	if i, j := bytes.Index(first, []byte(`"version"`)), bytes.Index(first, []byte(`"result"`)); i < 0 || j < i {
		t.Errorf("properties not in field order:\n%s", first)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
