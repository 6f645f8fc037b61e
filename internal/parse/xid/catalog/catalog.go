// Package catalog reads xid-catalog.tsv, the hand transcription of NVIDIA's published Xid
// Catalog, and renders it as the Go table package xid classifies by (catalog_gen.go).
//
// The transcription is data, not code, so that a new catalog revision is a reviewable diff of
// rows; the generator and a test in package xid keep the Go table in step with it.
package catalog

import (
	"bytes"
	"fmt"
	"go/format"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// NoBucketPublished stands in the immediate-action column where NVIDIA's page leaves the cell
// empty. It is ours, not an NVIDIA bucket, and package xid treats it as "investigate".
const NoBucketPublished = "NONE_PUBLISHED"

// Entry is one row of the catalog.
type Entry struct {
	Code        int
	Mnemonic    string
	Description string
	// Immediate is NVIDIA's "Resolution Bucket (Immediate Action)", or NoBucketPublished.
	Immediate string
	// Investigatory is NVIDIA's "Resolution Bucket (Investigatory Action)"; empty where the
	// page leaves it empty ("-" in the file).
	Investigatory string
	// Class is our own grouping for the report, not NVIDIA's.
	Class string
}

// Catalog is the parsed data file.
type Catalog struct {
	// Sources are the "# source:" URLs the rows were transcribed from.
	Sources []string
	// Taken is the "# taken:" date (YYYY-MM-DD) the source text was read.
	Taken   string
	Entries []Entry
}

const fieldCount = 6

// The shapes below are those NVIDIA's catalog uses; anything else is a transcription slip.
var (
	mnemonicShape = regexp.MustCompile(`^[A-Z0-9_]+(?: / [A-Z0-9_]+)*$`)
	bucketShape   = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	classShape    = regexp.MustCompile(`^[a-z]+$`)
	codeShape     = regexp.MustCompile(`^[1-9][0-9]{0,5}$`)
)

// Parse reads the data file's text. Every row must be well formed and the rows sorted by code
// without repeats; the header must name at least one https source and the date it was taken.
// Errors name the line and the column and say how to fix them.
func Parse(text string) (Catalog, error) {
	var c Catalog
	prev := 0
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			if err := c.readHeader(n, line); err != nil {
				return Catalog{}, err
			}
			continue
		}
		e, err := parseRow(n, line)
		if err != nil {
			return Catalog{}, err
		}
		if e.Code <= prev {
			return Catalog{}, fmt.Errorf("line %d: Xid %d comes after Xid %d: keep the rows sorted by code, one row per Xid", n, e.Code, prev)
		}
		prev = e.Code
		c.Entries = append(c.Entries, e)
	}
	switch {
	case len(c.Sources) == 0:
		return Catalog{}, fmt.Errorf("no \"# source: https://...\" header line: name the page the rows were transcribed from")
	case c.Taken == "":
		return Catalog{}, fmt.Errorf("no \"# taken: YYYY-MM-DD\" header line: give the date the source text was read")
	case len(c.Entries) == 0:
		return Catalog{}, fmt.Errorf("no catalog rows: a catalog with nothing in it would classify every Xid as unlisted")
	}
	return c, nil
}

func (c *Catalog) readHeader(n int, line string) error {
	body := strings.TrimSpace(strings.TrimPrefix(line, "#"))
	switch {
	case strings.HasPrefix(body, "source:"):
		v := strings.TrimSpace(strings.TrimPrefix(body, "source:"))
		url, _, _ := strings.Cut(v, " ")
		if !strings.HasPrefix(url, "https://") || len(url) == len("https://") {
			return fmt.Errorf("line %d: source %q is not an https URL: write \"# source: https://...\"", n, v)
		}
		c.Sources = append(c.Sources, url)
	case strings.HasPrefix(body, "taken:"):
		v := strings.TrimSpace(strings.TrimPrefix(body, "taken:"))
		if _, err := time.Parse(time.DateOnly, v); err != nil {
			return fmt.Errorf("line %d: taken date %q is not YYYY-MM-DD", n, v)
		}
		if c.Taken != "" {
			return fmt.Errorf("line %d: a second \"# taken:\" line: keep one date for the whole transcription", n)
		}
		c.Taken = v
	}
	return nil
}

