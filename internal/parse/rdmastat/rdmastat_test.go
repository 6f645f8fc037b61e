package rdmastat

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseTestdata(t *testing.T) {
	for _, tt := range []struct {
		file     string
		links    []string
		counters int
		check    map[string]uint64 // counters of the first link
	}{
		{"show-4xmlx5-connectx4lx-ofed-nonzero.txt", []string{"mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"}, 29,
			map[string]uint64{"out_of_buffer": 135, "resp_cqe_error": 1009, "req_cqe_error": 22, "resp_cqe_flush_error": 998, "req_cqe_flush_error": 11, "rx_icrc_encapsulated": 0}},
		{"show-mlx5-iproute2-patch-cover-letter-mail-wrapped.txt", []string{"mlx5_0/1"}, 21, map[string]uint64{"rx_atomic_requests": 0, "np_cnp_sent": 0}},
		{"show-p-mlx5-iproute2-patch-cover-letter.txt", []string{"mlx5_0/1"}, 21, map[string]uint64{"rx_write_requests": 0, "np_cnp_sent": 0}},
		{"derived-show-4xefa-p5-before.txt", []string{"rdmap79s0/1", "rdmap80s0/1", "rdmap81s0/1", "rdmap82s0/1"}, 22, map[string]uint64{"rx_drops": 0, "retrans_timeout_events": 0}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			links, err := Parse(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, l := range links {
				names = append(names, l.Name())
				if len(l.Counters) != tt.counters || len(l.Order) != tt.counters || l.Port != 1 {
					t.Errorf("%s: %d counters, port %d", l.Name(), len(l.Counters), l.Port)
				}
			}
			if !reflect.DeepEqual(names, tt.links) {
				t.Errorf("links %v", names)
			}
			for k, v := range tt.check {
				if got, ok := links[0].Counters[k]; !ok || got != v {
					t.Errorf("%s = %d (%v), want %d", k, got, ok, v)
				}
			}
		})
	}
	// The wrapped and the pretty print of the same counters read the same.
	w, _ := Parse(fixture.Read(t, "show-mlx5-iproute2-patch-cover-letter-mail-wrapped.txt"))
	p, _ := Parse(fixture.Read(t, "show-p-mlx5-iproute2-patch-cover-letter.txt"))
	if !reflect.DeepEqual(w, p) {
		t.Errorf("wrapped %v != pretty %v", w, p)
	}
}

func TestDelta(t *testing.T) {
	before, err := Parse(fixture.Read(t, "derived-show-4xefa-p5-before.txt"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := Parse(fixture.Read(t, "derived-show-4xefa-p5-after-drops-retrans.txt"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Delta(before, after)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, c := range d {
		if strings.HasPrefix(c.Counter, "rx_drops") || strings.HasPrefix(c.Counter, "retrans") {
			bad = append(bad, c.String())
		}
	}
	want := []string{"rdmap81s0/1 retrans_pkts +240 (0 -> 240)", "rdmap81s0/1 retrans_timeout_events +3 (0 -> 3)", "rdmap81s0/1 rx_drops +17 (0 -> 17)"}
	if !reflect.DeepEqual(bad, want) || len(d) != 4*6+3 {
		t.Errorf("delta (%d changes) errors %q", len(d), bad)
	}
	if d, err := Delta(after, after); err != nil || len(d) != 0 {
		t.Errorf("Delta(x, x) = %v, %v", d, err)
	}
	if _, err := Delta(after, before); err == nil || !strings.Contains(err.Error(), "reloaded") {
		t.Errorf("backwards: %v", err)
	}
	if _, err := Delta(before, after[:3]); err == nil {
		t.Error("fewer links accepted")
	}
	renamed, _ := Parse(strings.Replace(fixture.Read(t, "derived-show-4xefa-p5-before.txt"), "rdmap82s0", "rdmap83s0", 1))
	if _, err := Delta(before, renamed); err == nil || !strings.Contains(err.Error(), "rdmap83s0/1") {
		t.Errorf("other link: %v", err)
	}
	fewer, _ := Parse("link rdmap79s0/1 tx_bytes 0\nlink rdmap80s0/1 tx_bytes 0\nlink rdmap81s0/1 tx_bytes 0\nlink rdmap82s0/1 tx_bytes 0\n")
	if _, err := Delta(before, fewer); err == nil || !strings.Contains(err.Error(), "counters") {
		t.Errorf("fewer counters: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"not found", "bash: rdma: command not found\n", "does not start"},
		{"netlink error", "error: Operation not supported\n", "does not start"},
		{"no dev", "link\n", "without a device"},
		{"no port", "link rdmap79s0 tx_bytes 0\n", "DEV/PORT"},
		{"bad port", "link rdmap79s0/x tx_bytes 0\n", "DEV/PORT"},
		{"no counters", "link rdmap79s0/1\n", "no counter"},
		{"no value", "link rdmap79s0/1 tx_bytes\n", "no value"},
		{"no value before link", "link rdmap79s0/1 tx_bytes link rdmap80s0/1 tx_bytes 0\n", "no value"},
		{"bad value", "link rdmap79s0/1 tx_bytes -1\n", "not a count"},
		{"dup counter", "link rdmap79s0/1 tx_bytes 1 tx_bytes 2\n", "twice"},
		{"dup link", "link rdmap79s0/1 tx_bytes 1\nlink rdmap79s0/1 tx_bytes 2\n", "twice"},
	} {
		_, err := Parse(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		links, err := Parse(s)
		if err != nil {
			return
		}
		if len(links) == 0 {
			t.Fatal("no error, no link")
		}
		for _, l := range links {
			if len(l.Counters) == 0 || len(l.Order) != len(l.Counters) {
				t.Fatalf("link %+v", l)
			}
		}
		if d, err := Delta(links, links); err != nil || len(d) != 0 {
			t.Fatalf("Delta(x, x) = %v, %v", d, err)
		}
	})
}
