package evidence

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
)

func logOf(lines ...string) facts.Fact[facts.KernelLog] {
	var l facts.KernelLog
	l.BootID = "b00t"
	for _, s := range lines {
		ll := facts.LogLine{Raw: s, Text: s}
		if strings.Contains(s, "Xid") {
			ll.Unreadable = true // a report, read or not: XidContext keys on Reports()
		}
		l.Lines = append(l.Lines, ll)
	}
	return facts.Read(l, "")
}

func TestXidContext(t *testing.T) {
	lines := []string{"a0", "a1", "a2", "NVRM: Xid 79", "b1", "b2", "b3", "b4", "b5", "NVRM: Xid 48", "c1"}
	for _, c := range []struct {
		name   string
		radius int
		want   string
	}{
		{"merged when they overlap", 3, "a0\na1\na2\nNVRM: Xid 79\nb1\nb2\nb3\nb4\nb5\nNVRM: Xid 48\nc1\n"},
		{"separated by -- otherwise", 1, "a2\nNVRM: Xid 79\nb1\n--\nb5\nNVRM: Xid 48\nc1\n"},
		{"the report alone", 0, "NVRM: Xid 79\n--\nNVRM: Xid 48\n"},
		{"a gap of one record", 2, "a1\na2\nNVRM: Xid 79\nb1\nb2\n--\nb4\nb5\nNVRM: Xid 48\nc1\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dm, _, n := XidContext(logOf(lines...), facts.Unread[facts.KernelJournal]("journalctl: not found", ""), c.radius)
			body := dm[strings.Index(dm, "\n")+1:]
			if body != c.want || n != 2 {
				t.Errorf("got %d reports:\n%s\nwant:\n%s", n, body, c.want)
			}
		})
	}
	dm, jr, n := XidContext(logOf("quiet", "boot"), facts.Unread[facts.KernelJournal]("journalctl: not found", ""), 10)
	if n != 0 || !strings.Contains(dm, "0 Xid/SXid record(s)") || !strings.Contains(jr, "could not be read: journalctl: not found") {
		t.Errorf("no Xid: %d\n%s\n%s", n, dm, jr)
	}
	// The journal kept a report dmesg lost (dmesg -c): it counts.
	var j facts.KernelJournal
	e := facts.JournalEntry{}
	e.Line, e.Unreadable = "[ 9.1] host kernel: NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.", true
	j.Entries = append(j.Entries, e)
	_, jr, n = XidContext(logOf("cleared"), facts.Read(j, ""), 10)
	if n != 1 || !strings.Contains(jr, "fallen off the bus") {
		t.Errorf("journal-only report: %d\n%s", n, jr)
	}
}

func bundle(t *testing.T, at time.Time, failed ...string) *Bundle {
	t.Helper()
	b := New(Manifest{CreatedAt: at, Host: "ip-10-1-42-17", BootID: "b00t", Mode: "boot", FailedChecks: failed,
		Identity: Identity{InstanceID: "i-0abc", Region: "us-west-2"}})
	b.Add(Part{Name: "dmesg-xid.txt", Source: "dmesg", Status: Collected}, []byte("NVRM: Xid 79\n"))
	b.Add(Part{Name: "nvidia-bug-report.log.gz", Source: "/usr/bin/nvidia-bug-report.sh", Status: Missing, Detail: "not installed"}, nil)
	return b
}

func TestBundleRoundTrip(t *testing.T) {
	b := bundle(t, time.Date(2026, 12, 5, 10, 15, 0, 0, time.UTC), "xid", "gpu")
	file := filepath.Join(t.TempDir(), "bug.gz")
	if err := os.WriteFile(file, []byte("gzipped report"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.AddFile(Part{Name: "nvidia-bug-report-2.log.gz", Source: "x"}, file); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := b.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo: %d %v (buffer %d)", n, err, buf.Len())
	}
	got := untar(t, buf.Bytes())
	if got[0].name != ManifestName || got[1].body != "NVRM: Xid 79\n" || got[2].body != "gzipped report" || len(got) != 3 {
		t.Fatalf("members: %+v", got)
	}
	var m Manifest
	if err := json.Unmarshal([]byte(got[0].body), &m); err != nil {
		t.Fatal(err)
	}
	if m.SchemaVersion != ManifestSchema || len(m.Parts) != 3 || m.Parts[1].Status != Missing || m.Parts[2].Bytes != 14 {
		t.Errorf("manifest: %+v", m)
	}
	if want := "20261205T101500.000Z-i-0abc-xid_gpu.tar.gz"; m.FileName() != want {
		t.Errorf("file name %q, want %q", m.FileName(), want)
	}
	m.Simulated = "gpu"
	if !strings.Contains(m.FileName(), "-simulated-") || Object("fleet", m) != "fleet/i-0abc/"+m.FileName() {
		t.Errorf("simulated name %q, object %q", m.FileName(), Object("fleet", m))
	}
	if got := m.Names(Missing); len(got) != 1 || got[0] != "nvidia-bug-report.log.gz (/usr/bin/nvidia-bug-report.sh): not installed" {
		t.Errorf("missing: %q", got)
	}
}

type tarMember struct{ name, body string }

func untar(t *testing.T, data []byte) []tarMember {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []tarMember
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, tarMember{h.Name, string(b)})
	}
}

