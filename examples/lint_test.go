package examples

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// renderedScripts are shell files that are templates: what runs is their rendered text, and the
// named test runs shellcheck on that (the raw file names variables the plugin sets when it
// renders them, so shellcheck on it would only report those).
var renderedScripts = map[string]string{
	"internal/probe/scripts/": "TestScriptsParse (internal/probe)",
}

var shellInterpreter = regexp.MustCompile(`^#!\s*(?:/usr)?/bin/(?:env\s+)?(?:sh|bash|dash|ksh)(?:\s|$)`)

// isShellScript says whether a file is a shell script from its name and its first line: a
// shell shebang, a `# shellcheck shell=` directive (a file sourced by others) or a .sh/.bash
// name.
func isShellScript(name, firstLine string) bool {
	switch {
	case shellInterpreter.MatchString(firstLine):
		return true
	case strings.HasPrefix(firstLine, "# shellcheck shell="):
		return true
	case strings.HasSuffix(name, ".sh"), strings.HasSuffix(name, ".bash"):
		return true
	}
	return false
}

func TestIsShellScript(t *testing.T) {
	for _, tc := range []struct {
		name, first string
		want        bool
	}{
		{"run", "#!/bin/bash", true},
		{"run", "#!/bin/sh", true},
		{"run", "#!/usr/bin/env bash", true},
		{"run", "#! /bin/sh -e", true},
		{"lib", "# shellcheck shell=bash", true},
		{"zippy_efa.sh", "# Installed by the EFA installer", true},
		{"main.go", "package main", false},
		{"tool", "#!/usr/bin/env python3", false},
		{"tool", "#!/bin/shx", false},
		{"bashrc.txt", "#!/usr/bin/perl", false},
		{"README", "", false},
	} {
		if got := isShellScript(tc.name, tc.first); got != tc.want {
			t.Errorf("isShellScript(%q, %q) = %v, want %v", tc.name, tc.first, got, tc.want)
		}
	}
}

// trackedShellScripts lists every file git tracks that is a shell script. Symbolic links are
// left out: shellcheck reads their targets, which are tracked files of their own.
func trackedShellScripts(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-s", "-z").Output()
	if err != nil {
		missing(t, "git ls-files in %s: %v", root, err)
	}
	var scripts []string
	for _, entry := range bytes.Split(out, []byte{0}) {
		// "MODE OBJECT STAGE\tPATH"
		meta, path, ok := strings.Cut(string(entry), "\t")
		if !ok || strings.HasPrefix(meta, "120000 ") || strings.HasSuffix(path, ".go") {
			continue
		}
		f, err := os.Open(filepath.Join(root, path))
		if err != nil {
			if os.IsNotExist(err) { // deleted in the working tree, not yet committed
				continue
			}
			t.Fatal(err)
		}
		first, _ := bufio.NewReader(f).ReadString('\n')
		f.Close()
		if isShellScript(path, strings.TrimRight(first, "\r\n")) {
			scripts = append(scripts, path)
		}
	}
	sort.Strings(scripts)
	return scripts
}

// Every shell script the repository ships or runs is one `make lint` runs shellcheck on (or,
// for a template, one a named test checks as rendered): a new script cannot escape the lint.
// The list comes from make itself (lint-shell-files), so LINT_SHELL's globs expand exactly as
// the lint recipe's shell expands them.
func TestLintCoversEveryShellScript(t *testing.T) {
	root := repoRoot(t)
	if _, err := exec.LookPath("make"); err != nil {
		missing(t, "make is not installed")
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "lint-shell-files")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make lint-shell-files: %v", err)
	}
	linted := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			t.Errorf("LINT_SHELL names %s, which matches no file: remove it or fix the glob", f)
		}
		linted[filepath.Clean(f)] = true
	}
	scripts := trackedShellScripts(t, root)
	if len(scripts) < 50 {
		t.Fatalf("found only %d shell scripts in git ls-files: the detection is broken", len(scripts))
	}
	for _, s := range scripts {
		if linted[s] {
			continue
		}
		rendered := false
		for prefix := range renderedScripts {
			rendered = rendered || strings.HasPrefix(s, prefix)
		}
		if !rendered {
			t.Errorf("%s is a shell script that `make lint` does not check: add it to LINT_SHELL in GNUmakefile", s)
		}
	}
}

// The lint configs are the ones the linters read, and each names the make variable that lists
// the files it applies to: `yamllint FILE` would lint the config as one more YAML file and read
// its settings only by accident (yamllint finds .yamllint in the working directory).
func TestLintConfigsAreUsed(t *testing.T) {
	root := repoRoot(t)
	makefile, err := os.ReadFile(filepath.Join(root, "GNUmakefile"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := lintRecipe(t, string(makefile))
	for _, tc := range []struct{ config, variable, command string }{
		{".shellcheckrc", "LINT_SHELL", "shellcheck $(LINT_SHELL)"},
		{".yamllint", "LINT_YAML", "yamllint --strict -c .yamllint $(LINT_YAML)"},
	} {
		text, err := os.ReadFile(filepath.Join(root, tc.config))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "(GNUmakefile: "+tc.variable+")") {
			t.Errorf("%s does not name the GNUmakefile variable %s in its header", tc.config, tc.variable)
		}
		if !regexp.MustCompile(`(?m)^` + tc.variable + `\s*:?=`).Match(makefile) {
			t.Errorf("GNUmakefile does not define %s, which %s names", tc.variable, tc.config)
		}
		if !strings.Contains(recipe, "\t"+tc.command+"\n") {
			t.Errorf("make lint does not run %q", tc.command)
		}
	}
}

// lintRecipe returns the recipe lines of the lint target.
func lintRecipe(t *testing.T, makefile string) string {
	t.Helper()
	start := regexp.MustCompile(`(?m)^lint:.*\n`).FindStringIndex(makefile)
	if start == nil {
		t.Fatal("GNUmakefile has no lint target")
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(makefile[start[1]:], "\n") {
		if !strings.HasPrefix(line, "\t") {
			break
		}
		b.WriteString(line)
	}
	return b.String()
}
