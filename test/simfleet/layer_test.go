package simfleet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// writeTree creates files (content) and directories (trailing slash) under root.
func writeTree(t *testing.T, root string, entries map[string]string) {
	t.Helper()
	for name, content := range entries {
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVerifyLayerCopyFindsDifferences(t *testing.T) {
	base := map[string]string{"etc/golden": "v1\n", "usr/share/doc/x/": "", "var/lib/dpkg/status": "Package: slurmd\n"}
	tests := []struct {
		name   string
		mutate func(t *testing.T, dst string)
		want   string // "" = faithful
	}{
		{name: "faithful", mutate: func(*testing.T, string) {}},
		{name: "missing file", mutate: func(t *testing.T, dst string) {
			if err := os.Remove(filepath.Join(dst, "etc/golden")); err != nil {
				t.Fatal(err)
			}
		}, want: "etc/golden: missing"},
		{name: "size", mutate: func(t *testing.T, dst string) {
			if err := os.WriteFile(filepath.Join(dst, "var/lib/dpkg/status"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "var/lib/dpkg/status: 16 bytes, copy 1"},
		{name: "mode", mutate: func(t *testing.T, dst string) {
			if err := os.Chmod(filepath.Join(dst, "etc/golden"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, want: "etc/golden: mode"},
		{name: "type", mutate: func(t *testing.T, dst string) {
			p := filepath.Join(dst, "usr/share/doc/x")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}, want: "usr/share/doc/x: mode"},
		{name: "symlink target", mutate: func(t *testing.T, dst string) {
			p := filepath.Join(dst, "etc/link")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("elsewhere", p); err != nil {
				t.Fatal(err)
			}
		}, want: `etc/link: symlink "golden", copy "elsewhere"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			writeTree(t, src, base)
			if err := os.Symlink("golden", filepath.Join(src, "etc/link")); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "layer")
			if err := copyLayer(context.Background(), src, dst); err != nil {
				t.Fatalf("copyLayer: %v", err)
			}
			tt.mutate(t, dst)
			err := verifyLayerCopy(src, dst)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("faithful copy reported: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestCopyLayerRefusesExistingLayer(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	if err := copyLayer(context.Background(), src, dst); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("err = %v: a layer must never be overwritten", err)
	}
}

// TestCopyLayerKeepsOverlayMetadata proves that `cp -a` keeps what makes an overlay upper
// directory a layer: whiteouts (0/0 character devices, hard-linked as overlayfs shares them)
// and trusted.overlay.* attributes (opaque directories), and that the check notices when an
// attribute is lost. Root only: mknod and trusted.* need CAP_MKNOD and CAP_SYS_ADMIN.
func TestCopyLayerKeepsOverlayMetadata(t *testing.T) {
	if os.Getuid() != 0 {
		needRoot(t, "whiteouts (mknod) and trusted.overlay.* attributes")
	}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"usr/share/doc/gpg/NEW": "new\n", "etc/": ""})
	whiteout := filepath.Join(src, "etc/issue.net")
	if err := unix.Mknod(whiteout, syscall.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(whiteout, filepath.Join(src, "etc/motd")); err != nil {
		t.Fatal(err)
	}
	opaque := filepath.Join(src, "usr/share/doc/gpg")
	if err := unix.Lsetxattr(opaque, "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "layer")
	if err := copyLayer(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	st, err := lstat(filepath.Join(dst, "etc/issue.net"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != 0 {
		t.Errorf("whiteout copied as mode %o rdev %d, want a 0/0 character device", st.Mode, st.Rdev)
	}
	x, err := overlayXattrs(filepath.Join(dst, "usr/share/doc/gpg"))
	if err != nil {
		t.Fatal(err)
	}
	if x["trusted.overlay.opaque"] != "y" {
		t.Errorf("opaque directory copied with overlay attributes %q, want trusted.overlay.opaque=y", x)
	}
	if err := unix.Lremovexattr(filepath.Join(dst, "usr/share/doc/gpg"), "trusted.overlay.opaque"); err != nil {
		t.Fatal(err)
	}
	if err := verifyLayerCopy(src, dst); err == nil || !strings.Contains(err.Error(), "trusted.overlay.opaque") {
		t.Errorf("err = %v: a lost opaque attribute must be reported", err)
	}
}
