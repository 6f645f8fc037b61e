package nvctk

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseListCaptures(t *testing.T) {
	l, err := ParseList(fixture.Read(t, "cdi-list-4gpu-toolkit-1.14-fake-nvidia.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Found != 5 || len(l.Devices) != 5 || !l.Has(GPUKind, "all") {
		t.Errorf("list %+v", l)
	}
	if got := l.GPUIndexes(); !reflect.DeepEqual(got, []int{0, 1, 2, 3}) {
		t.Errorf("indexes %v", got)
	}
	if got := l.GPUUUIDs(); len(got) != 0 {
		t.Errorf("UUID names %v, want none", got)
	}
	empty, err := ParseList(fixture.Read(t, "cdi-list-empty.txt"))
	if err != nil || empty.Found != 0 || len(empty.Devices) != 0 || empty.Has(GPUKind, "all") {
		t.Errorf("empty list %+v, %v", empty, err)
	}
}

func TestParseListIndexAndUUIDNames(t *testing.T) {
	in := "INFO[0000] Found 4 CDI devices\nnvidia.com/gpu=0\nnvidia.com/gpu=GPU-cf22c558-a271-8c6a-eed9-067e58966643\nnvidia.com/gpu=0:1\nnvidia.com/gpu=all\n"
	l, err := ParseList(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l.GPUIndexes(), []int{0}) || !reflect.DeepEqual(l.GPUUUIDs(), []string{"GPU-cf22c558-a271-8c6a-eed9-067e58966643"}) {
		t.Errorf("indexes %v, UUIDs %v", l.GPUIndexes(), l.GPUUUIDs())
	}
}

func TestParseListRefuses(t *testing.T) {
	four := fixture.Read(t, "cdi-list-4gpu-toolkit-1.14-fake-nvidia.txt")
	tests := []struct{ name, in, mention string }{
		{"empty", "", "no \"Found N CDI devices\" line"},
		{"count disagrees", strings.Replace(four, "nvidia.com/gpu=3\n", "", 1), "announced 5 CDI devices, listed 4"},
		{"error line", "ERRO[0000] failed to create CDI cache: open /etc/cdi: permission denied\n", "failed to create CDI cache"},
		{"not a name", four + "garbage\n", "not a CDI device name"},
		{"twice", strings.Replace(four, "nvidia.com/gpu=3", "nvidia.com/gpu=2", 1), "listed twice"},
		{"shell", "sh: 1: nvidia-ctk: not found\n", "not a CDI device name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseList(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %v, want one mentioning %q", err, tt.mention)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	v, err := ParseVersion(fixture.Read(t, "version-1.13.1.txt"))
	if err != nil || v != "1.13.1" {
		t.Errorf("version %q, %v", v, err)
	}
	if v, err := ParseVersion(fixture.Read(t, "version-1.14.0-fake-nvidia.txt")); err == nil {
		t.Errorf("the runtime hook's version line was read as nvidia-ctk's: %q", v)
	}
	if _, err := ParseVersion(""); err == nil {
		t.Error("empty output read as a version")
	}
}

func FuzzParseList(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, in string) {
		l, err := ParseList(in)
		if err != nil {
			return
		}
		if l.Found != len(l.Devices) {
			t.Fatalf("accepted %d devices announced as %d: %q", len(l.Devices), l.Found, in)
		}
		for _, d := range l.Devices {
			if !strings.Contains(d, "/") || !strings.Contains(d, "=") {
				t.Fatalf("accepted device %q", d)
			}
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, in string) {
		v, err := ParseVersion(in)
		if err == nil && (v == "" || strings.ContainsAny(v, " \n")) {
			t.Fatalf("version %q from %q", v, in)
		}
	})
}
