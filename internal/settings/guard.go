package settings

import (
	"fmt"
	"path"
	"strings"
)

// GuardPolicy is the guard block: it adjusts which packages the guard holds to account. Patterns are shell globs
// (path.Match syntax) matched against package names as the guard's snapshot keys them.
type GuardPolicy struct {
	// Include adds packages. A pattern without glob characters names one package, which is
	// guarded even when it is not on the host (then the holds check fails: you asked for it).
	// Include also wins over the default exclusions (DefaultExcludes).
	Include []string
	// Exclude removes packages, defaults and Include alike.
	Exclude []string
}

// Validate reports every malformed pattern, in order, naming the setting.
func (p GuardPolicy) Validate() []error {
	var errs []error
	for _, list := range []struct {
		name string
		pats []string
	}{{"guard.include", p.Include}, {"guard.exclude", p.Exclude}} {
		for i, pat := range list.pats {
			if strings.TrimSpace(pat) == "" {
				errs = append(errs, fmt.Errorf("%s[%d]: empty package pattern", list.name, i))
				continue
			}
			if _, err := path.Match(pat, ""); err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: package pattern %q: %w", list.name, i, pat, err))
			}
		}
	}
	return errs
}
