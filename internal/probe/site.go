package probe

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
)

// SiteChecksDir is where the image keeps the site checks (the provisioner's site_checks_dir):
// the bake, the first-boot verification and the node check run what is there.
const SiteChecksDir = "/etc/dlami-bake/site-checks.d"

const sectionSiteList = "site.list"

// siteName is what a site check's file name may be: its id is "site:<name>", and the name
// becomes a bundle section.
var siteName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// siteListShell lists the executable regular files of the site checks directory, one per
// line; nothing when the directory does not exist.
const siteListShell = `[ -d "$0" ] || exit 0; for f in "$0"/*; do [ -f "$f" ] && [ -x "$f" ] && echo "${f##*/}"; done; exit 0`

// SiteChecks runs every executable of dir as root, each bounded by timeout, in name order. A
// file whose name cannot be an id is reported as a site check that could not run. A missing
// directory means no site checks.
func SiteChecks(ctx context.Context, r Runner, dir string, timeout time.Duration) ([]facts.SiteRun, error) {
	list := bundle.Command{Name: sectionSiteList, Shell: "exec /bin/sh -c " + bundle.Quote(siteListShell) + " " + bundle.Quote(dir)}
	sections, err := query(ctx, r, "listing the site checks", []bundle.Command{list})
	if err != nil {
		return nil, err
	}
	s := sections[sectionSiteList]
	if s.ExitCode != 0 || s.TimedOut {
		return nil, fmt.Errorf("listing the site checks in %s failed (exit %d): %s", dir, s.ExitCode, strings.TrimSpace(s.Output))
	}
	var runs []facts.SiteRun
	var cmds []bundle.Command
	for _, name := range strings.Fields(s.Output) {
		path := dir + "/" + name
		if !siteName.MatchString(name) {
			runs = append(runs, facts.SiteRun{Name: sanitizeSiteName(name), Path: path,
				Problem: fmt.Sprintf("%q is not a site check name: use letters, digits, '.', '_' and '-' (the name becomes the check id)", name)})
			continue
		}
		runs = append(runs, facts.SiteRun{Name: name, Path: path})
		cmds = append(cmds, bundle.Command{Name: "site." + name, Timeout: timeout,
			Shell: asRootShell("exec "+bundle.Quote(path), "dlami-site-check")})
	}
	if len(cmds) == 0 {
		return runs, nil
	}
	sections, err = query(ctx, r, "the site checks", cmds)
	if err != nil {
		return nil, err
	}
	for i := range runs {
		if runs[i].Problem != "" {
			continue
		}
		sec := sections["site."+runs[i].Name]
		runs[i].ExitCode, runs[i].TimedOut, runs[i].Output = sec.ExitCode, sec.TimedOut, sec.Output
		runs[i].Took = time.Duration(sec.DurationMS) * time.Millisecond
	}
	return runs, nil
}

// sanitizeSiteName keeps the id of a badly named site check readable.
func sanitizeSiteName(name string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e {
			return '_'
		}
		return r
	}, name)
}
