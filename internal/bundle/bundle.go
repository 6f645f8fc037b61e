// Package bundle batches many read-only shell commands into one remote script and splits the
// script's output back into one section per command, so a whole suite of host checks costs one
// SSH round trip. It runs nothing itself: the caller sends Script's text and hands the output
// to Parse.
package bundle

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Command is one named command of a bundle.
type Command struct {
	// Name identifies the section; letters, digits, '-', '_' and '.' only.
	Name string
	// Shell is run by /bin/sh; stderr is folded into stdout. When Tool is set, "$1" is the
	// absolute path of the tool that was found.
	Shell string
	// Tool, when set, is looked up at its real absolute paths before the command runs:
	// Packer's SSH commands get no login PATH, so a tool that only a profile script puts on
	// PATH (fi_info) would not be found by name. The section records which path answered.
	Tool *Tool
	// Timeout bounds the command with coreutils timeout, in whole seconds (at least one). It
	// must be set: the caller owns the bound (Script refuses a command without one).
	Timeout time.Duration
}

// timeoutSeconds is the number of whole seconds c may run, as coreutils timeout takes it.
func timeoutSeconds(c Command) int {
	return max(1, int(c.Timeout/time.Second))
}

// Budget bounds a whole bundle: every command's own timeout plus slack, so one hung command
// cannot hold a bake past its budget, and a bundle that never ends is cut off.
func Budget(cmds []Command) time.Duration {
	budget := 30 * time.Second
	for _, c := range cmds {
		budget += time.Duration(timeoutSeconds(c)+2) * time.Second
	}
	return budget
}

// TimedOut reports whether an exit status is coreutils timeout's: 124 when the command was
// stopped by its TERM, 137 (128+KILL) when it had to be killed.
func TimedOut(exitCode int) bool { return exitCode == 124 || exitCode == 137 }

// Tool is an executable a command needs.
type Tool struct {
	// Name is the executable's name, looked up on PATH when no path in Paths exists.
	Name string
	// Paths are the absolute paths to try, in order.
	Paths []string
	// Optional runs the command with an empty "$1" when the tool is not found; otherwise the
	// section fails with exit status 127 and says where it looked.
	Optional bool
}

// Section is what one command printed and how it exited.
type Section struct {
	Name string
	// Tool is the path of the command's tool that answered; "" when it has none or it was
	// not found.
	Tool     string
	Output   string
	ExitCode int
	// TimedOut is true when the command was killed by its timeout (exit 124 or 137).
	TimedOut bool
	// DurationMS is how long the command ran on the host.
	DurationMS int64
}

// markerPrefix starts every marker line. Each script adds a random nonce to it, so a command
// that prints a marker-like line cannot end its own section early and fake an exit status.
const markerPrefix = "@@DLAMI-BUNDLE-"

