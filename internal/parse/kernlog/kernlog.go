// Package kernlog finds a position in a kernel log (dmesg output) and the lines written after
// it, so a check can judge only what the kernel said during one step (the NCCL test, a layer's
// reboot) with the same classifier it uses for the whole log.
package kernlog

import (
	"regexp"
	"strconv"
	"strings"
)

// ansiEscape matches the SGR colour sequences dmesg and journalctl print on a terminal (a
// pseudo-terminal, ssh_pty, makes them colour their output).
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// Uncolored returns kernel log text without its colour sequences, so that matchers read the
// words.
func Uncolored(s string) string { return ansiEscape.ReplaceAllString(s, "") }

// Position is where a kernel log ended when it was read.
type Position struct {
	// BootID is the boot the log belongs to; a log of another boot is entirely "after".
	BootID string `json:"boot_id"`
	// Lines is how many lines the log had.
	Lines int `json:"lines"`
	// Stamp is the last line's "[seconds.micros]" timestamp; HasStamp says whether there was
	// one. Timestamps survive the ring buffer dropping old lines, line counts do not.
	Stamp    float64 `json:"stamp"`
	HasStamp bool    `json:"has_stamp"`
}

// Mark returns the position at the end of log, read in boot bootID.
func Mark(log, bootID string) Position {
	lines := split(log)
	p := Position{BootID: bootID, Lines: len(lines)}
	for i := len(lines) - 1; i >= 0; i-- {
		if s, ok := stamp(lines[i]); ok {
			p.Stamp, p.HasStamp = s, true
			break
		}
	}
	return p
}

// After returns the lines of log (read in boot bootID) written after p. A log of another boot
// is returned whole. With timestamps, the lines stamped later than p are after it (and so are
// unstamped continuation lines that follow them); without, the lines past p.Lines are.
func After(log, bootID string, p Position) []string {
	lines := split(log)
	if bootID != p.BootID {
		return lines
	}
	if p.HasStamp {
		for i, l := range lines {
			if s, ok := stamp(l); ok && s > p.Stamp {
				return lines[i:]
			}
		}
		return nil
	}
	if p.Lines >= len(lines) {
		return nil
	}
	return lines[p.Lines:]
}

func split(log string) []string {
	log = strings.TrimRight(log, "\n")
	if log == "" {
		return nil
	}
	return strings.Split(log, "\n")
}

// Stamp reads the "[   12.345678]" prefix dmesg prints by default (printk time).
func Stamp(line string) (float64, bool) { return stamp(line) }

func stamp(line string) (float64, bool) {
	rest, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), "[")
	if !ok {
		return 0, false
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(rest[:end]), 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// Text returns a dmesg line without its "[seconds.micros] " timestamp: the message, as the
// journal's copy of the same record carries it (whose own timestamp differs).
func Text(line string) string {
	t := strings.TrimLeft(line, " \t")
	if _, ok := stamp(t); !ok {
		return strings.TrimSpace(line)
	}
	_, rest, _ := strings.Cut(t, "]")
	return strings.TrimSpace(rest)
}
