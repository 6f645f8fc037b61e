package simfleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// overlayXattrPrefix marks the extended attributes overlayfs keeps in an upper directory:
// trusted.overlay.opaque on a directory that hides everything below it, origin, impure…
// A layer that lost them would resurrect deleted directories once stacked.
const overlayXattrPrefix = "trusted.overlay."

// copyLayer copies an overlay upper directory to dst (which must not exist) with `cp -a`, then
// proves the copy kept what overlayfs needs: whiteouts (0/0 character devices), the
// trusted.overlay.* attributes, owners, modes and sizes. cp -a silently drops attributes the
// destination cannot store, so the check is what makes the copy trustworthy.
func copyLayer(ctx context.Context, src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("layer %s already exists", dst)
	}
	tmp := dst + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("clearing %s: %w", tmp, err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", src+"/.", tmp+"/")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("cp -a %s %s: %w: %s", src, tmp, err, strings.TrimSpace(stderr.String()))
	}
	if err := verifyLayerCopy(src, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("copy of %s is not faithful (is %s on a filesystem without trusted.* xattrs or device nodes?): %w", src, filepath.Dir(dst), err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("publishing layer %s: %w", dst, err)
	}
	return nil
}

// verifyLayerCopy compares every entry of src with its copy in dst: type, permission bits,
// owner, size of regular files, device numbers (whiteouts), symlink targets and the
// trusted.overlay.* attributes. It names up to five differences.
func verifyLayerCopy(src, dst string) error {
	var diffs []string
	add := func(format string, args ...any) error {
		diffs = append(diffs, fmt.Sprintf(format, args...))
		if len(diffs) >= 5 {
			return errTooManyDiffs
		}
		return nil
	}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		other := filepath.Join(dst, rel)
		a, err := lstat(path)
		if err != nil {
			return err
		}
		b, err := lstat(other)
		if err != nil {
			return add("%s: missing in the copy (%v)", rel, err)
		}
		if a.Mode&syscall.S_IFMT != b.Mode&syscall.S_IFMT || a.Mode&0o7777 != b.Mode&0o7777 {
			if err := add("%s: mode %o, copy %o", rel, a.Mode, b.Mode); err != nil {
				return err
			}
		}
		if a.Uid != b.Uid || a.Gid != b.Gid {
			if err := add("%s: owner %d:%d, copy %d:%d", rel, a.Uid, a.Gid, b.Uid, b.Gid); err != nil {
				return err
			}
		}
		switch a.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			if a.Size != b.Size {
				if err := add("%s: %d bytes, copy %d", rel, a.Size, b.Size); err != nil {
					return err
				}
			}
		case syscall.S_IFCHR, syscall.S_IFBLK:
			if a.Rdev != b.Rdev {
				if err := add("%s: device %d, copy %d", rel, a.Rdev, b.Rdev); err != nil {
					return err
				}
			}
		case syscall.S_IFLNK:
			ta, errA := os.Readlink(path)
			tb, errB := os.Readlink(other)
			if errA != nil || errB != nil || ta != tb {
				if err := add("%s: symlink %q, copy %q", rel, ta, tb); err != nil {
					return err
				}
			}
		}
		xa, err := overlayXattrs(path)
		if err != nil {
			return err
		}
		xb, err := overlayXattrs(other)
		if err != nil {
			return err
		}
		for k, v := range xa {
			if w, ok := xb[k]; !ok || w != v {
				if err := add("%s: xattr %s=%q, copy %q", rel, k, v, w); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errTooManyDiffs) {
		return fmt.Errorf("comparing %s with %s: %w", src, dst, err)
	}
	if len(diffs) > 0 {
		return errors.New(strings.Join(diffs, "; "))
	}
	return nil
}

var errTooManyDiffs = errors.New("too many differences")

func lstat(path string) (*syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return nil, fmt.Errorf("lstat %s: %w", path, err)
	}
	return &st, nil
}

// overlayXattrs returns the trusted.overlay.* attributes of path (not following symlinks).
func overlayXattrs(path string) (map[string]string, error) {
	names, err := listXattrs(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, name := range names {
		if !strings.HasPrefix(name, overlayXattrPrefix) {
			continue
		}
		v, err := getXattr(path, name)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

func listXattrs(path string) ([]string, error) {
	size, err := unix.Llistxattr(path, nil)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing xattrs of %s: %w", path, err)
	}
	if size == 0 {
		return nil, nil
	}
	buf := make([]byte, size)
	n, err := unix.Llistxattr(path, buf)
	if err != nil {
		return nil, fmt.Errorf("listing xattrs of %s: %w", path, err)
	}
	var names []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name != "" {
			names = append(names, name)
		}
	}
	return names, nil
}

func getXattr(path, name string) (string, error) {
	size, err := unix.Lgetxattr(path, name, nil)
	if err != nil {
		return "", fmt.Errorf("reading xattr %s of %s: %w", name, path, err)
	}
	buf := make([]byte, size)
	n, err := unix.Lgetxattr(path, name, buf)
	if err != nil {
		return "", fmt.Errorf("reading xattr %s of %s: %w", name, path, err)
	}
	return string(buf[:n]), nil
}
