// Package evidence is what dlami-node-check keeps of a failing node before it isolates it:
// "when an instance goes away without a hardware replacement, the evidence goes with it". A
// Bundle gathers the parts (the report, the kernel log around each Xid, nvidia-smi -q,
// NVIDIA's bug report, DCGM's diagnostics, the instance's identity) and a manifest of what was
// collected, what was missing and why; a Store keeps bundles as .tar.gz files in a directory
// within a count and a size bound, the oldest removed first. Nothing here runs a command or
// reaches AWS: the node check collects, this package packs and keeps.
package evidence

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// ManifestSchema is the version of MANIFEST.json; bump it on an incompatible change.
const ManifestSchema = 1

// ManifestName is the manifest's name inside a bundle (its first member) and the suffix of
// the copy kept beside it in the store.
const ManifestName = "MANIFEST.json"

// Identity is the instance as IMDSv2's identity document describes it, and the image's build
// as its bill of materials does.
type Identity struct {
	InstanceID       string `json:"instance_id,omitempty"`
	InstanceType     string `json:"instance_type,omitempty"`
	AvailabilityZone string `json:"availability_zone,omitempty"`
	Region           string `json:"region,omitempty"`
	ImageID          string `json:"image_id,omitempty"`
	AccountID        string `json:"account_id,omitempty"`
	// Problem says why IMDSv2 could not be read ("" when it was).
	Problem string `json:"problem,omitempty"`
	// Build are the image's dlami:* build facts from its bill of materials (dlami:build_name,
	// dlami:plugin_version, ...).
	Build map[string]string `json:"build,omitempty"`
}

// Part statuses.
const (
	Collected = "collected"
	Missing   = "missing"
	Skipped   = "skipped"
	Failed    = "failed"
)

// Part is one thing a bundle holds or meant to hold.
type Part struct {
	// Name is the member's file name in the bundle ("nvidia-smi-q.txt"); for a part that was
	// not collected, the name it would have had.
	Name string `json:"name"`
	// Source is where it came from: the command by absolute path with its arguments, or the
	// reading it was taken from.
	Source string `json:"source"`
	Status string `json:"status"`
	// Detail says why a part is missing, skipped or failed, or how a command ended.
	Detail string `json:"detail,omitempty"`
	Bytes  int64  `json:"bytes"`
	// TookMS is how long its command ran.
	TookMS int64 `json:"took_ms,omitempty"`
}

// Manifest describes a bundle; it is the bundle's first member and is kept beside it.
type Manifest struct {
	SchemaVersion int       `json:"schema_version"`
	CreatedAt     time.Time `json:"created_at"`
	// Host is the node's host name, BootID the kernel's boot id (from the kernel log reading).
	Host   string `json:"host"`
	BootID string `json:"boot_id"`
	// Mode is the node check's mode (boot, slurm, npd, report).
	Mode string `json:"mode"`
	// Simulated is the check id of a --simulate-failure run ("" for a real failure).
	Simulated    string   `json:"simulated,omitempty"`
	FailedChecks []string `json:"failed_checks"`
	Identity     Identity `json:"identity"`
	// XidLines counts the kernel log records that report an Xid or SXid.
	XidLines int    `json:"xid_lines"`
	Parts    []Part `json:"parts"`
	// Uploaded is the object the bundle was uploaded to (s3://bucket/key), recorded in the
	// copy kept beside the bundle once the upload succeeded (Store.MarkUploaded), so that a
	// later run that keeps the same failure does not upload it again; "" inside the bundle.
	Uploaded string `json:"uploaded,omitempty"`
}

// Same reports whether m is evidence of the same failure as o: the same boot, the same failed
// checks, both real or the same simulation.
func (m Manifest) Same(o Manifest) bool {
	return m.BootID != "" && m.BootID == o.BootID && m.Simulated == o.Simulated &&
		strings.Join(m.FailedChecks, ",") == strings.Join(o.FailedChecks, ",")
}

// member is one file of a bundle: its bytes, or a file on disk streamed in.
type member struct {
	name string
	data []byte
	path string
}

