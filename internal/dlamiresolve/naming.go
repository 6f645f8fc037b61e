package dlamiresolve

import (
	"fmt"
	"regexp"
	"strings"
)

// Defaults for what to resolve.
const (
	DefaultArchitecture = "x86_64"
	DefaultOS           = "ubuntu-24.04"
	DefaultFlavor       = "base-oss-nvidia-driver-gpu"
	// ParameterRoot is where AWS publishes DLAMI ids in Parameter Store.
	ParameterRoot = "/aws/service/deeplearning/ami"
	// DLAMIOwnerAccount publishes the DLAMIs in the commercial partition;
	// terraform/boto examples and describe-images output for every DLAMI
	// family show it, with owner alias "amazon".
	DLAMIOwnerAccount = "898082745236"
)

// Architectures and OperatingSystems are the accepted values.
var (
	Architectures    = []string{"x86_64", "arm64"}
	OperatingSystems = []string{"ubuntu-24.04", "ubuntu-22.04", "amazon-linux-2023"}
)

// ParameterPath is the SSM parameter AWS keeps pointed at the newest build
// of a DLAMI family: /aws/service/deeplearning/ami/<arch>/<flavor>-<os>/latest/ami-id.
func ParameterPath(arch, flavor, os string) string {
	return fmt.Sprintf("%s/%s/%s/latest/ami-id", ParameterRoot, arch, AMIType(flavor, os))
}

// AMIType is the <ami_type> path element: the flavour and OS joined by "-".
func AMIType(flavor, os string) string { return flavor + "-" + os }

var dlamiParamRE = regexp.MustCompile(`^/aws/service/deeplearning/ami/([^/]+)/([^/]+)/[^/]+/ami-id$`)

// SplitParameterPath returns the architecture and ami_type of a DLAMI
// parameter path, and ok=false for any other parameter name.
func SplitParameterPath(name string) (arch, amiType string, ok bool) {
	m := dlamiParamRE.FindStringSubmatch(name)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

var buildRE = regexp.MustCompile(`^\d{8}$`)

// ValidBuild reports whether s looks like a DLAMI build stamp (YYYYMMDD).
func ValidBuild(s string) bool { return buildRE.MatchString(s) }

// ParsedName is what an AMI name says about the image.
type ParsedName struct {
	// AMIType is the name reduced by AWS's documented rule (drop "deep",
	// "learning", "ami"; lowercase; spaces to "-"; drop parentheses), so it
	// compares equal to the <ami_type> element of the parameter path.
	AMIType string
	// ARM64 is true when the name carries the ARM64 marker AWS puts in
	// arm64 DLAMI names ("Deep Learning ARM64 Base OSS ...").
	ARM64 bool
	// Build is the trailing YYYYMMDD stamp, or "" when there is none.
	Build string
}

// ParseName applies AWS's name → ami_type rule to an AMI name such as
// "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261002".
// It is a pure function and accepts any input.
func ParseName(name string) ParsedName {
	var p ParsedName
	fields := strings.Fields(name)
	if n := len(fields); n > 0 && ValidBuild(fields[n-1]) {
		p.Build = fields[n-1]
		fields = fields[:n-1]
	}
	kept := make([]string, 0, len(fields))
	for _, f := range fields {
		f = strings.ToLower(strings.NewReplacer("(", "", ")", "").Replace(f))
		switch f {
		case "deep", "learning", "ami", "":
			continue
		case "arm64":
			p.ARM64 = true
			continue
		}
		kept = append(kept, f)
	}
	p.AMIType = strings.Join(kept, "-")
	return p
}
