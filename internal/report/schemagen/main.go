// Command schemagen writes the JSON Schema of dlami-report.json (report.JSONSchema), or with
// -cost of dlami-cost.json (report.CostJSONSchema), to the file -o names; `go generate
// ./internal/report/` (part of `make generate`) runs it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
)

func main() {
	out := flag.String("o", "", "the file to write the schema to")
	cost := flag.Bool("cost", false, "write dlami-cost.json's schema instead of the report's")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: schemagen [-cost] -o FILE")
		os.Exit(2)
	}
	generate := report.JSONSchema
	if *cost {
		generate = report.CostJSONSchema
	}
	schema, err := generate()
	if err == nil {
		err = report.WriteAtomic(*out, schema)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}
