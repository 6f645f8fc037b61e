package probe

import (
	"context"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
)

// settleShell waits for the first boot to settle and prints cloud-init's final status line
// (commands/settle.sh). A first-boot upgrade that is still running would otherwise be judged
// half done.
var settleShell = commandShell("settle.sh")

// Settle waits at most timeout for a first boot to settle and reads cloud-init's status.
func Settle(ctx context.Context, r Runner, timeout time.Duration) (facts.Fact[facts.Settle], error) {
	cmd := bundle.Command{Name: sectionSettle, Shell: settleShell, Timeout: timeout}
	sections, err := query(ctx, r, "settle", []bundle.Command{cmd})
	if err != nil {
		return facts.Fact[facts.Settle]{}, err
	}
	return parseSettle(sections), nil
}

func parseSettle(sections map[string]bundle.Section) facts.Fact[facts.Settle] {
	ev := evidence(sections, sectionSettle)
	s, problem := get(sections, sectionSettle)
	switch {
	case s.TimedOut:
		return facts.Read(facts.Settle{TimedOut: true}, ev)
	case problem != "":
		return facts.Unread[facts.Settle](problem+": "+textOf(s.Output), ev)
	}
	return facts.Read(facts.Settle{Status: textOf(s.Output)}, ev)
}

func textOf(s string) string { return strings.TrimSpace(s) }

// Snapshot reads the state the kernel guard compares: kernels, holds, packages, DKMS and the
// guarded modules' versions. An unreadable part is an error: the guard fails closed on it.
func Snapshot(ctx context.Context, r Runner) (facts.Snapshot, error) {
	sections, err := query(ctx, r, "kernel guard snapshot", snapshotCommands())
	if err != nil {
		return facts.Snapshot{}, err
	}
	return ParseSnapshot(sections)
}

// baselinesShell lists the baselines on the host, one path per line.
const baselinesShell = `for f in ` + facts.BaselineDir + `/baseline*.json; do [ -e "$f" ] && echo "$f"; done; exit 0`

// Baselines lists the guard baselines recorded on the host, so the bake can remove those of
// other runs: they must not stay in the image.
func Baselines(ctx context.Context, r Runner) ([]string, error) {
	sections, err := query(ctx, r, "listing baselines", []bundle.Command{{Name: sectionBaselines, Shell: baselinesShell}})
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, line := range strings.Split(sections[sectionBaselines].Output, "\n") {
		if p := strings.TrimSpace(line); strings.HasPrefix(p, facts.BaselineDir+"/") {
			paths = append(paths, p)
		}
	}
	return paths, nil
}
