// Command docgen writes the check tables the docs and the README show, from the catalog of
// package checks: the docs' partial (docs-partials/internal/checks/checks.mdx) and the README's
// table between its "checks:begin" and "checks:end" markers. `go generate ./internal/checks/`
// runs it; CI fails when its output differs from what is committed.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
)

const (
	beginMarker = "<!-- checks:begin (generated from internal/checks by go generate; do not edit) -->\n"
	endMarker   = "<!-- checks:end -->\n"
)

func main() {
	partial := flag.String("partial", "", "the docs partial to write")
	readme := flag.String("readme", "", "the README whose check table to replace")
	flag.Parse()
	if err := run(*partial, *readme); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(partial, readme string) error {
	if err := os.WriteFile(partial, []byte("<!-- Code generated from internal/checks by go generate; DO NOT EDIT. -->\n\n"+checks.DocTable()), 0o644); err != nil {
		return err
	}
	data, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	out, err := replaceBetween(data, []byte(beginMarker), []byte(endMarker), []byte(checks.ReadmeTable()))
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	return os.WriteFile(readme, out, 0o644)
}

// replaceBetween replaces what stands between the markers (kept) with body.
func replaceBetween(data, begin, end, body []byte) ([]byte, error) {
	i := bytes.Index(data, begin)
	j := bytes.Index(data, end)
	if i < 0 || j < i {
		return nil, fmt.Errorf("no %q ... %q markers", bytes.TrimSpace(begin), bytes.TrimSpace(end))
	}
	var b bytes.Buffer
	b.Write(data[:i+len(begin)])
	b.Write(body)
	b.Write(data[j:])
	return b.Bytes(), nil
}
