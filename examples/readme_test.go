package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// maxFirstScreenProse is how many lines of prose the README may have before its first
// second-level heading: what the plugin is and for whom, read in a minute.
const maxFirstScreenProse = 12

// firstScreen is the README's text before its first "## " heading (outside code blocks).
func firstScreen(readme string) string {
	in := false
	for i, line := range strings.SplitAfter(readme, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
		}
		if !in && strings.HasPrefix(line, "## ") {
			return strings.Join(strings.SplitAfter(readme, "\n")[:i], "")
		}
	}
	return readme
}

// proseLines counts the non-blank lines of text outside code blocks, the headings left out.
func proseLines(md string) int {
	n, in := 0, false
	for _, line := range strings.Split(md, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "```"):
			in = !in
		case in, t == "", strings.HasPrefix(t, "#"):
		default:
			n++
		}
	}
	return n
}

// TestREADMEFirstScreen: the README says what the plugin is in at most 12 lines of prose before
// its first section, with the pipeline's diagram there (a Mermaid block, which GitHub renders),
// and keeps the sections other parts of the repository rely on: the two commands, the
// generated checks table and the Layout.
func TestREADMEFirstScreen(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	first := firstScreen(readme)
	if first == readme {
		t.Fatal("README.md has no second-level heading")
	}
	if n := proseLines(first); n > maxFirstScreenProse {
		t.Errorf("README.md has %d lines of prose before its first section, want at most %d: move the detail into docs/", n, maxFirstScreenProse)
	}
	mermaid := regexp.MustCompile("(?s)```mermaid\n(.*?)\n```").FindStringSubmatch(first)
	if mermaid == nil {
		t.Fatal("README.md has no ```mermaid diagram before its first section")
	}
	// The pipeline, end to end.
	for _, part := range []string{"data source", "amazon-ebs", "provisioner", "AMI", "post-processor", "N nodes", "dlami:verified", "every boot", "Slurm", "node-problem-detector", "replacing engine"} {
		if !strings.Contains(mermaid[1], part) {
			t.Errorf("the README's diagram does not show %q", part)
		}
	}
	for _, want := range []string{"## The two commands", "make demo", "make test", "## A minimal template for real AWS", "## Layout",
		"<!-- checks:begin (generated from internal/checks by go generate; do not edit) -->", "<!-- checks:end -->"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	// Its templates parse.
	for i, m := range regexp.MustCompile("(?s)```hcl\n(.*?)```").FindAllStringSubmatch(readme, -1) {
		if _, diags := hclsyntax.ParseConfig([]byte(m[1]), "README.md", hcl.Pos{Line: 1, Column: 1}); diags.HasErrors() {
			t.Errorf("README.md's hcl block %d: %s", i+1, diags.Error())
		}
	}
}

func TestProseLines(t *testing.T) {
	for _, tt := range []struct {
		md   string
		want int
	}{
		{"# title\n\none\ntwo\n", 2},
		{"a\n```mermaid\nx --> y\n```\nb\n", 2},
		{"\n\n", 0},
		{"a\n```sh\n## not a heading\n```\n## real\nb\n", 1},
	} {
		if got := proseLines(firstScreen(tt.md)); got != tt.want {
			t.Errorf("proseLines(firstScreen(%q)) = %d, want %d", tt.md, got, tt.want)
		}
	}
}

var (
	mdLinkRe  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
)

// slug is GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
func slug(h string) string {
	h = strings.ToLower(strings.ReplaceAll(h, "`", ""))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocLinksResolve: every relative link of the README and the docs pages names a file or
// folder of the repository, and an anchor a heading of the page it points to.
func TestDocLinksResolve(t *testing.T) {
	pages := []string{filepath.Join("..", "README.md")}
	for _, pattern := range []string{"*.md", "*/*.mdx", "*/*.md"} {
		found, _ := filepath.Glob(filepath.Join("..", "docs", pattern))
		pages = append(pages, found...)
	}
	links := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		// Code blocks are not links.
		text := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(data), "")
		for _, m := range mdLinkRe.FindAllStringSubmatch(text, -1) {
			target := m[1]
			// Web addresses, and the integration registry's site-relative ones (docs/README.md
			// becomes the registry's landing page).
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "/") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s: link %q: %v", page, target, err)
				continue
			}
			if anchor == "" || st.IsDir() {
				continue
			}
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, h := range headingRe.FindAllStringSubmatch(string(body), -1) {
				if slug(h[1]) == anchor {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", page, target, path, anchor)
			}
		}
	}
	if links < 20 {
		t.Errorf("only %d relative links found in %d pages: the scan is broken", links, len(pages))
	}
}
