package catalog

import (
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"
)

const header = "# source: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html\n# taken: 2026-11-30\n"

// row joins cells with tabs, as the data file does.
func row(cells ...string) string { return strings.Join(cells, "\t") + "\n" }

func TestParse(t *testing.T) {
	text := "# a comment line\n" + header + "\n" +
		row("31", "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP", "WORKFLOW_XID_31", "application") +
		row("79", "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM", "CONTACT_SUPPORT", "bus") +
		strings.TrimSuffix(row("172", "UNCORRECTABLE_SRAM_ERROR", "Additional to Xid 48", NoBucketPublished, "-", "memory"), "\n") + "\r\n"
	got, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	want := Catalog{
		Sources: []string{"https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"},
		Taken:   "2026-11-30",
		Entries: []Entry{
			{31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP", "WORKFLOW_XID_31", "application"},
			{79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM", "CONTACT_SUPPORT", "bus"},
			{172, "UNCORRECTABLE_SRAM_ERROR", "Additional to Xid 48", NoBucketPublished, "", "memory"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseRejects(t *testing.T) {
	good := row("79", "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM", "CONTACT_SUPPORT", "bus")
	tests := []struct {
		name string
		text string
		want string // a piece of the error that says what to fix
	}{
		{"empty", "", "source"},
		{"no source", "# taken: 2026-11-30\n" + good, "source"},
		{"http source", "# source: http://docs.nvidia.com/x\n# taken: 2026-11-30\n" + good, "https"},
		{"no taken", "# source: https://docs.nvidia.com/x\n" + good, "taken"},
		{"bad taken", "# source: https://docs.nvidia.com/x\n# taken: 30/11/2026\n" + good, "YYYY-MM-DD"},
		{"two taken", header + "# taken: 2026-12-01\n" + good, "second"},
		{"no rows", header, "no catalog rows"},
		{"five fields", header + row("79", "M", "d", "RESET_GPU", "bus"), "5 tab-separated fields"},
		{"spaces not tabs", header + "79 ROBUST_CHANNEL_X d RESET_GPU - bus\n", "1 tab-separated"},
		{"empty cell", header + row("79", "ROBUST_CHANNEL_X", "", "RESET_GPU", "-", "bus"), "description"},
		{"padded cell", header + row("79", "ROBUST_CHANNEL_X", "d", " RESET_GPU", "-", "bus"), "immediate"},
		{"control char", header + row("79", "ROBUST_CHANNEL_X", "d\x01", "RESET_GPU", "-", "bus"), "control"},
		{"code not a number", header + row("7x", "ROBUST_CHANNEL_X", "d", "RESET_GPU", "-", "bus"), "code"},
		{"code zero", header + row("0", "ROBUST_CHANNEL_X", "d", "RESET_GPU", "-", "bus"), "code"},
		{"code leading zero", header + row("079", "ROBUST_CHANNEL_X", "d", "RESET_GPU", "-", "bus"), "code"},
		{"code too long", header + row("1234567", "ROBUST_CHANNEL_X", "d", "RESET_GPU", "-", "bus"), "code"},
		{"lower-case mnemonic", header + row("79", "robust_channel", "d", "RESET_GPU", "-", "bus"), "mnemonic"},
		{"lower-case bucket", header + row("79", "ROBUST_CHANNEL_X", "d", "reset_gpu", "-", "bus"), "NONE_PUBLISHED"},
		{"bucket with prose", header + row("79", "ROBUST_CHANNEL_X", "d", "Solo: RESTART_FM", "-", "bus"), "immediate bucket"},
		{"class two words", header + row("79", "ROBUST_CHANNEL_X", "d", "RESET_GPU", "-", "bus error"), "class"},
		{"unsorted", header + good + row("31", "ROBUST_CHANNEL_X", "d", "RESTART_APP", "-", "application"), "sorted"},
		{"repeated", header + good + good, "sorted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.text)
			if err == nil {
				t.Fatalf("Parse accepted %q", tt.text)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

// The real data file parses, and rendering it twice gives the same valid Go.
func TestRenderDataFile(t *testing.T) {
	text, err := os.ReadFile("xid-catalog.tsv")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Entries) < 172 {
		t.Errorf("%d rows, NVIDIA's catalog lists 172", len(c.Entries))
	}
	a, err := Render(c, "catalog/xid-catalog.tsv")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(c, "catalog/xid-catalog.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Error("Render is not deterministic")
	}
	if _, err := parser.ParseFile(token.NewFileSet(), "catalog_gen.go", a, 0); err != nil {
		t.Errorf("rendered Go does not parse: %v", err)
	}
	for _, want := range []string{"DO NOT EDIT.", "package xid", "case 79:", `"RESTART_BM"`, "const CatalogTaken = \"2026-11-30\"", "const CatalogSize = 172"} {
		if !strings.Contains(string(a), want) {
			t.Errorf("rendered Go lacks %q", want)
		}
	}
}

func FuzzParse(f *testing.F) {
	if text, err := os.ReadFile("xid-catalog.tsv"); err == nil {
		f.Add(string(text))
	}
	f.Add(header + row("79", "ROBUST_CHANNEL_X", "d", "RESET_GPU", "-", "bus"))
	f.Add(header + row("79", "ROBUST_CHANNEL_X", "d \"quoted\" \\ `tick`", "RESET_GPU", "-", "bus"))
	f.Fuzz(func(t *testing.T, text string) {
		c, err := Parse(text)
		if err != nil {
			return
		}
		if len(c.Sources) == 0 || c.Taken == "" || len(c.Entries) == 0 {
			t.Fatalf("accepted a catalog without source, date or rows: %+v", c)
		}
		for i, e := range c.Entries {
			if i > 0 && e.Code <= c.Entries[i-1].Code {
				t.Fatalf("rows not strictly sorted: %d after %d", e.Code, c.Entries[i-1].Code)
			}
			if e.Immediate == "" || e.Mnemonic == "" || e.Description == "" || e.Class == "" {
				t.Fatalf("accepted an empty cell: %+v", e)
			}
		}
		// Whatever Parse accepts, Render must turn into valid Go.
		src, err := Render(c, "catalog/xid-catalog.tsv")
		if err != nil {
			t.Fatalf("Render failed on an accepted catalog: %v", err)
		}
		if _, err := parser.ParseFile(token.NewFileSet(), "catalog_gen.go", src, 0); err != nil {
			t.Fatalf("rendered Go does not parse: %v", err)
		}
	})
}
