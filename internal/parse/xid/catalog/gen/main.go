// Command gen turns the Xid catalog data file into package xid's catalog_gen.go. Package xid
// runs it through go:generate (make generate), from its own directory:
//
//	go run ./catalog/gen -in catalog/xid-catalog.tsv -out catalog_gen.go
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/xid/catalog"
)

func main() {
	in := flag.String("in", "catalog/xid-catalog.tsv", "the catalog data file")
	out := flag.String("out", "catalog_gen.go", "the Go file to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "xid catalog gen:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	text, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("reading the catalog data file: %w", err)
	}
	c, err := catalog.Parse(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	// The header shows the path as given, in slash form, so the output is the same on any OS.
	src, err := catalog.Render(c, filepath.ToSlash(in))
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, src, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}
