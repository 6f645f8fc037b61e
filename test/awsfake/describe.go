package awsfake

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Every Describe* the fake serves goes through this file: parseDescribe reads
// its ids, filters and paging, describe answers it from the resources a
// handler hands over. The handlers keep only what is theirs: where the
// resources live, which filter names mean which field, and their XML.

// Filter is one EC2 Filter.N.Name / Filter.N.Value.M group.
type Filter struct {
	Name   string
	Values []string
}

// ImageFilter is the name DescribeImagesInput's filters had before every
// Describe* shared Filter.
type ImageFilter = Filter

// DescribeInput is the common shape of the Describe* calls the fake serves:
// ids, filters and optional paging.
type DescribeInput struct {
	IDs        []string
	Filters    []Filter
	MaxResults int
	NextToken  string
}

// describeParams says how one Describe* call names its parameters and what
// it accepts.
type describeParams struct {
	idParam       string          // "InstanceId" for InstanceId.N; "" when the call takes no ids
	idPrefix      string          // "i": ids must look like i-...; "" accepts any id
	malformedCode string          // EC2's code for an id without the prefix
	filters       map[string]bool // the filter names the call knows
	tagFilters    bool            // tag:KEY filters are accepted too
	maxResultsLo  int             // MaxResults' lower bound (EC2 varies it per call); 0: no paging
}

func parseDescribe(form url.Values, p describeParams) (DescribeInput, error) {
	var in DescribeInput
	if p.idParam != "" {
		in.IDs = indexedList(form, p.idParam)
	}
	if p.idPrefix != "" {
		for _, id := range in.IDs {
			if err := checkID(id, p.idPrefix, p.malformedCode); err != nil {
				return in, err
			}
		}
	}
	var err error
	if in.Filters, err = parseFilters(form, p.filters, p.tagFilters); err != nil {
		return in, err
	}
	if p.maxResultsLo == 0 {
		return in, nil
	}
	if in.MaxResults, err = intParam(form, "MaxResults", 0, p.maxResultsLo, 1000); err != nil {
		return in, err
	}
	if in.MaxResults > 0 && len(in.IDs) > 0 {
		return in, inputError("InvalidParameterCombination", "The parameter %s cannot be used with the parameter maxResults", p.idParam)
	}
	in.NextToken = form.Get("NextToken")
	return in, nil
}

// describeSpec hands describe the resources of one Describe* call and how to
// read them. Hooks left nil do nothing.
type describeSpec[R any] struct {
	in  DescribeInput
	all []R // every resource the caller may see, in the order the answer lists them
	id  func(R) string
	// notFound is EC2's error for requested ids that do not exist (in request order).
	notFound func(missing []string) response
	// keep selects beyond ids and filters (owners, deprecation, names).
	keep func(R) bool
	// observe settles a resource in a transitional state before filters see
	// its state.
	observe func(R)
	tags    func(R) map[string]string
	// field returns a resource's values for a filter name.
	field func(r R, filter string) []string
}

// describe answers a Describe*: the requested ids (all of them must exist),
// then keep, observe and the filters, then one page. It returns the page and
// the next token, or EC2's error.
func describe[R any](sp describeSpec[R]) ([]R, string, response, bool) {
	picked := sp.all
	if len(sp.in.IDs) > 0 {
		byID := make(map[string]bool, len(sp.all))
		for _, r := range sp.all {
			byID[sp.id(r)] = true
		}
		var missing []string
		for _, id := range sp.in.IDs {
			if !byID[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return nil, "", sp.notFound(missing), false
		}
		picked = nil
		for _, r := range sp.all {
			if slices.Contains(sp.in.IDs, sp.id(r)) {
				picked = append(picked, r)
			}
		}
	}
	var out []R
	for _, r := range picked {
		if sp.keep != nil && !sp.keep(r) {
			continue
		}
		if sp.observe != nil {
			sp.observe(r)
		}
		var tags map[string]string
		if sp.tags != nil {
			tags = sp.tags(r)
		}
		if matchFilters(sp.in.Filters, tags, func(name string) []string { return sp.field(r, name) }) {
			out = append(out, r)
		}
	}
	out, next, err := page(out, sp.in.MaxResults, sp.in.NextToken)
	if err != nil {
		return nil, "", badRequest("InvalidParameterValue", "%v", err), false
	}
	return out, next, response{}, true
}

// notFoundFirst is the usual EC2 answer for missing ids: it names the first.
func notFoundFirst(code, format string) func([]string) response {
	return func(missing []string) response { return badRequest(code, format, missing[0]) }
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
