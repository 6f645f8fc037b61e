// Package nvctk parses the NVIDIA Container Toolkit CLI's output: `nvidia-ctk cdi list` (a
// logrus INFO line "Found N CDI devices", then one fully qualified CDI device name per line:
// nvidia.com/gpu=0, nvidia.com/gpu=<GPU UUID>, nvidia.com/gpu=all, ...) and `nvidia-ctk
// --version` ("NVIDIA Container Toolkit CLI version 1.17.8").
package nvctk

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// List is what `nvidia-ctk cdi list` printed.
type List struct {
	// Found is the count the INFO line announced; -1 when no such line was printed.
	Found int
	// Devices are the fully qualified device names, in order.
	Devices []string
}

// GPUKind is the CDI kind of NVIDIA's GPUs.
const GPUKind = "nvidia.com/gpu"

// Has reports whether the list names the device kind=name.
func (l List) Has(kind, name string) bool {
	for _, d := range l.Devices {
		if d == kind+"="+name {
			return true
		}
	}
	return false
}

// GPUIndexes are the indexes of the nvidia.com/gpu devices named by index ("nvidia.com/gpu=3"),
// in order; MIG devices ("0:1"), UUID names and "all" are not among them.
func (l List) GPUIndexes() []int {
	var out []int
	for _, d := range l.Devices {
		name, ok := strings.CutPrefix(d, GPUKind+"=")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(name); err == nil && n >= 0 {
			out = append(out, n)
		}
	}
	return out
}

// GPUUUIDs are the nvidia.com/gpu devices named by GPU UUID ("nvidia.com/gpu=GPU-…"), in
// order (toolkits that generate the uuid naming strategy beside the index one list both).
func (l List) GPUUUIDs() []string {
	var out []string
	for _, d := range l.Devices {
		if name, ok := strings.CutPrefix(d, GPUKind+"="); ok && strings.HasPrefix(name, "GPU-") {
			out = append(out, name)
		}
	}
	return out
}

// logLine is a logrus line in its text format without colours: "INFO[0000] Found 5 CDI devices".
var logLine = regexp.MustCompile(`^(TRAC|DEBU|INFO|WARN|ERRO|FATA|PANI)\[\d+\] (.*)$`)

// deviceName is a fully qualified CDI device name: vendor/class=name (the CDI specification's
// qualified name; the name part allows letters, digits, '_', '.', ':', '-').
var deviceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*=[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

var foundLine = regexp.MustCompile(`^Found (\d+) CDI devices?$`)

// ParseList reads `nvidia-ctk cdi list`. An ERRO or FATA line fails with its message; a line
// that is neither a log line nor a qualified device name fails, and so does a device count that
// disagrees with the INFO line's: the list is all or nothing.
func ParseList(text string) (List, error) {
	l := List{Found: -1}
	seen := map[string]bool{}
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		if m := logLine.FindStringSubmatch(line); m != nil {
			msg := strings.TrimSpace(m[2])
			switch m[1] {
			case "ERRO", "FATA", "PANI":
				return List{}, fmt.Errorf("nvidia-ctk cdi list: %s", msg)
			case "INFO":
				if f := foundLine.FindStringSubmatch(msg); f != nil {
					c, err := strconv.Atoi(f[1])
					if err != nil {
						return List{}, fmt.Errorf("nvidia-ctk cdi list: line %d: count %q", n+1, f[1])
					}
					l.Found = c
				}
			}
			continue
		}
		if !deviceName.MatchString(line) {
			return List{}, fmt.Errorf("nvidia-ctk cdi list: line %d: not a CDI device name: %q", n+1, line)
		}
		if seen[line] {
			return List{}, fmt.Errorf("nvidia-ctk cdi list: %s listed twice", line)
		}
		seen[line] = true
		l.Devices = append(l.Devices, line)
	}
	if l.Found < 0 {
		return List{}, fmt.Errorf("nvidia-ctk cdi list: no \"Found N CDI devices\" line")
	}
	if l.Found != len(l.Devices) {
		return List{}, fmt.Errorf("nvidia-ctk cdi list: announced %d CDI devices, listed %d", l.Found, len(l.Devices))
	}
	return l, nil
}

var versionLine = regexp.MustCompile(`^NVIDIA Container Toolkit CLI version (\d+\.\d+\.\d+[0-9A-Za-z.~+-]*)$`)

// ParseVersion reads `nvidia-ctk --version` ("NVIDIA Container Toolkit CLI version 1.17.8",
// then "commit: …") into the version, "1.17.8".
func ParseVersion(text string) (string, error) {
	for _, raw := range strings.Split(text, "\n") {
		if m := versionLine.FindStringSubmatch(strings.TrimSpace(raw)); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("nvidia-ctk --version: no \"NVIDIA Container Toolkit CLI version X.Y.Z\" line in %q", firstLine(text))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