func parseRow(n int, line string) (Entry, error) {
	f := strings.Split(line, "\t")
	if len(f) != fieldCount {
		return Entry{}, fmt.Errorf("line %d: %d tab-separated fields, want %d (code, mnemonic, description, immediate, investigatory, class)", n, len(f), fieldCount)
	}
	names := [fieldCount]string{"code", "mnemonic", "description", "immediate", "investigatory", "class"}
	for j, v := range f {
		if v == "" || strings.TrimSpace(v) != v {
			return Entry{}, fmt.Errorf("line %d: %s %q is empty or has surrounding spaces: write the cell's text exactly (\"-\" for an empty investigatory cell)", n, names[j], v)
		}
		for _, r := range v {
			if r < ' ' || r == 0x7f {
				return Entry{}, fmt.Errorf("line %d: %s has a control character: remove it", n, names[j])
			}
		}
	}
	if !codeShape.MatchString(f[0]) {
		return Entry{}, fmt.Errorf("line %d: code %q is not an Xid number (1-999999, no leading zeros)", n, f[0])
	}
	code, err := strconv.Atoi(f[0])
	if err != nil { // the shape check above makes this unreachable; kept so nothing is assumed
		return Entry{}, fmt.Errorf("line %d: code %q: %w", n, f[0], err)
	}
	e := Entry{Code: code, Mnemonic: f[1], Description: f[2], Immediate: f[3], Investigatory: f[4], Class: f[5]}
	if !mnemonicShape.MatchString(e.Mnemonic) {
		return Entry{}, fmt.Errorf("line %d: mnemonic %q is not in NVIDIA's UPPER_SNAKE form (alternatives separated by \" / \")", n, e.Mnemonic)
	}
	if !bucketShape.MatchString(e.Immediate) {
		return Entry{}, fmt.Errorf("line %d: immediate bucket %q is not an UPPER_SNAKE bucket name: copy NVIDIA's, or write %s where the page has none", n, e.Immediate, NoBucketPublished)
	}
	if e.Investigatory == "-" {
		e.Investigatory = ""
	}
	if !classShape.MatchString(e.Class) {
		return Entry{}, fmt.Errorf("line %d: class %q is not one lower-case word", n, e.Class)
	}
	return e, nil
}

// Render returns catalog_gen.go for package xid: a lookup switch sorted by code, and the
// sources, date and size as exported values a report can cite. dataFile is the data file's path as the generated header shows
// it. The output is gofmt'd and depends on nothing but c and dataFile, so regenerating an
// unchanged catalog gives the same bytes.
func Render(c Catalog, dataFile string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by internal/parse/xid/catalog/gen from %s; DO NOT EDIT.\n\n", dataFile)
	fmt.Fprintf(&b, "package xid\n\n")
	fmt.Fprintf(&b, "// CatalogSources returns the pages the Xid catalog was transcribed from, on CatalogTaken.\n")
	fmt.Fprintf(&b, "func CatalogSources() []string {\n\treturn []string{\n")
	for _, s := range c.Sources {
		fmt.Fprintf(&b, "\t\t%s,\n", strconv.Quote(s))
	}
	fmt.Fprintf(&b, "\t}\n}\n\n")
	fmt.Fprintf(&b, "// CatalogTaken is the date the catalog's source text was read.\nconst CatalogTaken = %s\n\n", strconv.Quote(c.Taken))
	fmt.Fprintf(&b, "// CatalogSize is the number of Xids the catalog lists.\nconst CatalogSize = %d\n\n", len(c.Entries))
	fmt.Fprintf(&b, "// catalogLookup returns NVIDIA's catalog row for Xid code; false for a code the catalog\n// does not list.\n")
	fmt.Fprintf(&b, "func catalogLookup(code int) (catalogEntry, bool) {\n\tswitch code {\n")
	for _, e := range c.Entries {
		fmt.Fprintf(&b, "\tcase %d:\n\t\treturn catalogEntry{mnemonic: %s, description: %s, immediate: %s, investigatory: %s, class: %s}, true\n",
			e.Code, strconv.Quote(e.Mnemonic), strconv.Quote(e.Description), strconv.Quote(e.Immediate), strconv.Quote(e.Investigatory), strconv.Quote(e.Class))
	}
	fmt.Fprintf(&b, "\t}\n\treturn catalogEntry{}, false\n}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the generated table: %w", err)
	}
	return out, nil
}
