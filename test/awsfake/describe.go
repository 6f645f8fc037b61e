package awsfake

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ImageFilter is one EC2 Filter.N.Name / Filter.N.Value.M group.
type ImageFilter struct {
	Name   string
	Values []string
}

// Filter is one EC2 Filter.N.Name / Filter.N.Value.M group.
type Filter = ImageFilter

// DescribeInput is the common shape of the Describe* calls the fake serves:
// ids, filters and optional paging.
type DescribeInput struct {
	IDs        []string
	Filters    []Filter
	MaxResults int
	NextToken  string
}

func parseDescribe(form url.Values, idParam, idPrefix, malformedCode string, known map[string]bool, maxResultsLo int) (DescribeInput, error) {
	in := DescribeInput{IDs: indexedList(form, idParam)}
	for _, id := range in.IDs {
		if err := checkID(id, idPrefix, malformedCode); err != nil {
			return in, err
		}
	}
	var err error
	if in.Filters, err = parseFilters(form, known, true); err != nil {
		return in, err
	}
	if in.MaxResults, err = intParam(form, "MaxResults", 0, maxResultsLo, 1000); err != nil {
		return in, err
	}
	if in.MaxResults > 0 && len(in.IDs) > 0 {
		return in, inputError("InvalidParameterCombination", "The parameter %s cannot be used with the parameter maxResults", idParam)
	}
	in.NextToken = form.Get("NextToken")
	return in, nil
}

// parseFilters reads Filter.N.Name / Filter.N.Value.M, accepting only the
// names in known (and tag:KEY when tags is true).
func parseFilters(form url.Values, known map[string]bool, tags bool) ([]Filter, error) {
	var out []Filter
	for _, i := range listIndices(form, "Filter") {
		name := form.Get(fmt.Sprintf("Filter.%d.Name", i))
		if name == "" {
			return nil, inputError("InvalidParameterValue", "Filter.%d.Name is empty; every filter needs a name", i)
		}
		if !known[name] && !(tags && strings.HasPrefix(name, "tag:") && len(name) > len("tag:")) {
			return nil, inputError("InvalidParameterValue", "The filter '%s' is invalid", name)
		}
		out = append(out, Filter{Name: name, Values: indexedList(form, fmt.Sprintf("Filter.%d.Value", i))})
	}
	return out, nil
}

// matchFilters applies EC2 filter semantics: every filter must match; within
// one, any value. field returns the resource's values for a filter name.
func matchFilters(filters []Filter, tags map[string]string, field func(name string) []string) bool {
	for _, f := range filters {
		var have []string
		switch {
		case f.Name == "tag-key":
			have = sortedKeys(tags)
		case strings.HasPrefix(f.Name, "tag:"):
			v, ok := tags[strings.TrimPrefix(f.Name, "tag:")]
			if !ok {
				return false
			}
			have = []string{v}
		default:
			have = field(f.Name)
		}
		hit := false
		for _, want := range f.Values {
			for _, h := range have {
				if matchWildcard(want, h) {
					hit = true
				}
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// page cuts a sorted result list for MaxResults/NextToken.
func page[T any](items []T, maxResults int, token string) ([]T, string, error) {
	if maxResults == 0 && token == "" {
		return items, "", nil
	}
	start := 0
	if token != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(token, "fake-next-"))
		if err != nil || n < 0 || n > len(items) || !strings.HasPrefix(token, "fake-next-") {
			return nil, "", fmt.Errorf("the token %q is invalid", token)
		}
		start = n
	}
	if maxResults == 0 {
		maxResults = 1000
	}
	end := min(start+maxResults, len(items))
	next := ""
	if end < len(items) {
		next = fmt.Sprintf("fake-next-%d", end)
	}
	return items[start:end], next, nil
}

// matchWildcard implements the EC2 filter glob: '*' matches any run of
// characters, '?' exactly one, and everything else literally (case-sensitive).
func matchWildcard(pattern, s string) bool {
	// Iterative glob with backtracking to the last '*': linear in practice and
	// free of the exponential blow-up of a naive recursive matcher.
	p, i := []rune(pattern), []rune(s)
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(i) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == i[si]) && p[pi] != '*':
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