// Bundle is a bundle being gathered.
type Bundle struct {
	Manifest Manifest
	members  []member
}

// New starts a bundle.
func New(m Manifest) *Bundle {
	m.SchemaVersion = ManifestSchema
	return &Bundle{Manifest: m}
}

// Add records a part; data, when the part was collected, is its content.
func (b *Bundle) Add(p Part, data []byte) {
	if p.Status == Collected {
		p.Bytes = int64(len(data))
		b.members = append(b.members, member{name: p.Name, data: data})
	}
	b.Manifest.Parts = append(b.Manifest.Parts, p)
}

// AddFile records a collected part whose content is the file at path (a bug report): it is
// streamed into the bundle when it is written, and must stay until then.
func (b *Bundle) AddFile(p Part, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	p.Status, p.Bytes = Collected, fi.Size()
	b.members = append(b.members, member{name: p.Name, path: path})
	b.Manifest.Parts = append(b.Manifest.Parts, p)
	return nil
}

// Names returns the parts with the given status, in order, "name (source): detail".
func (m Manifest) Names(status string) []string {
	out := []string{}
	for _, p := range m.Parts {
		if p.Status != status {
			continue
		}
		s := p.Name
		if status != Collected {
			s += " (" + p.Source + ")"
			if p.Detail != "" {
				s += ": " + p.Detail
			}
		}
		out = append(out, s)
	}
	return out
}

// ManifestJSON is the manifest as written.
func (m Manifest) ManifestJSON() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("evidence: encoding the manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// WriteTo writes the bundle as a gzipped tar: MANIFEST.json first, then the parts in the order
// they were added, each a regular file of mode 0600 stamped with the bundle's time.
func (b *Bundle) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	gz := gzip.NewWriter(cw)
	tw := tar.NewWriter(gz)
	man, err := b.Manifest.ManifestJSON()
	if err != nil {
		return cw.n, err
	}
	add := func(name string, size int64, r io.Reader) error {
		h := &tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: b.Manifest.CreatedAt, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.CopyN(tw, r, size); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if err := add(ManifestName, int64(len(man)), strings.NewReader(string(man))); err != nil {
		return cw.n, fmt.Errorf("evidence: %w", err)
	}
	for _, m := range b.members {
		if m.path == "" {
			if err := add(m.name, int64(len(m.data)), strings.NewReader(string(m.data))); err != nil {
				return cw.n, fmt.Errorf("evidence: %w", err)
			}
			continue
		}
		if err := addFile(add, m); err != nil {
			return cw.n, fmt.Errorf("evidence: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return cw.n, fmt.Errorf("evidence: %w", err)
	}
	if err := gz.Close(); err != nil {
		return cw.n, fmt.Errorf("evidence: %w", err)
	}
	return cw.n, nil
}

func addFile(add func(string, int64, io.Reader) error, m member) error {
	f, err := os.Open(m.path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return add(m.name, fi.Size(), f)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// nameUnsafe are the characters a bundle's file name never holds (check ids and instance ids
// hold none of them; a host name might).
var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// FileName is the bundle's file name: when it was made (UTC, sortable), the node (instance id,
// else host name), "simulated" for a drill, and the failed checks, e.g.
// "20261205T101500.000Z-i-0abc-xid.tar.gz". Sorting the names sorts the bundles by age.
func (m Manifest) FileName() string {
	node := m.Identity.InstanceID
	if node == "" {
		node = m.Host
	}
	parts := []string{m.CreatedAt.UTC().Format("20060102T150405.000Z"), nameUnsafe.ReplaceAllString(node, "_")}
	if m.Simulated != "" {
		parts = append(parts, "simulated")
	}
	ids := nameUnsafe.ReplaceAllString(strings.Join(m.FailedChecks, "_"), "_")
	if len(ids) > 80 {
		ids = ids[:80]
	}
	if ids != "" {
		parts = append(parts, ids)
	}
	return strings.Join(parts, "-") + ".tar.gz"
}

// sortedNames sorts bundle file names oldest first.
func sortedNames(names []string) []string {
	sort.Strings(names)
	return names
}
