package checks

import (
	"fmt"
	"strings"
)

// phaseDoc says, for the docs, where a phase's checks run.
var phaseDoc = map[Phase]string{
	PhaseGuard:     "guard (before the first layer and after every layer)",
	PhaseFirstBoot: "first boot (the verification instance, every node's boot)",
	PhaseHost:      "host",
	PhaseLoad:      "load (during the NCCL test)",
	PhaseFunction:  "function",
	PhaseNode:      "node (the verification instance)",
	PhaseMultiNode: "multi-node (the post-processor's nodes, after every node's first boot passed)",
	PhaseImage:     "image (the bake's last step)",
}

// DocTable is the docs' check table, derived from the catalog: one row per check, in report
// order, with what it asserts, where its evidence comes from and when it runs.
func DocTable() string {
	var b strings.Builder
	b.WriteString("| ID | phase | what it asserts | evidence from |\n| --- | --- | --- | --- |\n")
	for _, e := range catalog {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", e.ID, phaseDoc[e.Phase], e.Doc, e.Reads)
	}
	return b.String()
}

// ReadmeTable is the README's short check table: id, phase and family, derived from the
// catalog.
func ReadmeTable() string {
	var b strings.Builder
	b.WriteString("| check | phase | family | runs in |\n| --- | --- | --- | --- |\n")
	for _, e := range catalog {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", e.ID, e.Phase, e.Family, runsIn(e.Phase))
	}
	return b.String()
}

// runsIn names the plans a phase's checks run in.
func runsIn(p Phase) string {
	switch p {
	case PhaseGuard:
		return "bake"
	case PhaseFirstBoot:
		return "first boot, node"
	case PhaseHost:
		return "bake, first boot, node"
	case PhaseLoad, PhaseFunction:
		return "bake, first boot, node (opt-in)"
	case PhaseNode:
		return "first boot"
	case PhaseMultiNode:
		return "first boot (nodes = 2 or more)"
	case PhaseImage:
		return "bake (image_hygiene)"
	}
	return ""
}
