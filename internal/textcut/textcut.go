// Package textcut shortens text for messages and evidence without ever splitting a UTF-8
// character: the one place the plugin bounds what it quotes from a host.
package textcut

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Head returns at most max bytes from the start of s; when it cuts, it appends "..." (so the
// result is at most max+3 bytes). A multi-byte character is never split.
func Head(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return prefix(s, max) + "..."
}

// HeadNote is Head with a note of what was left out: "\n... (123 more bytes)".
func HeadNote(s string, max int) string {
	if len(s) <= max {
		return s
	}
	p := prefix(s, max)
	return p + fmt.Sprintf("\n... (%d more bytes)", len(s)-len(p))
}

// Tail returns the last whole lines of s that fit in max bytes, trimmed of surrounding space.
// When no line boundary falls in the window, it returns the last max bytes from a character
// boundary. It marks a cut with a leading "…"; the result is at most max bytes.
func Tail(s string, max int) string {
	s = strings.TrimSpace(s)
	if len(s) <= max {
		return s
	}
	const mark = "…"
	if max < len(mark)+1 {
		return suffix(s, max)
	}
	w := suffix(s, max-len(mark))
	if i := strings.IndexByte(w, '\n'); i >= 0 && i < len(w)-1 {
		w = w[i+1:]
	}
	return mark + w
}

// Prefix returns the longest prefix of s of at most max bytes that does not split a UTF-8
// character, with no mark of the cut. It changes no byte of s (invalid UTF-8 in the kept part
// stays), so a []byte result shares s's memory: a caller can compare a bounded key before it
// allocates a string.
func Prefix[T ~string | ~[]byte](s T, max int) T {
	if len(s) <= max {
		return s
	}
	end := max
	if end < 0 {
		end = 0
	}
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}

// prefix is the longest prefix of s of at most max bytes that ends on a character boundary.
func prefix(s string, max int) string {
	if max <= 0 {
		return ""
	}
	end := max
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return strings.ToValidUTF8(s[:end], "")
}

// suffix is the longest suffix of s of at most max bytes that starts on a character boundary.
func suffix(s string, max int) string {
	if max <= 0 {
		return ""
	}
	start := len(s) - max
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return strings.ToValidUTF8(s[start:], "")
}
