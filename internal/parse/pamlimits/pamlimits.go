// Package pamlimits reads the files pam_limits applies at a login (/etc/security/limits.conf,
// /etc/security/limits.d/*.conf, the PAM stack of sshd) and works out the locked-memory limit
// a new login session gets, the way Linux-PAM's pam_limits.c does it: the same line syntax,
// domain matching, priorities (a user entry beats a group entry beats the wildcard; among
// equals the later line wins), units (KiB), "unlimited" spellings and the "<domain> -"
// no-limits line. The probe runs nothing here: every function is pure.
//
// Why not read `ulimit -l`: the limit of a session is fixed when its PAM session opens, so
// Packer's SSH connection, opened before any layer ran, cannot see a layer's limits file.
package pamlimits

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// ConfPath is pam_limits' main file; it reads Dir's *.conf files after it, in name order.
const (
	ConfPath = "/etc/security/limits.conf"
	Dir      = "/etc/security/limits.d"
)

// File is one configuration file as the probe printed it.
type File struct {
	Path string
	Text string
}

// ParseFiles reads the probe's dump of files: a "==> PATH" line opens a file and every line
// of it follows prefixed with "| " (so no file content can pass for a header).
func ParseFiles(out string) ([]File, error) {
	var files []File
	for n, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		switch {
		case line == "" && len(files) == 0:
		case strings.HasPrefix(line, "==> "):
			p := strings.TrimPrefix(line, "==> ")
			if !path.IsAbs(p) {
				return nil, fmt.Errorf("line %d: file header %q does not name an absolute path", n+1, line)
			}
			files = append(files, File{Path: p})
		case line == "|" || strings.HasPrefix(line, "| "):
			if len(files) == 0 {
				return nil, fmt.Errorf("line %d: file content before any file header", n+1)
			}
			f := &files[len(files)-1]
			f.Text += strings.TrimPrefix(strings.TrimPrefix(line, "|"), " ") + "\n"
		default:
			return nil, fmt.Errorf("line %d: %q is neither a file header nor a file line", n+1, clip(line))
		}
	}
	return files, nil
}

// Value is an rlimit value in bytes, or infinite.
type Value struct {
	Infinite bool
	Bytes    uint64
}

// Less says whether v is a lower limit than o.
func (v Value) Less(o Value) bool {
	switch {
	case v.Infinite:
		return false
	case o.Infinite:
		return true
	}
	return v.Bytes < o.Bytes
}

func (v Value) String() string {
	if v.Infinite {
		return "unlimited"
	}
	return fmt.Sprintf("%d KiB", v.Bytes/1024)
}

// Line is where a setting came from.
type Line struct {
	File string
	No   int
	Text string
}

func (l Line) String() string { return fmt.Sprintf("%s:%d (%s)", l.File, l.No, l.Text) }

// Setting is a limit a file set, and the line that set it.
type Setting struct {
	Value Value
	From  Line
}

// User is the login as the group database gives it to a new session (initgroups), not as the
// probe's own process has it.
type User struct {
	Name   string
	UID    uint64
	GID    uint64
	Groups []Group
}

// Group is one group of the user.
type Group struct {
	Name string
	GID  uint64
}

func (u User) inGroupNamed(name string) bool {
	return slices.ContainsFunc(u.Groups, func(g Group) bool { return g.Name == name })
}

func (u User) inGroupID(gid uint64) bool {
	return u.GID == gid || slices.ContainsFunc(u.Groups, func(g Group) bool { return g.GID == gid })
}

// ParseUser reads the probe's five lines: name, uid, primary gid, the gids and the group names
// (`id -u`, `id -g`, `id -G`, `id -Gn` of the user).
func ParseUser(out string) (User, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 {
		return User{}, fmt.Errorf("want 5 lines (name, uid, gid, gids, group names), got %d: %q", len(lines), clip(out))
	}
	u := User{Name: strings.TrimSpace(lines[0])}
	if u.Name == "" || strings.ContainsAny(u.Name, " \t") {
		return User{}, fmt.Errorf("user name %q", clip(lines[0]))
	}
	var err error
	if u.UID, err = strconv.ParseUint(strings.TrimSpace(lines[1]), 10, 32); err != nil {
		return User{}, fmt.Errorf("uid %q: %w", clip(lines[1]), err)
	}
	if u.GID, err = strconv.ParseUint(strings.TrimSpace(lines[2]), 10, 32); err != nil {
		return User{}, fmt.Errorf("gid %q: %w", clip(lines[2]), err)
	}
	ids, names := strings.Fields(lines[3]), strings.Fields(lines[4])
	if len(ids) != len(names) {
		return User{}, fmt.Errorf("%d group ids but %d group names", len(ids), len(names))
	}
	for i := range ids {
		g, err := strconv.ParseUint(ids[i], 10, 32)
		if err != nil {
			return User{}, fmt.Errorf("group id %q: %w", clip(ids[i]), err)
		}
		u.Groups = append(u.Groups, Group{Name: names[i], GID: g})
	}
	return u, nil
}

