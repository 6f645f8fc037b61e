package dlami

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
)

// siteCheckName is what a site check's file name may be: it becomes the check id
// "site:<name>" (the same rule the probe applies on the host).
var siteCheckName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// siteCheckMax bounds one site check's size: it is a script or a small program, not a payload.
const siteCheckMax = 16 << 20

// readSiteChecks reads the executables of site_checks_dir, in name order. Every file must be
// an executable regular file with a name that can be an id: a file the node could not run
// would fail every node, so it is refused here, naming the setting.
func readSiteChecks(dir string) ([]engine.SiteCheck, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("site_checks_dir %q: %w (name a local directory of executables)", dir, err)
	}
	var out []engine.SiteCheck
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		info, err := os.Stat(path)
		switch {
		case err != nil:
			return nil, fmt.Errorf("site_checks_dir %q: %w", dir, err)
		case !info.Mode().IsRegular():
			return nil, fmt.Errorf("site_checks_dir %q: %s is not a regular file (site checks are executables directly in the directory)", dir, e.Name())
		case !siteCheckName.MatchString(e.Name()):
			return nil, fmt.Errorf("site_checks_dir %q: %q is not a site check name: use letters, digits, '.', '_' and '-' (it becomes the check id site:<name>)", dir, e.Name())
		case info.Mode().Perm()&0o111 == 0:
			return nil, fmt.Errorf("site_checks_dir %q: %s is not executable (chmod +x it)", dir, e.Name())
		case info.Size() > siteCheckMax:
			return nil, fmt.Errorf("site_checks_dir %q: %s is %d bytes, over %d", dir, e.Name(), info.Size(), siteCheckMax)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("site_checks_dir %q: %w", dir, err)
		}
		out = append(out, engine.SiteCheck{Name: e.Name(), Data: data})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil, fmt.Errorf("site_checks_dir %q holds no site check: remove the setting or add executables", dir)
	}
	return out, nil
}
