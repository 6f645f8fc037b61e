// Package efapkgs parses /opt/amazon/efa_installed_packages, the record the AWS EFA installer
// leaves behind: the installer version and the packages it installed (libfabric, aws-ofi-nccl,
// rdma-core, Open MPI, ...).
//
// Layouts seen and assumed (see testdata/*.source):
//
//	# EFA installer version: 1.22.0            header lines, "# key: value"
//	# Debug packages installed: no
//	# Packages installed:
//	efa_1.3.0-1.amzn1_amd64 libfabric1_1.8.0amzn1.0_amd64 ...         Debian: name_version_arch
//	libfabric-aws-1.17.0-1.el8.x86_64 openmpi40-aws-4.1.5-1.x86_64 ... RPM: name-version-release.arch
//	libfabric1-aws 2.6.0amzn1.0                                        one "name version" a line
//	efa-config                                                          a name without version
//	aws-ofi-nccl: 1.21.1                                                "key: value" (also "key=value")
//
// The one-per-line "name version" layout of recent installers (1.50.0) is an assumption built
// from the task brief, not from a capture; the parser accepts all of the above mixed in one file.
package efapkgs

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Installed is what the file records.
type Installed struct {
	InstallerVersion string
	// DebugPackages is the "Debug packages installed" header value ("no", "yes").
	DebugPackages string
	// Header holds every "# key: value" header line, keys as written.
	Header map[string]string
	// Packages maps a package name to its version; the version is "" when the file lists the
	// name only. RPM versions drop the release ("1.17.0" of "1.17.0-1.el8").
	Packages map[string]string
	// Names lists package names in file order.
	Names []string
}

var (
	rpmToken = regexp.MustCompile(`^(.+?)-(\d[^-]*)-([^-]+)\.(x86_64|aarch64|noarch|i686|arm64|amd64)$`)
	keyValue = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_.+-]*)\s*[:=]\s*(\S.*)$`)
	pkgName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]*$`)
)

// Parse reads the file. A text without the "EFA installer version" header is an error naming
// its first line, so "cat: ...: No such file or directory" never reads as an empty record.
func Parse(text string) (Installed, error) {
	in := Installed{Header: map[string]string{}, Packages: map[string]string{}}
	first := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		if first == "" {
			first = line
		}
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			key, val, ok := strings.Cut(rest, ":")
			if !ok {
				continue
			}
			key, val = strings.TrimSpace(key), strings.TrimSpace(val)
			in.Header[key] = val
			switch strings.ToLower(key) {
			case "efa installer version":
				in.InstallerVersion = val
			case "debug packages installed":
				in.DebugPackages = val
			}
			continue
		}
		if m := keyValue.FindStringSubmatch(line); m != nil && !strings.ContainsAny(m[2], " \t") {
			in.add(m[1], m[2])
			continue
		}
		f := strings.Fields(line)
		if len(f) == 2 && looksLikeVersion(f[1]) && !strings.Contains(f[0], "_") && rpmToken.FindStringSubmatch(f[0]) == nil {
			in.add(f[0], f[1])
			continue
		}
		for _, tok := range f {
			in.addToken(tok)
		}
	}
	if in.InstallerVersion == "" {
		if first == "" {
			return Installed{}, errors.New("efa_installed_packages: empty")
		}
		return Installed{}, fmt.Errorf("efa_installed_packages: no \"# EFA installer version:\" line (first line %q)", textcut.Head(first, 160))
	}
	return in, nil
}

func (in *Installed) addToken(tok string) {
	if m := rpmToken.FindStringSubmatch(tok); m != nil {
		in.add(m[1], m[2])
		return
	}
	if strings.Contains(tok, "_") {
		// Debian: name_version[_arch]. Package names never contain '_'.
		p := strings.Split(tok, "_")
		if len(p) >= 2 && p[0] != "" && looksLikeVersion(p[1]) {
			in.add(p[0], p[1])
			return
		}
	}
	if pkgName.MatchString(tok) {
		in.add(tok, "")
	}
}

func (in *Installed) add(name, version string) {
	old, seen := in.Packages[name]
	if !seen {
		in.Names = append(in.Names, name)
	}
	// A name-only line never erases a version another line gave.
	if !seen || old == "" {
		in.Packages[name] = version
	}
}

// Package returns the version of the first of names that the file lists with a version.
func (in Installed) Package(names ...string) (string, bool) {
	for _, n := range names {
		if v := in.Packages[n]; v != "" {
			return v, true
		}
	}
	return "", false
}

// Libfabric returns the libfabric version: from the libfabric runtime package (Amazon's
// "libfabric-aws" / "libfabric1-aws" builds or plain "libfabric1"/"libfabric"), else any
// libfabric package that is not a -dev/-devel/-bin companion.
func (in Installed) Libfabric() (string, bool) {
	if v, ok := in.Package("libfabric-aws", "libfabric1-aws", "libfabric1", "libfabric"); ok {
		return v, true
	}
	return in.prefixed("libfabric")
}

// AWSOFINCCL returns the aws-ofi-nccl (NCCL OFI plugin) version; the installer packages it
// as "libnccl-ofi", older notes and tools call it "aws-ofi-nccl".
func (in Installed) AWSOFINCCL() (string, bool) {
	if v, ok := in.Package("aws-ofi-nccl", "libnccl-ofi", "ofi-nccl"); ok {
		return v, true
	}
	if v, ok := in.prefixed("libnccl-ofi"); ok {
		return v, true
	}
	return in.prefixed("aws-ofi-nccl")
}

func (in Installed) prefixed(prefix string) (string, bool) {
	for _, n := range in.Names {
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		if strings.HasSuffix(n, "-dev") || strings.HasSuffix(n, "-devel") || strings.HasSuffix(n, "-bin") || strings.Contains(n, "-debug") {
			continue
		}
		if v := in.Packages[n]; v != "" {
			return v, true
		}
	}
	return "", false
}

func looksLikeVersion(s string) bool {
	if len(s) > 1 && (s[0] == 'v' || s[0] == 'V') {
		s = s[1:]
	}
	return s != "" && s[0] >= '0' && s[0] <= '9'
}
