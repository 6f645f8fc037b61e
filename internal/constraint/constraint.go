// Package constraint matches tool-reported versions (driver, EFA, libfabric, kernel, ...)
// against an expected version: either one exact version or comma-separated clauses
// (">= 3.3, < 4").
//
// Versions are dotted numbers followed by an optional suffix, as the host tools print them:
// "595.91.07", "2.6.0amzn1.0", "1.13.0g", "7.0.0-1014-aws". Unlike semver, a suffix is a
// build tag, not a pre-release: "2.6.0amzn1.0" orders equal to "2.6.0". Rules:
//
//   - A bare version or "=" / "==": when the expected version has no suffix, the numeric
//     parts must be equal (missing parts count as 0, so "3.3" = "3.3.0") and any suffix on
//     the actual version is accepted ("2.6.0" matches "2.6.0amzn1.0", "3.3.0" matches
//     "3.3.0g"). When the expected version carries a suffix ("7.0.0-1014-aws",
//     "2.6.0amzn1.0"), the actual string must equal it exactly: kernel ABI strings and
//     vendor builds are compared as strings.
//   - "!=" is the negation of "=".
//   - ">", ">=", "<", "<=" compare the numeric parts; when both versions have a numeric
//     revision right after a '-' ("-1014-aws"), that revision breaks ties, so kernel ABI
//     numbers order as expected.
//   - "~> X.Y" means ">= X.Y, < (X+1)"; "~> X.Y.Z" means ">= X.Y.Z, < X.(Y+1)"; "~> X"
//     means ">= X, < X+1" (the pessimistic operator of HashiCorp tools).
package constraint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Constraint is a parsed expected version. The zero value matches nothing and Check reports
// an error, so an unset constraint can never pass by accident.
type Constraint struct {
	raw     string
	clauses []clause
}

type clause struct {
	op  string
	ver Version
}

// Version is a parsed tool version: numeric dotted parts plus whatever follows them.
type Version struct {
	Raw    string
	Parts  []int
	Suffix string
}

// ops is ordered so that two-character operators are tried before their one-character
// prefixes.
var ops = []string{">=", "<=", "!=", "~>", "==", ">", "<", "="}

// Parse reads an exact version ("595.91.07") or comma-separated clauses (">= 3.3, < 4").
func Parse(s string) (Constraint, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return Constraint{}, errors.New("constraint is empty: give a version such as \"3.3.0\" or clauses such as \">= 3.3, < 4\"")
	}
	c := Constraint{raw: raw}
	for _, part := range strings.Split(raw, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return Constraint{}, fmt.Errorf("constraint %q: empty clause (stray comma?)", raw)
		}
		op := "="
		rest := part
		for _, o := range ops {
			if r, ok := strings.CutPrefix(part, o); ok {
				op, rest = o, strings.TrimSpace(r)
				break
			}
		}
		if op == "==" {
			op = "="
		}
		if rest == "" {
			return Constraint{}, fmt.Errorf("constraint %q: clause %q has an operator but no version", raw, part)
		}
		if strings.ContainsAny(rest, " \t") {
			return Constraint{}, fmt.Errorf("constraint %q: clause %q: separate clauses with commas (\">= 3.3, < 4\")", raw, part)
		}
		v, err := ParseVersion(rest)
		if err != nil {
			return Constraint{}, fmt.Errorf("constraint %q: clause %q: %w", raw, part, err)
		}
		if op == "~>" && v.Suffix != "" {
			return Constraint{}, fmt.Errorf("constraint %q: clause %q: \"~>\" takes a plain dotted version, not %q", raw, part, rest)
		}
		c.clauses = append(c.clauses, clause{op: op, ver: v})
	}
	return c, nil
}

