package nccltests

import (
	"bytes"
	"math/bits"
	"regexp"
)

// This file is the engine that applies the rule table of facts.go to a line: it finds the
// NCCL message in the line, matches every rule against it and calls the setter of each rule
// that matches.

// lineTag is the NCCL log level a line carries, if any.
type lineTag uint8

const (
	tagNone lineTag = iota // no "NCCL INFO"/"NCCL WARN": launcher output, plain or echoed lines
	tagInfo
	tagWarn
)

// factLine is one line as the rules see it.
type factLine struct {
	// text is the line without launcher prefix, trimmed: what errors and evidence keep.
	text []byte
	// msg is what follows "NCCL INFO"/"NCCL WARN", trimmed; text itself when there is no tag.
	msg []byte
	tag lineTag
	// failure is set by a rule that found a failure; the line is kept once in Result.Errors.
	failure bool
	// offered is set once a rule offered the line as evidence, so one line is evidence for one
	// kind of fact only.
	offered bool
}

// How a rule's literal is matched against the message.
type matchHow uint8

const (
	matchPrefix   matchHow = iota // the message starts with lit
	matchContains                 // lit is anywhere in the message
	matchRegexp                   // re matches; lit is a literal every match contains, tried first because it is cheap
)

// rule is one row of the fact table: a match on the message and the fact it sets.
type rule struct {
	// fact names what the rule sets, for readers of the table and test names.
	fact string
	// warnOnly limits the rule to NCCL WARN lines.
	warnOnly bool
	how      matchHow
	lit      []byte
	re       *regexp.Regexp
	// set records the fact; rest is the message after lit (for a regexp, after the match).
	set func(p *parser, l *factLine, rest []byte)
}

// match reports whether r matches msg and returns what follows the match.
func (r *rule) match(msg []byte) ([]byte, bool) {
	switch r.how {
	case matchPrefix:
		// The first-byte test is the cheap part of HasPrefix, and most rules fail it.
		if len(r.lit) == 0 || len(msg) >= len(r.lit) && msg[0] == r.lit[0] && bytes.HasPrefix(msg, r.lit) {
			return msg[len(r.lit):], true
		}
	case matchContains:
		if i := bytes.Index(msg, r.lit); i >= 0 {
			return msg[i+len(r.lit):], true
		}
	case matchRegexp:
		if bytes.Contains(msg, r.lit) {
			if loc := r.re.FindIndex(msg); loc != nil {
				return msg[loc[1]:], true
			}
		}
	}
	return nil, false
}

// facts applies every rule to a line that is not part of the result table, in table order.
func (p *parser) facts(text []byte) {
	// The line lives in the parser, not on the stack: the rules' set functions are called
	// through a table, so a local would escape and cost an allocation per line.
	p.fl = factLine{text: text}
	l := &p.fl
	l.tag, l.msg = splitTag(text)
	p.host = -1
	if l.tag != tagNone {
		p.host = p.hostIndex(hostOf(text))
	}
	var after [maxRules]int32
	for matched := factIndex.candidates(l.msg, l.tag, factRules, &after); matched != 0; matched &= matched - 1 {
		i := bits.TrailingZeros64(matched)
		r := &factRules[i]
		switch r.how {
		case matchContains:
			r.set(p, l, l.msg[after[i]-1:])
		default:
			// A prefix rule's first byte matched, a regexp rule's literal is in the message:
			// the full match decides.
			if rest, ok := r.match(l.msg); ok {
				r.set(p, l, rest)
			}
		}
	}
	if l.failure {
		p.addError(text)
	}
	p.fl = factLine{} // do not keep the caller's bytes after the line
}

// maxRules bounds the table, so one bit per rule fits a uint64 and the per-line match offsets
// an array.
const maxRules = 64

// ruleIndex tells, for a message, which rules can match, without trying each rule in turn: most
// lines are NCCL INFO chatter that no rule is about. Prefix rules are looked up by the first
// byte of the message. The literals of the contains and regexp rules are found in one pass with
// the Wu-Manber multi-pattern search: a table of how far the window may jump for each 3-byte
// block lets the scan skip most positions, and only where a literal may start are the literals
// with that first byte compared. Its answers are those of rule.match
// (TestRuleIndexAgreesWithMatch).
type ruleIndex struct {
	// anyLine are the rules with an empty prefix (they match every message of their tag);
	// warnOnly are the rules limited to NCCL WARN lines.
	anyLine, warnOnly uint64
	// prefixByFirst[c] are the prefix rules whose literal starts with c.
	prefixByFirst [256]uint64
	// window is the length of the shortest scanned literal; the scan looks at windows of it.
	window int
	// shift[h] is how far the window can move when its last block hashes to h; 0 means a
	// literal may end its window here.
	shift [shiftTableSize]uint8
	// scanned are the scanned rules sorted by the first byte of their literal; byFirst[c] is
	// the range of them whose literal starts with c.
	scanned []uint8
	byFirst [256]struct{ lo, hi uint8 }
}

