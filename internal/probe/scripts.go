package probe

import (
	"embed"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
)

// The long scripts the engine runs on a host as jobs, and the longer commands of the probe's
// bundles, are shell files of their own (scripts/*.sh: `sh -n` and shellcheck read them as
// they are), filled in with their settings when rendered. Every value reaches the script
// quoted, as a variable set before the body or as a positional parameter.
//
//go:embed scripts/*.sh
var scriptFiles embed.FS

// Script is a long job the engine runs on the host: its name, what the engine uploads as
// File+".sh" in its staging folder, and the bound of its run.
type Script struct {
	// Name is shown in messages ("the NCCL test").
	Name string
	// File names the uploaded script and its pid file ("nccl"): the hosts the tests fake key
	// on it.
	File    string
	Text    string
	Timeout time.Duration
	// AsRoot runs the script as root.
	AsRoot bool
}

// scriptVar is one setting of a script, set before its body; exported ones are in the
// environment of what the script runs.
type scriptVar struct {
	name, value string
	exported    bool
}

// render returns scripts/name with vars set and lib.sh's helpers defined after its header
// comment, and args as its positional parameters.
func render(name string, vars []scriptVar, args []string) string {
	body := scriptFile(name)
	lines := strings.SplitAfter(body, "\n")
	head := 0
	for head < len(lines) && strings.HasPrefix(lines[head], "#") {
		head++
	}
	var b strings.Builder
	b.WriteString(strings.Join(lines[:head], ""))
	// The values are literal: nothing in them expands, and quotes in them are characters of the
	// value (what shellcheck's SC2016, SC2089 and SC2090 point out).
	b.WriteString("# Set by the plugin:\n# shellcheck disable=SC2016,SC2089,SC2090\n")
	var exported []string
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v.name, bundle.Quote(v.value))
		if v.exported {
			exported = append(exported, v.name)
		}
	}
	if len(exported) > 0 {
		b.WriteString("export " + strings.Join(exported, " ") + "\n")
	}
	if len(args) > 0 {
		b.WriteString("set --")
		for _, a := range args {
			b.WriteString(" " + bundle.Quote(a))
		}
		b.WriteString("\n")
	}
	lib := scriptFile("lib.sh")
	b.WriteString(lib[strings.Index(lib, "\n")+1:]) // the helpers, without lib.sh's title line
	b.WriteString(strings.Join(lines[head:], ""))
	return b.String()
}

// scriptFile is an embedded script; a missing one is a bug of this package.
func scriptFile(name string) string {
	data, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(fmt.Sprintf("probe: embedded script %s: %v", name, err))
	}
	return string(data)
}

// ScriptNames lists the embedded scripts, for the tests that check their syntax.
func ScriptNames() []string {
	entries, _ := scriptFiles.ReadDir("scripts")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// The longer commands of the probe's bundles are shell files too (commands/*.sh, shellchecked
// as they are: GNUmakefile's LINT_SHELL). Their values are set, quoted, before the body.
//
//go:embed commands/*.sh
var commandFiles embed.FS

// commandShell returns commands/name without its header comment, each variable set before it.
func commandShell(name string, vars ...scriptVar) string {
	data, err := commandFiles.ReadFile("commands/" + name)
	if err != nil {
		panic(fmt.Sprintf("probe: embedded command %s: %v", name, err))
	}
	lines := strings.SplitAfter(string(data), "\n")
	head := 0
	for head < len(lines) && strings.HasPrefix(lines[head], "#") {
		head++
	}
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v.name, bundle.Quote(v.value))
	}
	b.WriteString(strings.TrimRight(strings.Join(lines[head:], ""), "\n"))
	return b.String()
}

// paths is a tool's real paths as one word list (they hold no spaces: see hosttools).
func paths(t bundle.Tool) string { return strings.Join(t.Paths, " ") }

// asRootShell runs a rendered script as root as a bundle command: directly when already root,
// else through sudo -n (which never prompts). sudo's own warnings ("unable to resolve host")
// go to /dev/null, never into the section; the script's stderr joins its output.
func asRootShell(script, name string) string {
	q := bundle.Quote("exec 2>&1\n" + script)
	return `if [ "$(id -u)" = 0 ]; then exec /bin/sh -c ` + q + ` ` + name + `; fi; exec sudo -n /bin/sh -c ` + q + ` ` + name + ` 2>/dev/null`
}
