package xid

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/xid/catalog"
)

// catalogDataFile is the data file as the go:generate line names it (relative to this package).
const catalogDataFile = "catalog/xid-catalog.tsv"

func readCatalog(t *testing.T) catalog.Catalog {
	t.Helper()
	text, err := os.ReadFile(catalogDataFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(string(text))
	if err != nil {
		t.Fatalf("%s: %v", catalogDataFile, err)
	}
	return c
}

// catalog_gen.go must be exactly what the generator makes of the data file today: a stale
// table fails here before it fails make check-generate.
func TestCatalogGeneratedMatchesData(t *testing.T) {
	want, err := catalog.Render(readCatalog(t), catalogDataFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("catalog_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("catalog_gen.go is stale: run go generate ./internal/parse/xid/ (or make generate)")
	}
	if !regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`).Match(got) {
		t.Error("catalog_gen.go lacks the standard generated-code header")
	}
}

// Every catalog row classifies as transcribed, with a bucket and an Action that actionFor knows.
func TestCatalogEveryEntryMapped(t *testing.T) {
	c := readCatalog(t)
	if len(c.Entries) != CatalogSize {
		t.Fatalf("data file has %d rows, catalog_gen.go %d", len(c.Entries), CatalogSize)
	}
	// The catalog as published lists 1-172 with no gaps; fewer rows means a lost row.
	if len(c.Entries) < 172 || c.Entries[0].Code != 1 || c.Entries[len(c.Entries)-1].Code != len(c.Entries) {
		t.Errorf("catalog rows run %d..%d (%d rows), want 1..N without gaps, N >= 172",
			c.Entries[0].Code, c.Entries[len(c.Entries)-1].Code, len(c.Entries))
	}
	classes := map[string]bool{}
	for _, class := range strings.Split("application driver engine display memory nvlink bus firmware power timeout security recovery test", " ") {
		classes[class] = true
	}
	listed := map[int]bool{}
	for _, e := range c.Entries {
		listed[e.Code] = true
		if e.Immediate == "" {
			t.Errorf("Xid %d has no immediate bucket", e.Code)
		}
		action, ok := actionFor(e.Immediate)
		if !ok || action == "" {
			t.Errorf("Xid %d: bucket %q has no Action in actionFor", e.Code, e.Immediate)
		}
		if !classes[e.Class] {
			t.Errorf("Xid %d: class %q is not one Severity documents", e.Code, e.Class)
		}
		got, ok := catalogLookup(e.Code)
		want := catalogEntry{mnemonic: e.Mnemonic, description: e.Description, immediate: e.Immediate, investigatory: e.Investigatory, class: e.Class}
		if !ok || got != want {
			t.Errorf("catalogLookup(%d) = %+v, %v; want %+v", e.Code, got, ok, want)
		}
		s := Classify(Event{Xid: e.Code})
		if s.Resolution != e.Immediate || s.Mnemonic != e.Mnemonic || s.Action == "" || s.Class == "unknown" {
			t.Errorf("Classify(%d) = %+v", e.Code, s)
		}
	}
	for code := -1; code <= 100000; code++ {
		if _, ok := catalogLookup(code); ok != listed[code] {
			t.Fatalf("catalogLookup(%d) ok = %v, but the data file lists it: %v", code, ok, listed[code])
		}
	}
}

func TestActionForUnknownBucketFailsClosed(t *testing.T) {
	for _, bucket := range []string{"", "RESTART_FM", "XID_154_EVAL", "restart_app", "RESET_GPU "} {
		if action, ok := actionFor(bucket); ok || action != ActionInvestigate {
			t.Errorf("actionFor(%q) = %q, %v; want investigate, false", bucket, action, ok)
		}
	}
}

func TestCatalogNoBucketMarkerAgrees(t *testing.T) {
	if catalogNoBucket != catalog.NoBucketPublished {
		t.Errorf("package xid marks a missing bucket %q, the data file %q", catalogNoBucket, catalog.NoBucketPublished)
	}
}

func TestCatalogCitesItsSource(t *testing.T) {
	sources := CatalogSources()
	if len(sources) == 0 || sources[0] != "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" {
		t.Errorf("CatalogSources() = %q, want NVIDIA's catalog page first", sources)
	}
	if _, err := time.Parse(time.DateOnly, CatalogTaken); err != nil {
		t.Errorf("CatalogTaken %q: %v", CatalogTaken, err)
	}
}

func BenchmarkClassify(b *testing.B) {
	events := []Event{{Xid: 79}, {Xid: 154, Message: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"}, {Xid: 9999}, {Xid: 13}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Classify(events[i%len(events)])
	}
}
