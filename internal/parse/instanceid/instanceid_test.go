package instanceid

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"i-0123456789abcdef0\n", "i-0123456789abcdef0"},
		{"i-1234abcd", "i-1234abcd"},
		{"  i-0a1b2c3d4e5f60718  \n", "i-0a1b2c3d4e5f60718"},
		{"", ""},
		{"i-0123456789ABCDEF0", ""},
		{"i-0123456789abcdef", ""},
		{"iid-datasource-none", ""}, // cloud-init's id without a data source
		{"i-0123456789abcdef0\ni-1234abcd", ""},
		{"<html>404 - Not Found</html>", ""},
	} {
		got, err := Parse(tc.in)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"i-0123456789abcdef0\n", "i-1234abcd", "", "iid-datasource-none"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, err := Parse(in)
		if err != nil {
			if id != "" {
				t.Errorf("Parse(%q) = %q with error %v", in, id, err)
			}
			return
		}
		if !strings.HasPrefix(id, "i-") || (len(id) != 10 && len(id) != 19) || !strings.Contains(in, id) {
			t.Errorf("Parse(%q) = %q", in, id)
		}
	})
}