// MustParse is Parse for constants in code and tests; it panics on a bad constraint.
func MustParse(s string) Constraint {
	c, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

// String returns the constraint as written (trimmed).
func (c Constraint) String() string { return c.raw }

// Check reports whether actual satisfies every clause. An actual version that does not start
// with a number is an error, never a silent false.
func (c Constraint) Check(actual string) (bool, error) {
	if len(c.clauses) == 0 {
		return false, errors.New("constraint is empty")
	}
	a, err := ParseVersion(actual)
	if err != nil {
		return false, fmt.Errorf("checking %q against %q: %w", strings.TrimSpace(actual), c.raw, err)
	}
	for _, cl := range c.clauses {
		if !cl.match(a) {
			return false, nil
		}
	}
	return true, nil
}

func (cl clause) match(a Version) bool {
	switch cl.op {
	case "=":
		return equal(cl.ver, a)
	case "!=":
		return !equal(cl.ver, a)
	case ">":
		return compare(a, cl.ver) > 0
	case ">=":
		return compare(a, cl.ver) >= 0
	case "<":
		return compare(a, cl.ver) < 0
	case "<=":
		return compare(a, cl.ver) <= 0
	case "~>":
		if compare(a, cl.ver) < 0 {
			return false
		}
		return compareParts(a.Parts, pessimisticUpper(cl.ver.Parts)) < 0
	}
	return false
}

func equal(want, a Version) bool {
	if want.Suffix != "" {
		return a.Raw == want.Raw
	}
	return compareParts(a.Parts, want.Parts) == 0
}

// pessimisticUpper returns the exclusive upper bound of "~> parts".
func pessimisticUpper(p []int) []int {
	if len(p) == 1 {
		return []int{p[0] + 1}
	}
	up := append([]int(nil), p[:len(p)-1]...)
	up[len(up)-1]++
	return up
}

// ParseVersion splits a tool version into its dotted numeric prefix and suffix. A leading
// "v" is accepted ("v1.21.1").
func ParseVersion(s string) (Version, error) {
	raw := strings.TrimSpace(s)
	t := raw
	if len(t) > 1 && (t[0] == 'v' || t[0] == 'V') && t[1] >= '0' && t[1] <= '9' {
		t = t[1:]
	}
	if t == "" || t[0] < '0' || t[0] > '9' {
		return Version{}, fmt.Errorf("version %q does not start with a number", raw)
	}
	v := Version{Raw: raw}
	i := 0
	for {
		j := i
		for j < len(t) && t[j] >= '0' && t[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(t[i:j])
		if err != nil {
			return Version{}, fmt.Errorf("version %q: number %q out of range", raw, t[i:j])
		}
		v.Parts = append(v.Parts, n)
		i = j
		// Continue only on ".<digit>"; "2.6.0amzn1.0" stops at "amzn".
		if i+1 < len(t) && t[i] == '.' && t[i+1] >= '0' && t[i+1] <= '9' {
			i++
			continue
		}
		break
	}
	v.Suffix = t[i:]
	return v, nil
}

// Compare orders a and b: -1, 0 or +1. See the package comment for how suffixes count.
func Compare(a, b Version) int { return compare(a, b) }

func compare(a, b Version) int {
	if c := compareParts(a.Parts, b.Parts); c != 0 {
		return c
	}
	ra, oka := revision(a.Suffix)
	rb, okb := revision(b.Suffix)
	if oka && okb {
		switch {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
	}
	return 0
}

func compareParts(a, b []int) int {
	n := max(len(a), len(b))
	for i := 0; i < n; i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	}
	return 0
}

// revision reads the number in a "-1014-aws" style suffix.
func revision(suffix string) (int, bool) {
	if len(suffix) < 2 || suffix[0] != '-' {
		return 0, false
	}
	j := 1
	for j < len(suffix) && suffix[j] >= '0' && suffix[j] <= '9' {
		j++
	}
	if j == 1 {
		return 0, false
	}
	n, err := strconv.Atoi(suffix[1:j])
	if err != nil {
		return 0, false
	}
	return n, true
}
