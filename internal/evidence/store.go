package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Store keeps bundles in Dir: at most MaxBundles of them and MaxBytes in all (manifests
// included), the oldest removed first; the newest is never removed, whatever its size.
type Store struct {
	Dir        string
	MaxBundles int
	MaxBytes   int64
}

const (
	bundleSuffix   = ".tar.gz"
	manifestSuffix = "." + ManifestName
)

// Save writes the bundle into the store as FileName (through a temporary file renamed into
// place, so a reader never sees half a bundle) with its manifest beside it, then prunes the
// store. It returns the bundle's path and size and what was removed.
func (s Store) Save(b *Bundle) (path string, size int64, removed []string, err error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", 0, nil, fmt.Errorf("evidence: %w", err)
	}
	name := b.Manifest.FileName()
	path = filepath.Join(s.Dir, name)
	tmp, err := os.CreateTemp(s.Dir, ".writing-*")
	if err != nil {
		return "", 0, nil, fmt.Errorf("evidence: %w", err)
	}
	size, err = b.WriteTo(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", 0, nil, fmt.Errorf("evidence: writing %s: %w", path, err)
	}
	man, err := b.Manifest.ManifestJSON()
	if err == nil {
		err = os.WriteFile(strings.TrimSuffix(path, bundleSuffix)+manifestSuffix, man, 0o600)
	}
	if err != nil {
		// The bundle holds its manifest too: only finding it again for the next run is lost.
		return path, size, nil, fmt.Errorf("evidence: the manifest beside %s: %w", path, err)
	}
	removed, err = s.prune(name)
	return path, size, removed, err
}

// entry is one bundle of the store.
type entry struct {
	name string
	size int64 // the bundle and its manifest
}

// list returns the store's bundles, oldest first (file names start with their time). Files
// the store did not write are left alone and not counted.
func (s Store) list() ([]entry, error) {
	des, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	var names []string
	for _, de := range des {
		if de.Type().IsRegular() && strings.HasSuffix(de.Name(), bundleSuffix) && !strings.HasPrefix(de.Name(), ".") {
			names = append(names, de.Name())
		}
	}
	var out []entry
	for _, n := range sortedNames(names) {
		e := entry{name: n}
		if fi, err := os.Stat(filepath.Join(s.Dir, n)); err == nil {
			e.size = fi.Size()
		}
		if fi, err := os.Stat(filepath.Join(s.Dir, strings.TrimSuffix(n, bundleSuffix)+manifestSuffix)); err == nil {
			e.size += fi.Size()
		}
		out = append(out, e)
	}
	return out, nil
}

// prune removes the oldest bundles (and their manifests) until the store is within its
// bounds, never keep.
func (s Store) prune(keep string) ([]string, error) {
	es, err := s.list()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range es {
		total += e.size
	}
	var removed []string
	var errs []error
	count := len(es)
	for _, e := range es {
		if (s.MaxBundles <= 0 || count <= s.MaxBundles) && (s.MaxBytes <= 0 || total <= s.MaxBytes) {
			break
		}
		if e.name == keep {
			continue
		}
		p := filepath.Join(s.Dir, e.name)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		_ = os.Remove(strings.TrimSuffix(p, bundleSuffix) + manifestSuffix)
		removed = append(removed, p)
		count--
		total -= e.size
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("evidence: keeping the store within its bounds: %w", errors.Join(errs...))
	}
	return removed, nil
}

// Latest returns the newest bundle's path and manifest; ok is false when the store holds none
// whose manifest can be read.
func (s Store) Latest() (path string, m Manifest, ok bool) {
	es, err := s.list()
	if err != nil || len(es) == 0 {
		return "", Manifest{}, false
	}
	p := filepath.Join(s.Dir, es[len(es)-1].name)
	data, err := os.ReadFile(strings.TrimSuffix(p, bundleSuffix) + manifestSuffix)
	if err != nil || json.Unmarshal(data, &m) != nil {
		return "", Manifest{}, false
	}
	return p, m, true
}

// MarkUploaded records in the manifest kept beside the bundle at path that it was uploaded to
// object (s3://bucket/key): Latest returns it, and the next run of the same failure does not
// upload it again. The manifest is replaced atomically.
func (s Store) MarkUploaded(path, object string) error {
	mp := strings.TrimSuffix(path, bundleSuffix) + manifestSuffix
	data, err := os.ReadFile(mp)
	if err != nil {
		return fmt.Errorf("evidence: recording the upload: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("evidence: recording the upload: %s: %w", mp, err)
	}
	m.Uploaded = object
	out, err := m.ManifestJSON()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(mp), ".writing-*")
	if err != nil {
		return fmt.Errorf("evidence: recording the upload: %w", err)
	}
	_, err = tmp.Write(out)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), mp)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("evidence: recording the upload in %s: %w", mp, err)
	}
	return nil
}

// Object is the key a bundle is uploaded under: the prefix, the instance (or host), and the
// bundle's file name, e.g. "gpu-evidence/i-0abc/20261205T101500.000Z-i-0abc-xid.tar.gz".
func Object(prefix string, m Manifest) string {
	node := m.Identity.InstanceID
	if node == "" {
		node = nameUnsafe.ReplaceAllString(m.Host, "_")
	}
	key := node + "/" + m.FileName()
	if prefix != "" {
		key = prefix + "/" + key
	}
	return key
}
