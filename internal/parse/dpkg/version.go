package dpkg

import "strings"

// CompareVersions orders two Debian version strings the way dpkg --compare-versions does:
// it returns -1, 0 or 1. Strings that are not valid Debian versions are still ordered
// deterministically (by the same algorithm), never rejected, so kernel release strings such
// as "7.0.0-1014-aws" compare as grub's 10_linux orders them.
func CompareVersions(a, b string) int {
	ea, ua, ra := splitVersion(a)
	eb, ub, rb := splitVersion(b)
	if c := compareEpoch(ea, eb); c != 0 {
		return c
	}
	if c := compareFragment(ua, ub); c != 0 {
		return c
	}
	return compareFragment(ra, rb)
}

// Upstream is a Debian version's upstream part, without the epoch ("1:") and the revision
// (after the last '-'): "570.172.08-0ubuntu0.24.04.1" is upstream 570.172.08.
func Upstream(v string) string {
	_, upstream, _ := splitVersion(v)
	return upstream
}

func splitVersion(v string) (epoch, upstream, revision string) {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, ':'); i >= 0 {
		epoch, v = v[:i], v[i+1:]
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

func compareEpoch(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return sign(strings.Compare(a, b))
}

// order is dpkg's weight of a non-digit character: '~' sorts before everything, even the end
// of the string; letters sort before other characters.
func order(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return 0
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		return int(c)
	case c == '~':
		return -1
	default:
		return int(c) + 256
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func compareFragment(a, b string) int {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		// Non-digit prefix, character by character.
		for (i < len(a) && !isDigit(a[i])) || (j < len(b) && !isDigit(b[j])) {
			ac, bc := 0, 0
			if i < len(a) {
				ac = order(a[i])
			}
			if j < len(b) {
				bc = order(b[j])
			}
			if ac != bc {
				return sign(ac - bc)
			}
			if i < len(a) {
				i++
			}
			if j < len(b) {
				j++
			}
		}
		// Digit run, compared numerically without overflow: skip leading zeros, then
		// the longer run is larger, else the first differing digit decides.
		for i < len(a) && a[i] == '0' {
			i++
		}
		for j < len(b) && b[j] == '0' {
			j++
		}
		si, sj := i, j
		for i < len(a) && isDigit(a[i]) {
			i++
		}
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		da, db := a[si:i], b[sj:j]
		if len(da) != len(db) {
			if len(da) < len(db) {
				return -1
			}
			return 1
		}
		if c := strings.Compare(da, db); c != 0 {
			return c
		}
	}
	return 0
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
