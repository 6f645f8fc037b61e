package awstest

import (
	"encoding/json"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var jsonFence = regexp.MustCompile("(?ms)^\\s*```json\\s*\\n(.*?)^\\s*```")

// PolicyActions returns, sorted, the actions every IAM policy document in the Markdown or MDX
// file at file grants: each fenced json block with a Statement, its Allow statements' Action
// (a string or a list), as written (IAM wildcards kept). It fails the test when the file has
// no policy or a json block that does not parse.
func PolicyActions(t testing.TB, file string) []string {
	t.Helper()
	var out []string
	for _, m := range jsonFence.FindAllStringSubmatch(ReadFile(t, file), -1) {
		var doc struct {
			Statement []struct {
				Effect string
				Action json.RawMessage
			}
		}
		if err := json.Unmarshal([]byte(m[1]), &doc); err != nil {
			t.Fatalf("%s: a json block does not parse: %v\n%s", file, err, m[1])
		}
		for _, st := range doc.Statement {
			if st.Effect != "Allow" {
				continue
			}
			var one string
			var many []string
			switch {
			case json.Unmarshal(st.Action, &one) == nil:
				out = append(out, one)
			case json.Unmarshal(st.Action, &many) == nil:
				out = append(out, many...)
			default:
				t.Fatalf("%s: a statement's Action is neither a string nor a list: %s", file, st.Action)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no IAM policy (a ```json block with Allow statements)", file)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Granted reports whether one of the policy's actions matches action, as IAM matches them:
// case-insensitively, with * and ? wildcards.
func Granted(policy []string, action string) bool {
	for _, p := range policy {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(action)); ok {
			return true
		}
	}
	return false
}

// Ungranted returns the actions the policy does not grant.
func Ungranted(policy, actions []string) []string {
	var out []string
	for _, a := range actions {
		if !Granted(policy, a) {
			out = append(out, a)
		}
	}
	return out
}

// ClientActions returns "service:Method" for every method of the client interface I (the
// part of an AWS SDK client a package calls): each is an AWS action of that name.
func ClientActions[I any](service string) []string {
	typ := reflect.TypeFor[I]()
	out := make([]string, 0, typ.NumMethod())
	for i := range typ.NumMethod() {
		out = append(out, service+":"+typ.Method(i).Name)
	}
	return out
}

// ReadFile returns the file's contents, failing the test when it is unreadable.
func ReadFile(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
