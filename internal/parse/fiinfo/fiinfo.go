// Package fiinfo parses libfabric's fi_info: the provider listing of `fi_info -p efa [-t
// FI_EP_RDM]` and the `fi_info --version` banner.
package fiinfo

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Entry is one provider block of fi_info's listing.
type Entry struct {
	Provider string
	Fabric   string
	Domain   string
	Version  string
	Type     string
	Protocol string
}

// Parse reads fi_info's listing: blocks that start at "provider:" followed by "key: value"
// lines, indented or not (AWS docs print them flush left). Other lines are ignored. No block
// at all is an error that quotes the first line, so "fi_getinfo: -61 (No data available)"
// never reads as zero devices on a healthy host.
func Parse(text string) ([]Entry, error) {
	var entries []Entry
	var cur *Entry
	first := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "```") {
			continue
		}
		if first == "" {
			first = line
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if key == "provider" {
			entries = append(entries, Entry{Provider: val})
			cur = &entries[len(entries)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "fabric":
			cur.Fabric = val
		case "domain":
			cur.Domain = val
		case "version":
			cur.Version = val
		case "type":
			cur.Type = val
		case "protocol":
			cur.Protocol = val
		}
	}
	if len(entries) == 0 {
		if first == "" {
			return nil, errors.New("fi_info: empty output")
		}
		if line := noDataLine(text); line != "" {
			return nil, &NoProviderError{Line: line}
		}
		return nil, fmt.Errorf("fi_info: no provider listed: %q", textcut.Head(first, 160))
	}
	return entries, nil
}

// NoProviderError is libfabric's own answer that the provider asked for (-p efa) has nothing
// to give on this host: fi_getinfo returned -FI_ENODATA (-61, "No data available") and no
// "provider:" block was listed. libfabric says no more than that; the causes are the host's.
type NoProviderError struct {
	// Line is libfabric's line, as printed ("fi_getinfo: -61 (No data available)").
	Line string
}

func (e *NoProviderError) Error() string {
	return fmt.Sprintf("fi_info: the provider listed nothing (libfabric: %q)", e.Line)
}

// fiGetinfoNoData matches fi_info's error line for -FI_ENODATA: "fi_getinfo: -61 (No data
// available)" (util/info.c), and the older fabtests form "fi_getinfo(): util/info.c:333,
// ret=-61 (No data available)".
var fiGetinfoNoData = regexp.MustCompile(`^fi_getinfo(?:\(\))?:.*(?:^|[ =])-61\b`)

// noDataLine returns libfabric's -61 line in text, or "".
func noDataLine(text string) string {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if fiGetinfoNoData.MatchString(line) {
			return textcut.Head(line, 160)
		}
	}
	return ""
}

// Domains returns the distinct device names behind the entries: the "-rdm" / "-dgrm"
// endpoint suffix stripped, so one device listed for RDM and DGRAM (or through the old
// "efa;ofi_rxd" layered provider) counts once. Order is first appearance.
func Domains(entries []Entry) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		d := DeviceName(e.Domain)
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		out = append(out, d)
	}
	return out
}

// DeviceName strips the endpoint-type suffix from a libfabric EFA domain name
// ("rdmap16s27-rdm" -> "rdmap16s27", "efa_0-dgrm" -> "efa_0").
func DeviceName(domain string) string {
	d := strings.TrimSpace(domain)
	for _, suf := range []string{"-rdm", "-dgrm"} {
		if s, ok := strings.CutSuffix(d, suf); ok {
			return s
		}
	}
	return d
}

// ParseDomains is Parse followed by Domains; a listing whose blocks name no domain is an error.
func ParseDomains(text string) ([]string, error) {
	entries, err := Parse(text)
	if err != nil {
		return nil, err
	}
	d := Domains(entries)
	if len(d) == 0 {
		return nil, fmt.Errorf("fi_info: %d provider blocks but no \"domain:\" line", len(entries))
	}
	return d, nil
}

// Version is fi_info's --version banner.
type Version struct {
	FiInfo    string
	Libfabric string
	API       string
}

// ParseVersion reads `fi_info --version`:
//
//	fi_info: 2.6.0amzn1.0
//	libfabric: 2.6.0amzn1.0
//	libfabric api: 2.6
func ParseVersion(text string) (Version, error) {
	var v Version
	for _, line := range strings.Split(text, "\n") {
		key, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(key) {
		case "fi_info":
			v.FiInfo = val
		case "libfabric":
			v.Libfabric = val
		case "libfabric api":
			v.API = val
		}
	}
	if v.Libfabric == "" {
		return Version{}, fmt.Errorf("fi_info --version: no \"libfabric:\" line in %q", textcut.Head(strings.TrimSpace(text), 160))
	}
	return v, nil
}