const (
	blockBytes     = 3
	shiftTableBits = 13
	shiftTableSize = 1 << shiftTableBits
	// minIndexedLiteral is the shortest literal of a contains or regexp rule the index can
	// scan for; TestFactRulesWellFormed keeps shorter ones out of the table.
	minIndexedLiteral = 6
)

// factIndex is built once from factRules and never written afterwards.
var factIndex = newRuleIndex(factRules)

func newRuleIndex(rules []rule) *ruleIndex {
	x := &ruleIndex{window: 255}
	scanned := func(i int, r rule) bool {
		return r.how != matchPrefix && len(r.lit) >= minIndexedLiteral && i < maxRules
	}
	for i, r := range rules[:min(len(rules), maxRules)] {
		bit := uint64(1) << i
		if r.warnOnly {
			x.warnOnly |= bit
		}
		switch {
		case r.how == matchPrefix && len(r.lit) == 0:
			x.anyLine |= bit
		case r.how == matchPrefix:
			x.prefixByFirst[r.lit[0]] |= bit
		case scanned(i, r):
			x.window = min(x.window, len(r.lit))
		}
	}
	for h := range x.shift {
		x.shift[h] = uint8(x.window - blockBytes + 1)
	}
	for c := 0; c < 256; c++ {
		lo := len(x.scanned)
		for i, r := range rules {
			if !scanned(i, r) || int(r.lit[0]) != c {
				continue
			}
			x.scanned = append(x.scanned, uint8(i))
			for end := blockBytes - 1; end < x.window; end++ {
				h := blockHash(r.lit[end+1-blockBytes:])
				x.shift[h] = min(x.shift[h], uint8(x.window-1-end))
			}
		}
		x.byFirst[c] = struct{ lo, hi uint8 }{uint8(lo), uint8(len(x.scanned))}
	}
	return x
}

// candidates returns one bit per rule that may match msg (a line with tag): every empty-prefix
// rule, the prefix rules whose first byte is msg's, and the contains and regexp rules whose
// literal is in msg, for which after[i] is set to 1 + the offset just past its first
// occurrence. WARN-only rules are left out of other lines.
func (x *ruleIndex) candidates(msg []byte, tag lineTag, rules []rule, after *[maxRules]int32) uint64 {
	set := x.anyLine
	if len(msg) > 0 {
		set |= x.prefixByFirst[msg[0]]
	}
	for end := x.window - 1; end < len(msg); {
		if sh := x.shift[blockHash(msg[end+1-blockBytes:])]; sh > 0 {
			end += int(sh)
			continue
		}
		start := end + 1 - x.window
		span := x.byFirst[msg[start]]
		for _, ri := range x.scanned[span.lo:span.hi] {
			if lit := rules[ri].lit; after[ri] == 0 && bytes.HasPrefix(msg[start:], lit) {
				after[ri] = int32(start+len(lit)) + 1
				set |= 1 << ri
			}
		}
		end++
	}
	if tag != tagWarn {
		set &^= x.warnOnly
	}
	return set
}

// blockHash hashes the first blockBytes bytes of b to shiftTableBits bits (multiplicative
// hashing: the top bits of the product mix all three bytes).
func blockHash(b []byte) uint32 {
	_ = b[2] // one bounds check instead of three
	return (uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])) * 2654435761 >> (32 - shiftTableBits)
}

var bNCCLSpace = []byte("NCCL ")

// splitTag finds the "NCCL INFO" or "NCCL WARN" tag that NCCL (and its plugins) print after
// "host:pid:tid [dev]", and returns the message after it; a line without a tag is its own
// message.
func splitTag(t []byte) (lineTag, []byte) {
	for off := 0; ; {
		i := bytes.Index(t[off:], bNCCLSpace)
		if i < 0 {
			return tagNone, t
		}
		off += i + len(bNCCLSpace)
		switch rest := t[off:]; {
		case bytes.HasPrefix(rest, []byte("INFO")):
			return tagInfo, bytes.TrimSpace(rest[len("INFO"):])
		case bytes.HasPrefix(rest, []byte("WARN")):
			return tagWarn, bytes.TrimSpace(rest[len("WARN"):])
		}
	}
}
