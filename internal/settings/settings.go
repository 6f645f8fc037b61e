// Package settings owns the defaults that the provisioner and the post-processor share, and
// the checks of the settings they share, so that one value and one message serve both.
package settings

import (
	"cmp"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// DefaultCheckTimeout is the default check_timeout: how long one check command may run.
const DefaultCheckTimeout = 60 * time.Second

// CheckTimeout is check_timeout as set (d > 0), else its default: the one place the default is
// applied, by the provisioner, the post-processor, the node check and the probe alike.
func CheckTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultCheckTimeout
	}
	return d
}

// DefaultRemoteFolder is the default remote_folder: where scripts and files are uploaded on
// the host. It must allow execution.
const DefaultRemoteFolder = "/tmp"

// RemoteFolder is remote_folder as set, else its default: the one place the default is applied.
func RemoteFolder(v string) string {
	if v == "" {
		return DefaultRemoteFolder
	}
	return v
}

// buildName names the report folders of a build Packer gave no name.
func buildName(name string) string { return cmp.Or(name, "build") }

// ReportDir is the provisioner's default report_dir: dlami-reports/<build name>.
func ReportDir(build string) string { return filepath.Join("dlami-reports", buildName(build)) }

// BOMFile is where the provisioner leaves its local copy of the bill of materials by default,
// next to its reports: the post-processor's default bom_file.
func BOMFile(build string) string { return filepath.Join(ReportDir(build), BOMLocalFileName) }

// BOMLocalFileName is the copy of the bill of materials the provisioner writes next to its
// reports, where the post-processor reads it by default.
const BOMLocalFileName = "dlami-bom.json"

// VerifyReportDir is the post-processor's default report_dir: dlami-verify/<build name>.
func VerifyReportDir(build string) string { return filepath.Join("dlami-verify", buildName(build)) }

// remoteFolderRE is the character set a remote folder may use. The SDK's file upload passes
// the destination to the remote `scp -vt` unquoted, through the login shell: any shell
// metacharacter (`;`, `$`, a quote, a space) in it would run as a command on the host.
var remoteFolderRE = regexp.MustCompile(`^/[A-Za-z0-9._/-]*$`)

// CheckRemoteFolder refuses a remote folder that is not an absolute path of letters, digits,
// '.', '_', '-' and '/', or that climbs with "..", naming setting.
func CheckRemoteFolder(setting, v string) error {
	switch {
	case !path.IsAbs(v):
		return fmt.Errorf("%s %q: must be an absolute path such as %s", setting, v, DefaultRemoteFolder)
	case !remoteFolderRE.MatchString(v):
		return fmt.Errorf("%s %q: use only letters, digits, '.', '_', '-' and '/' (the upload passes it to the remote shell unquoted, so other characters could run as commands); pick a folder such as /tmp/dlami", setting, v)
	case slices.Contains(strings.Split(v, "/"), ".."):
		return fmt.Errorf("%s %q: must not contain \"..\"; name the folder directly, such as /tmp/dlami", setting, v)
	}
	return nil
}