// ProcLimit reads the "Max locked memory" line of /proc/PID/limits (soft, hard, units).
func ProcLimit(line string) (soft, hard Value, err error) {
	f := strings.Fields(line)
	if len(f) != 3 || f[2] != "bytes" {
		return Value{}, Value{}, fmt.Errorf("want \"<soft> <hard> bytes\" of /proc/PID/limits, got %q", clip(line))
	}
	if soft, err = procValue(f[0]); err != nil {
		return Value{}, Value{}, err
	}
	if hard, err = procValue(f[1]); err != nil {
		return Value{}, Value{}, err
	}
	return soft, hard, nil
}

func procValue(s string) (Value, error) {
	if s == "unlimited" {
		return Value{Infinite: true}, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return Value{}, fmt.Errorf("limit %q is neither unlimited nor bytes", clip(s))
	}
	if n == math.MaxUint64 {
		return Value{Infinite: true}, nil
	}
	return Value{Bytes: n}, nil
}

// Source priorities of pam_limits (LIMITS_DEF_*): lower wins, equal overrides.
const (
	srcUser    = 0
	srcGroup   = 1
	srcDefault = 4
	srcNone    = 6
)

// Options are the pam_limits module arguments that change what it reads.
type Options struct {
	// Conf is conf=PATH: only that file is read (no limits.d).
	Conf string
	// RootOnlyLiteral is Debian's and Ubuntu's rule (their limits.conf says it): group and
	// wildcard limits are not applied to root; only a line naming root does.
	RootOnlyLiteral bool
}

// Result is what the files set for the user's memlock.
type Result struct {
	// Soft and Hard are the limits the files set; nil when no line applies.
	Soft, Hard *Setting
	// NoLimits is an applicable "<domain> -" line: pam_limits then sets no limit at all and
	// the session keeps what it inherited; Soft and Hard are nil.
	NoLimits *Line
	// Skipped are lines about memlock that pam_limits skips as invalid (it logs a warning).
	Skipped []Line
}

// Memlock works out the memlock limits the files set for u, reading them in pam_limits'
// order: limits.conf (or conf=), then limits.d/*.conf by name. Files under other paths are
// ignored.
func Memlock(files []File, u User, o Options) Result {
	var order []File
	var dir []File
	main := ConfPath
	if o.Conf != "" {
		main = o.Conf
	}
	for _, f := range files {
		switch {
		case f.Path == main:
			order = append(order, f)
		case o.Conf == "" && path.Dir(f.Path) == Dir && strings.HasSuffix(f.Path, ".conf") && !strings.HasPrefix(path.Base(f.Path), "."):
			dir = append(dir, f)
		}
	}
	// glob(3) sorts by name; sshd runs in the C locale, so bytes.
	slices.SortFunc(dir, func(a, b File) int { return strings.Compare(path.Base(a.Path), path.Base(b.Path)) })
	order = append(order[:min(len(order), 1)], dir...)

	var r Result
	softSrc, hardSrc := srcNone, srcNone
	for _, f := range order {
		for no, raw := range strings.Split(f.Text, "\n") {
			text := strings.TrimSpace(raw)
			if i := strings.IndexByte(text, '#'); i >= 0 {
				text = strings.TrimSpace(text[:i])
			}
			if text == "" {
				continue
			}
			at := Line{File: f.Path, No: no + 1, Text: clip(text)}
			domain, ltype, item, value, n := split(text)
			ltype = strings.ToLower(ltype)
			rng, lo, hi, ok := uidRange(domain)
			if !ok {
				continue // pam_limits: "invalid uid range - skipped"
			}
			if n == 2 && strings.HasPrefix(ltype, "-") {
				if noLimitsApplies(domain, rng, lo, hi, u, o) {
					// pam_limits returns at once and sets no limit, not even those of
					// earlier lines.
					return Result{NoLimits: &at, Skipped: r.Skipped}
				}
				continue
			}
			if n != 4 || strings.ToLower(item) != "memlock" {
				continue
			}
			src, applies := matchDomain(domain, rng, lo, hi, u, o)
			if !applies {
				continue
			}
			soft, hard := false, false
			switch ltype {
			case "soft":
				soft = true
			case "hard":
				hard = true
			case "-":
				soft, hard = true, true
			default:
				r.Skipped = append(r.Skipped, at)
				continue
			}
			v, ok := limitValue(strings.ToLower(value))
			if !ok {
				r.Skipped = append(r.Skipped, at)
				continue
			}
			// process_limit: a higher-priority soft setting stops the line, hard included.
			if soft {
				if softSrc < src {
					continue
				}
				r.Soft, softSrc = &Setting{Value: v, From: at}, src
			}
			if hard {
				if hardSrc < src {
					continue
				}
				r.Hard, hardSrc = &Setting{Value: v, From: at}, src
			}
		}
	}
	return r
}

