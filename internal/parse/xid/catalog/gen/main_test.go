package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/xid/catalog"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	good := "# source: https://docs.nvidia.com/x\n# taken: 2026-11-30\n79\tROBUST_CHANNEL_X\td\tRESTART_BM\t-\tbus\n"
	tests := []struct {
		name    string
		data    *string // nil: the input file does not exist
		wantErr string
	}{
		{"writes the rendered table", &good, ""},
		{"missing input", nil, "reading the catalog data file"},
		{"bad row names the file", ptr(strings.Replace(good, "\tbus", "\tBus", 1)), "in.tsv: line 3: class"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := filepath.Join(dir, "in.tsv")
			out := filepath.Join(dir, "out.go")
			os.Remove(in)
			os.Remove(out)
			if tt.data != nil {
				if err := os.WriteFile(in, []byte(*tt.data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := run(in, out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run = %v, want an error mentioning %q", err, tt.wantErr)
				}
				if _, statErr := os.Stat(out); statErr == nil {
					t.Error("a failed run wrote the output file")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c, err := catalog.Parse(good)
			if err != nil {
				t.Fatal(err)
			}
			want, err := catalog.Render(c, filepath.ToSlash(in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from catalog.Render:\n%s", got)
			}
		})
	}
}

func ptr(s string) *string { return &s }
