package awsfake

// The helpers in this file read an EC2 query body (already split into
// url.Values). The resource files' parsers build on them: they are pure,
// never panic, and reject what EC2 rejects with an error whose text is
// "Code: message", so the handler can answer in EC2's wire format (see
// inputError).

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// inputError is a parse error that already names the EC2 error code.
func inputError(code, format string, args ...any) error {
	return fmt.Errorf("%s: %s", code, fmt.Sprintf(format, args...))
}

const (
	maxListIndex = 1000 // EC2 caps list parameters well below this
	maxTagKey    = 128
	maxTagValue  = 256
	maxTagsPer   = 50
)

// listIndices returns the distinct N (1..maxListIndex) of keys "prefix.N" or
// "prefix.N.rest", sorted. Iterating the keys that are present, rather than
// counting up from 1, keeps a hostile "Filter.99999999.Name" cheap.
func listIndices(form url.Values, prefix string) []int {
	seen := map[int]bool{}
	for k := range form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(num)
		if err != nil || i < 1 || i > maxListIndex {
			continue
		}
		seen[i] = true
	}
	out := make([]int, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// indexedList collects form values named prefix.1, prefix.2, ... in index order.
func indexedList(form url.Values, prefix string) []string {
	type kv struct {
		i int
		v string
	}
	var items []kv
	for k, vs := range form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok || len(vs) == 0 {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil || i < 1 {
			continue
		}
		items = append(items, kv{i, vs[0]})
	}
	sort.Slice(items, func(a, b int) bool { return items[a].i < items[b].i })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.v
	}
	return out
}

// boolParam reads an optional "true"/"false" parameter.
func boolParam(form url.Values, name string) (bool, error) {
	switch v := form.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, inputError("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Expected: 'true' or 'false'.", v, name)
	}
}

// intParam reads an optional integer parameter within [lo, hi]; def when absent.
func intParam(form url.Values, name string, def, lo, hi int) (int, error) {
	v := form.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, inputError("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Expecting a value between %d and %d", v, name, lo, hi)
	}
	return n, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// ID shapes: EC2 ids are a prefix, a dash and 8 or 17 lowercase hex digits.
// The fake also accepts the seed's and tests' hand-written ids, which use
// other characters after the dash, so only the prefix is checked strictly.
var idShape = regexp.MustCompile(`^[a-z]+-[0-9a-zA-Z]{1,32}$`)

// checkID reports InvalidXxx.Malformed when id lacks the resource's prefix.
func checkID(id, prefix, malformedCode string) error {
	if !strings.HasPrefix(id, prefix+"-") || !idShape.MatchString(id) {
		return inputError(malformedCode, "Invalid id: \"%s\" (expecting \"%s-...\")", id, prefix)
	}
	return nil
}