// split is pam_limits' split(): three blank-separated words and the trimmed rest; n counts
// the fields present.
func split(line string) (domain, ltype, item, value string, n int) {
	rest := line
	next := func() string {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			return ""
		}
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			w := rest
			rest = ""
			return w
		}
		w := rest[:i]
		rest = rest[i+1:]
		return w
	}
	words := [3]string{}
	for i := range words {
		if words[i] = next(); words[i] != "" {
			n++
		}
	}
	value = strings.TrimSpace(rest)
	if value != "" {
		n++
	}
	return words[0], words[1], words[2], value, n
}

// Kinds of domain of parse_uid_range.
const (
	rangeNone = iota // no colon: a name, @group, %group, *
	rangeOne         // ":N" (or "@:N", "%:N"): exactly N
	rangeMin         // "N:": N and above
	rangeMM          // "N:M"
)

func uidRange(domain string) (kind int, lo, hi uint64, ok bool) {
	i := strings.IndexByte(domain, ':')
	if i < 0 {
		return rangeNone, 0, 0, true
	}
	r := domain
	if r != "" && (r[0] == '@' || r[0] == '%') {
		r = r[1:]
		i--
	}
	kind = rangeMM
	if i == 0 {
		kind = rangeOne
	} else {
		v, err := strconv.ParseUint(r[:i], 10, 64)
		if err != nil {
			return 0, 0, 0, false
		}
		lo = v
	}
	maxPart := r[i+1:]
	if maxPart == "" {
		if kind == rangeOne {
			return 0, 0, 0, false
		}
		return rangeMin, lo, 0, true
	}
	v, err := strconv.ParseUint(maxPart, 10, 64)
	if err != nil {
		return 0, 0, 0, false
	}
	hi = v
	if kind == rangeOne {
		lo = hi
	}
	return kind, lo, hi, true
}

// matchDomain says whether a full line's domain applies to u, and at which priority. "%"
// domains are for maxlogins only and never set memlock.
func matchDomain(domain string, rng int, lo, hi uint64, u User, o Options) (int, bool) {
	if domain == u.Name {
		return srcUser, true
	}
	if o.RootOnlyLiteral && u.UID == 0 {
		return 0, false
	}
	switch {
	case strings.HasPrefix(domain, "@"):
		return srcGroup, groupHolds(domain, rng, lo, hi, u)
	case strings.HasPrefix(domain, "%"):
		return 0, false
	case domain == "*":
		return srcDefault, true
	}
	return srcUser, uidRangeHolds(rng, lo, hi, u)
}

// noLimitsApplies is pam_limits' "<domain> -" line: for the user, a group of the user or a
// uid range holding the user (a bare "*" or other name does not count).
func noLimitsApplies(domain string, rng int, lo, hi uint64, u User, o Options) bool {
	if domain == u.Name {
		return true
	}
	if strings.HasPrefix(domain, "@") {
		return !(o.RootOnlyLiteral && u.UID == 0) && groupHolds(domain, rng, lo, hi, u)
	}
	return uidRangeHolds(rng, lo, hi, u)
}

