package simfleet

import (
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseMountinfoBootedHost(t *testing.T) {
	mounts, err := ParseMountinfo(fixture.Read(t, "booted-host.mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 28 {
		t.Errorf("got %d mounts, want 28", len(mounts))
	}
	var overlay *Mount
	for i := range mounts {
		if mounts[i].FSType == "overlay" {
			overlay = &mounts[i]
		}
	}
	if overlay == nil {
		t.Fatal("no overlay mount parsed")
	}
	want := Mount{
		ID: 44, ParentID: 27, Root: "/", MountPoint: "/tmp/fleet-t1/merged", FSType: "overlay", Source: "overlay",
		SuperOptions: "rw,lowerdir=/var/cache/dlami-simhost/rootfs-5308f0556b51de8c,upperdir=/tmp/fleet-t1/upper,workdir=/tmp/fleet-t1/work,uuid=on",
	}
	if *overlay != want {
		t.Errorf("overlay = %+v\nwant      %+v", *overlay, want)
	}
	under := MountsUnder(mounts, "/tmp/fleet-t1")
	wantUnder := []string{
		"/tmp/fleet-t1/merged/proc/sys/kernel/random/boot_id",
		"/tmp/fleet-t1/merged/opt/dlami/nvme",
		"/tmp/fleet-t1/merged/dev/pts",
		"/tmp/fleet-t1/merged/dev/shm",
		"/tmp/fleet-t1/merged/proc",
		"/tmp/fleet-t1/merged/dev",
		"/tmp/fleet-t1/merged/sys",
		"/tmp/fleet-t1/merged/run",
		"/tmp/fleet-t1/merged",
	}
	if !slices.Equal(under, wantUnder) {
		t.Errorf("MountsUnder = %q\nwant          %q", under, wantUnder)
	}
	if got := MountsUnder(mounts, "/tmp/fleet-t"); len(got) != 0 {
		t.Errorf("MountsUnder(/tmp/fleet-t) = %q: a sibling with a common prefix is not below it", got)
	}
}

func TestParseMountinfoLines(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    Mount
		wantErr string
	}{
		{
			name: "optional fields and escaped space",
			line: `36 35 98:0 /mnt1 /mnt/my\040disk rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue`,
			want: Mount{ID: 36, ParentID: 35, Root: "/mnt1", MountPoint: "/mnt/my disk", FSType: "ext3", Source: "/dev/root", SuperOptions: "rw,errors=continue"},
		},
		{
			name: "escaped backslash and tab",
			line: `40 1 0:5 / /a\134b\011c rw - tmpfs none rw`,
			want: Mount{ID: 40, ParentID: 1, Root: "/", MountPoint: "/a\\b\tc", FSType: "tmpfs", Source: "none", SuperOptions: "rw"},
		},
		{
			name: "no super options",
			line: `41 1 0:5 / /x rw - tmpfs none`,
			want: Mount{ID: 41, ParentID: 1, Root: "/", MountPoint: "/x", FSType: "tmpfs", Source: "none"},
		},
		{name: "no separator", line: `41 1 0:5 / /x rw tmpfs none rw`, wantErr: `"-" separator`},
		{name: "separator too early", line: `41 1 0:5 / - /x rw tmpfs`, wantErr: `"-" separator`},
		{name: "nothing after separator", line: `41 1 0:5 / /x rw -`, wantErr: `"-" separator`},
		{name: "mount ID", line: `x 1 0:5 / /x rw - tmpfs none rw`, wantErr: "mount ID"},
		{name: "parent ID", line: `4 y 0:5 / /x rw - tmpfs none rw`, wantErr: "parent ID"},
		{name: "relative mount point", line: `4 1 0:5 / x rw - tmpfs none rw`, wantErr: "not absolute"},
		{name: "truncated escape", line: `4 1 0:5 / /x\04 rw - tmpfs none rw`, wantErr: "truncated escape"},
		{name: "bad escape", line: `4 1 0:5 / /x\09z rw - tmpfs none rw`, wantErr: "bad escape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMountinfo(tt.line + "\n")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), "line 1") {
					t.Errorf("err = %v: should name the line", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestMountsUnder(t *testing.T) {
	mounts := []Mount{{MountPoint: "/s/i-1/merged"}, {MountPoint: "/s/i-1/merged/run"}, {MountPoint: "/s/i-10/merged"}, {MountPoint: "/s/i-1"}}
	tests := []struct {
		dir  string
		want []string
	}{
		{"/s/i-1", []string{"/s/i-1/merged/run", "/s/i-1/merged", "/s/i-1"}},
		{"/s/i-1/", []string{"/s/i-1/merged/run", "/s/i-1/merged", "/s/i-1"}},
		{"/s/i-10", []string{"/s/i-10/merged"}},
		{"/s/i-2", nil},
	}
	for _, tt := range tests {
		if got := MountsUnder(mounts, tt.dir); !slices.Equal(got, tt.want) {
			t.Errorf("MountsUnder(%q) = %q, want %q", tt.dir, got, tt.want)
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	fixture.SeedFuzz(f, ".mountinfo")
	f.Add(`36 35 98:0 /mnt1 /mnt/my\040disk rw,noatime master:1 - ext3 /dev/root rw`)
	f.Add(`1 1 0:0 / /\ rw - x y`)
	f.Fuzz(func(t *testing.T, text string) {
		mounts, err := ParseMountinfo(text)
		if err != nil {
			return
		}
		for _, m := range mounts {
			if !strings.HasPrefix(m.MountPoint, "/") {
				t.Fatalf("accepted a relative mount point %q", m.MountPoint)
			}
			if m.FSType == "" || m.Source == "" {
				t.Fatalf("accepted a mount without type: %+v", m)
			}
		}
	})
}