func newMarker() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("bundle: reading random nonce: %v", err)) // crypto/rand never fails on Linux
	}
	return markerPrefix + hex.EncodeToString(b[:]) + "@@"
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Script returns a POSIX shell script that runs every command in order, each under its own
// timeout, and prints each one's output between markers. Command text is passed to sh -c as a
// single-quoted word, so nothing in it is re-parsed by the outer script.
func Script(cmds []Command) (string, error) {
	var b strings.Builder
	marker := newMarker()
	b.WriteString("#!/bin/sh\n")
	b.WriteString("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH; export PATH\n")
	b.WriteString("LC_ALL=C; export LC_ALL\n")
	seen := map[string]bool{}
	for _, c := range cmds {
		if !validName.MatchString(c.Name) {
			return "", fmt.Errorf("bundle: command name %q: use letters, digits, '-', '_' or '.'", c.Name)
		}
		if seen[c.Name] {
			return "", fmt.Errorf("bundle: command name %q used twice", c.Name)
		}
		seen[c.Name] = true
		if c.Timeout <= 0 {
			return "", fmt.Errorf("bundle: command %s has no timeout: every command is bounded", c.Name)
		}
		t := timeoutSeconds(c)
		fmt.Fprintf(&b, "echo '%s BEGIN %s'; t0=$(date +%%s%%N)\n", marker, c.Name)
		if c.Tool == nil {
			fmt.Fprintf(&b, "timeout -k 2 %d sh -c %s 2>&1 </dev/null\n", t, Quote(c.Shell))
		} else {
			if !validName.MatchString(c.Tool.Name) {
				return "", fmt.Errorf("bundle: command %s: tool name %q: use letters, digits, '-', '_' or '.'", c.Name, c.Tool.Name)
			}
			paths := make([]string, len(c.Tool.Paths))
			for i, p := range c.Tool.Paths {
				paths[i] = Quote(p)
			}
			fmt.Fprintf(&b, "tool=; for p in %s; do if [ -x \"$p\" ]; then tool=$p; break; fi; done\n", strings.Join(paths, " "))
			fmt.Fprintf(&b, "[ -n \"$tool\" ] || tool=$(command -v %s 2>/dev/null) || tool=\n", Quote(c.Tool.Name))
			fmt.Fprintf(&b, "if [ -n \"$tool\" ]; then echo \"%s TOOL %s $tool\"; fi\n", marker, c.Name)
			if c.Tool.Optional {
				fmt.Fprintf(&b, "timeout -k 2 %d sh -c %s dlami-tool \"$tool\" 2>&1 </dev/null\n", t, Quote(c.Shell))
			} else {
				where := strings.Join(append(append([]string{}, c.Tool.Paths...), "PATH"), ", ")
				fmt.Fprintf(&b, "if [ -n \"$tool\" ]; then timeout -k 2 %d sh -c %s dlami-tool \"$tool\" 2>&1 </dev/null; else echo %s; (exit 127); fi\n",
					t, Quote(c.Shell), Quote(c.Tool.Name+": not found (looked in "+where+")"))
			}
		}
		fmt.Fprintf(&b, "rc=$?; t1=$(date +%%s%%N); echo; echo \"%s END %s $rc $(( (t1 - t0) / 1000000 ))\"\n", marker, c.Name)
	}
	b.WriteString("exit 0\n")
	return b.String(), nil
}

// Parse splits a bundle's output into sections by name. A command whose END marker is missing
// (the connection dropped, the script was cut short) is an error: a half-read bundle must
// never be judged as if it were whole.
func Parse(out string, want []Command) (map[string]Section, error) {
	sections := map[string]Section{}
	marker := ""
	var cur *Section
	var body strings.Builder
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if marker == "" {
			// The script prints its first BEGIN marker before any command runs, so the first
			// marker-looking line carries the real nonce.
			if strings.HasPrefix(line, markerPrefix) {
				if i := strings.Index(line, "@@ "); i > 0 {
					marker = line[:i+2]
				}
			}
		}
		if rest, ok := strings.CutPrefix(line, marker+" "); ok && marker != "" {
			f := strings.Fields(rest)
			switch {
			case len(f) == 2 && f[0] == "BEGIN":
				cur = &Section{Name: f[1]}
				body.Reset()
				continue
			case len(f) >= 3 && f[0] == "TOOL" && cur != nil && f[1] == cur.Name && cur.Tool == "" && body.Len() == 0:
				cur.Tool = strings.SplitN(rest, " ", 3)[2]
				continue
			case (len(f) == 3 || len(f) == 4) && f[0] == "END" && cur == nil:
				if _, done := sections[f[1]]; done {
					// Only a command that printed its own END marker can cause this.
					return nil, fmt.Errorf("bundle: section %s ended twice: its output imitates the bundle's markers", f[1])
				}
			case (len(f) == 3 || len(f) == 4) && f[0] == "END" && cur != nil && f[1] == cur.Name:
				rc, err := strconv.Atoi(f[2])
				if err != nil {
					return nil, fmt.Errorf("bundle: section %s: bad exit status %q", cur.Name, f[2])
				}
				cur.ExitCode = rc
				if len(f) == 4 {
					// Elapsed milliseconds; a shell without nanosecond date leaves garbage here,
					// which only costs the timing.
					cur.DurationMS, _ = strconv.ParseInt(f[3], 10, 64)
				}
				cur.TimedOut = TimedOut(rc)
				// Script prints an empty line before END so output without a trailing newline
				// still ends its line; take that, and the output's own final newline, off.
				out := strings.TrimSuffix(body.String(), "\n")
				cur.Output = strings.TrimSuffix(out, "\n")
				sections[cur.Name] = *cur
				cur = nil
				continue
			}
		}
		if cur != nil {
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bundle: reading output: %w", err)
	}
	for _, c := range want {
		if _, ok := sections[c.Name]; !ok {
			return sections, fmt.Errorf("bundle: no complete output for %q (the connection may have dropped)", c.Name)
		}
	}
	return sections, nil
}

// Quote returns s as one single-quoted POSIX shell word.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