// groupHolds says whether an "@" domain's group (by name, ":gid", or a range of primary
// gids) holds u.
func groupHolds(domain string, rng int, lo, hi uint64, u User) bool {
	switch rng {
	case rangeNone:
		return u.inGroupNamed(domain[1:])
	case rangeOne:
		return u.inGroupID(hi)
	case rangeMM:
		return u.GID >= lo && u.GID <= hi
	case rangeMin:
		return u.GID >= lo
	}
	return false
}

// uidRangeHolds says whether a uid domain (":uid", "min:max", "min:") holds u; a plain name
// is no range.
func uidRangeHolds(rng int, lo, hi uint64, u User) bool {
	switch rng {
	case rangeOne, rangeMM:
		return u.UID >= lo && u.UID <= hi
	case rangeMin:
		return u.UID >= lo
	}
	return false
}

// limitValue is pam_limits' value for memlock: "-1", "-", "unlimited" and "infinity" are
// infinite; otherwise strtoull's leading number of KiB (trailing text is ignored, as there),
// and no number at all is an invalid line.
func limitValue(s string) (Value, bool) {
	switch s {
	case "-1", "-", "unlimited", "infinity":
		return Value{Infinite: true}, true
	}
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	end := 0
	for end < len(t) && t[end] >= '0' && t[end] <= '9' {
		end++
	}
	if end == 0 {
		return Value{}, false
	}
	n, err := strconv.ParseUint(t[:end], 10, 64)
	if err != nil {
		n = math.MaxUint64 // strtoull saturates at ULLONG_MAX
	}
	if neg {
		n = -n // strtoull negates in unsigned arithmetic
	}
	if n == 0 && neg {
		return Value{Bytes: 0}, true
	}
	if n >= math.MaxUint64/1024 {
		return Value{Infinite: true}, true
	}
	return Value{Bytes: n * 1024}, true
}

// Stack is what the PAM configuration of a service says of pam_limits.
type Stack struct {
	// Applies: a session line of the service (or a file it includes) runs pam_limits.
	Applies bool
	// Args are its module arguments (conf=, set_all, debug ...).
	Args []string
	// From is the line that runs it.
	From Line
}

// ErrNoService is returned when the service's PAM file is not among the files.
var ErrNoService = errors.New("no PAM configuration for the service")

// SessionLimits finds pam_limits in the session stack of service (/etc/pam.d/<service>),
// following "@include FILE" and "session include|substack FILE" as libpam does.
func SessionLimits(files []File, service string) (Stack, error) {
	byPath := map[string]string{}
	for _, f := range files {
		byPath[f.Path] = f.Text
	}
	var walk func(name string, depth int) (Stack, bool, error)
	walk = func(name string, depth int) (Stack, bool, error) {
		p := "/etc/pam.d/" + name
		if strings.HasPrefix(name, "/") {
			p = name
		}
		text, ok := byPath[p]
		if !ok {
			if depth == 0 {
				return Stack{}, false, fmt.Errorf("%w %s", ErrNoService, p)
			}
			return Stack{}, false, nil // libpam skips an include it cannot open
		}
		if depth > 8 {
			return Stack{}, false, fmt.Errorf("%s: includes nest deeper than 8", p)
		}
		for no, raw := range strings.Split(text, "\n") {
			line := strings.TrimSpace(raw)
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			if line == "" {
				continue
			}
			f := pamFields(line)
			if f[0] == "@include" {
				if len(f) > 1 {
					if s, found, err := walk(f[1], depth+1); err != nil || found {
						return s, found, err
					}
				}
				continue
			}
			if len(f) < 3 || strings.TrimPrefix(strings.ToLower(f[0]), "-") != "session" {
				continue
			}
			if f[1] == "include" || f[1] == "substack" {
				if s, found, err := walk(f[2], depth+1); err != nil || found {
					return s, found, err
				}
				continue
			}
			if path.Base(f[2]) == "pam_limits.so" {
				return Stack{Applies: true, Args: f[3:], From: Line{File: p, No: no + 1, Text: clip(line)}}, true, nil
			}
		}
		return Stack{}, false, nil
	}
	s, _, err := walk(service, 0)
	return s, err
}

// pamFields splits a PAM line; a "[...]" control is one field, spaces and all.
func pamFields(line string) []string {
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '[' {
			if i := strings.IndexByte(line, ']'); i >= 0 {
				out = append(out, line[:i+1])
				line = line[i+1:]
				continue
			}
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			out = append(out, line)
			break
		}
		out = append(out, line[:i])
		line = line[i:]
	}
	return out
}

func clip(s string) string { return textcut.Head(s, 120) }
