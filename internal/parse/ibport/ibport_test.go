package ibport

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file  string
		ports int
		down  map[string]string // device -> "state / phys_state" of the ports not up
	}{
		{"derived-p5-32efa-healthy.txt", 32, nil},
		{"derived-p5-rdmap98s0-down.txt", 32, map[string]string{"rdmap98s0": "1: DOWN / 3: Disabled"}},
		{"derived-p5-rdmap131s0-init-polling.txt", 32, map[string]string{"rdmap131s0": "2: INIT / 2: Polling"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			ports, err := Parse(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(ports) != tt.ports {
				t.Fatalf("%d ports, want %d", len(ports), tt.ports)
			}
			if ports[0].Device != "rdmap79s0" || ports[31].Device != "rdmap201s0" {
				t.Errorf("order: first %s, last %s", ports[0].Device, ports[31].Device)
			}
			got := map[string]string{}
			for _, p := range ports {
				if p.Problem != "" {
					t.Errorf("%s: %s", p.Device, p.Problem)
				}
				if !p.Up() {
					got[p.Device] = p.State.String() + " / " + p.PhysState.String()
				}
			}
			if len(got) != len(tt.down) {
				t.Errorf("ports not up: %v, want %v", got, tt.down)
			}
			for d, want := range tt.down {
				if got[d] != want {
					t.Errorf("%s: %q, want %q", d, got[d], want)
				}
			}
		})
	}
}

func TestParseUnreadable(t *testing.T) {
	ports, err := Parse(fixture.Read(t, "derived-unreadable.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 || !ports[0].Up() {
		t.Fatalf("ports %+v", ports)
	}
	if ports[1].Up() || !strings.Contains(ports[1].Problem, "state unreadable: cat: rdmap80s0/ports/1/state: Input/output error") {
		t.Errorf("rdmap80s0: %+v", ports[1])
	}
	if ports[2].Up() || ports[2].Problem != "ports/1/phys_state not listed" {
		t.Errorf("rdmap81s0: %+v", ports[2])
	}
}

func TestParseAttr(t *testing.T) {
	tests := []struct {
		in   string
		want Attr
		ok   bool
	}{
		{"4: ACTIVE\n", Attr{4, "ACTIVE"}, true},
		{"5: LinkUp", Attr{5, "LinkUp"}, true},
		{"7: Phy Test", Attr{7, "Phy Test"}, true},
		{"5: ACTIVE_DEFER", Attr{5, "ACTIVE_DEFER"}, true},
		{"0: <unknown>", Attr{0, "<unknown>"}, true},
		{"ACTIVE", Attr{}, false},
		{"4:ACTIVE", Attr{}, false},
		{"", Attr{}, false},
		{"-1: DOWN", Attr{}, false},
	}
	for _, tt := range tests {
		got, err := ParseAttr(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseAttr(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for name, in := range map[string]string{
		"not a listing":     "ls: cannot access '/sys/class/infiniband': No such file or directory\n",
		"unknown attribute": "rdmap79s0 lid 0x0\n",
		"no value":          "rdmap79s0 state\n",
	} {
		if p, err := Parse(in); err == nil {
			t.Errorf("%s: Parse = %+v, want an error", name, p)
		}
	}
	if p, err := Parse(""); err != nil || len(p) != 0 {
		t.Errorf("empty: %+v, %v (no device, no port)", p, err)
	}
	twice := "rdmap79s0 state 4: ACTIVE\nrdmap79s0 state 1: DOWN\nrdmap79s0 phys_state 5: LinkUp\n"
	if p, err := Parse(twice); err != nil || p[0].Up() || !strings.Contains(p[0].Problem, "read twice") {
		t.Errorf("twice: %+v, %v", p, err)
	}
}

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		ports, err := Parse(s)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, p := range ports {
			if p.Device == "" || seen[p.Device] {
				t.Fatalf("device %q empty or twice", p.Device)
			}
			seen[p.Device] = true
			if p.Problem == "" && (p.State == nil || p.PhysState == nil) {
				t.Fatalf("%s: no problem but an attribute missing: %+v", p.Device, p)
			}
			if p.Up() && (p.State.Code != StateActive || p.PhysState.Code != PhysLinkUp) {
				t.Fatalf("%s up with %+v", p.Device, p)
			}
		}
	})
}
