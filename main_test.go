package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestIntegrationMetadataListsEveryComponent: the integrations registry shows the components
// .web-docs/metadata.hcl lists; every component with docs (.web-docs/components/<type>/<slug>,
// generated from docs/ by `make generate`) must be listed, and nothing else.
func TestIntegrationMetadataListsEveryComponent(t *testing.T) {
	meta, err := os.ReadFile(filepath.Join(".web-docs", "metadata.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?s)component\s*\{\s*type\s*=\s*"([^"]+)"\s*name\s*=\s*"[^"]*"\s*slug\s*=\s*"([^"]+)"\s*\}`).FindAllStringSubmatch(string(meta), -1) {
		listed = append(listed, m[1]+"/"+m[2])
	}
	docs, err := filepath.Glob(filepath.Join(".web-docs", "components", "*", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, d := range docs {
		documented = append(documented, filepath.Base(filepath.Dir(filepath.Dir(d)))+"/"+filepath.Base(filepath.Dir(d)))
	}
	slices.Sort(listed)
	slices.Sort(documented)
	if len(documented) == 0 || !slices.Equal(listed, documented) {
		t.Errorf(".web-docs/metadata.hcl lists components %v, the docs have %v: add a component block for each", listed, documented)
	}
}

// TestReleaseBuildsEveryPackerPlatform: Packer runs on Linux, macOS and Windows, and `packer
// init` finds only an asset of its own platform.
func TestReleaseBuildsEveryPackerPlatform(t *testing.T) {
	b, err := os.ReadFile(".goreleaser.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*goos:\s*\n((?:\s*-\s*\w+\s*\n)+)`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal(".goreleaser.yml: no goos list")
	}
	for _, os := range []string{"linux", "darwin", "windows"} {
		if !regexp.MustCompile(`-\s*` + os + `\b`).MatchString(m[1]) {
			t.Errorf(".goreleaser.yml builds no %s binary (goos: %s)", os, strings.Join(strings.Fields(m[1]), " "))
		}
	}
}

// TestCrossCompiles builds the plugin for Windows and macOS, as the release does, so that a
// Linux-only call (a syscall, a signal, a build tag) cannot reach a release unnoticed.
func TestCrossCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the plugin (minutes on a cold build cache); skipped with -short, the release builds them")
	}
	for _, p := range []struct{ goos, goarch string }{{"windows", "amd64"}, {"darwin", "arm64"}} {
		t.Run(p.goos+"/"+p.goarch, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "build", "-o", os.DevNull, ".")
			cmd.Env = append(os.Environ(), "GOOS="+p.goos, "GOARCH="+p.goarch, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("GOOS=%s GOARCH=%s go build .: %v\n%s", p.goos, p.goarch, err, out)
			}
		})
	}
}