func TestStoreBounds(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "operator-notes.txt")
	if err := os.WriteFile(other, []byte("not ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Store{Dir: dir, MaxBundles: 3}
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	var paths []string
	for i := range 5 {
		p, size, removed, err := s.Save(bundle(t, t0.Add(time.Duration(i)*time.Minute), "xid"))
		if err != nil || size == 0 {
			t.Fatalf("save %d: %v", i, err)
		}
		paths = append(paths, p)
		if i >= 3 && (len(removed) != 1 || removed[0] != paths[i-3]) {
			t.Errorf("save %d removed %q, want the oldest, %s", i, removed, paths[i-3])
		}
	}
	es, _ := s.list()
	if len(es) != 3 || es[0].name != filepath.Base(paths[2]) {
		t.Errorf("kept %+v", es)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file the store did not write was removed: %v", err)
	}
	if _, err := os.Stat(strings.TrimSuffix(paths[0], ".tar.gz") + "." + ManifestName); err == nil {
		t.Error("a removed bundle's manifest stayed")
	}
	p, m, ok := s.Latest()
	if !ok || p != paths[4] || !m.Same(bundle(t, time.Now(), "xid").Manifest) || m.Same(bundle(t, time.Now(), "gpu").Manifest) {
		t.Errorf("latest %s %+v %v", p, m, ok)
	}
	// A byte bound removes the oldest until the rest fit, never the newest.
	big := Store{Dir: dir, MaxBytes: 1}
	p, _, removed, err := big.Save(bundle(t, t0.Add(time.Hour), "xid"))
	if err != nil || len(removed) != 3 {
		t.Fatalf("byte bound: removed %q, %v", removed, err)
	}
	if es, _ := big.list(); len(es) != 1 || es[0].name != filepath.Base(p) {
		t.Errorf("after the byte bound: %+v", es)
	}
}

func TestStoreUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := (Store{Dir: filepath.Join(file, "evidence")}).Save(bundle(t, time.Now(), "xid")); err == nil {
		t.Error("a store under a file saved a bundle")
	}
}

// The upload is recorded in the manifest kept beside the bundle (Latest returns it), never in
// the bundle itself; a bundle without its manifest cannot be marked.
func TestStoreMarkUploaded(t *testing.T) {
	s := Store{Dir: t.TempDir(), MaxBundles: 3}
	p, _, _, err := s.Save(bundle(t, time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC), "xid"))
	if err != nil {
		t.Fatal(err)
	}
	if _, m, ok := s.Latest(); !ok || m.Uploaded != "" {
		t.Fatalf("before: %+v %v", m, ok)
	}
	const obj = "s3://gpu-evidence/i-0abc/x.tar.gz"
	if err := s.MarkUploaded(p, obj); err != nil {
		t.Fatal(err)
	}
	if _, m, ok := s.Latest(); !ok || m.Uploaded != obj || m.FailedChecks[0] != "xid" {
		t.Errorf("after: %+v %v", m, ok)
	}
	data, _ := os.ReadFile(p)
	if inside := untar(t, data); inside[0].name != ManifestName || strings.Contains(inside[0].body, obj) {
		t.Errorf("the bundle's own manifest was changed: %s", inside[0].body)
	}
	if err := s.MarkUploaded(filepath.Join(s.Dir, "missing.tar.gz"), obj); err == nil {
		t.Error("marked a bundle without a manifest")
	}
	if ds, _ := os.ReadDir(s.Dir); len(ds) != 2 {
		t.Errorf("files left: %d", len(ds))
	}
}
