// Package rdmastat parses `rdma statistic show` (iproute2): for each RDMA link (device and
// port), the hardware counters the driver exports, e.g. EFA's tx_bytes, rx_drops, retrans_pkts,
// retrans_timeout_events, impaired_remote_conn_events; and Delta between two snapshots.
//
// It reads the default form ("link rdmap79s0/1 tx_bytes 0 tx_pkts 0 ..." on one line), the
// pretty form of -p (one "name value" per indented line) and wrapped copies of either, as one
// stream of words. Output that names no link, or anything that is not "link DEV/PORT" followed
// by name/value pairs, is an error.
package rdmastat

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Link is one RDMA port's counters.
type Link struct {
	Device string
	Port   int
	// Counters by the driver's names.
	Counters map[string]uint64
	// Order is the counters' names in the order printed.
	Order []string
}

// Name is "DEV/PORT".
func (l Link) Name() string { return l.Device + "/" + strconv.Itoa(l.Port) }

// Parse reads `rdma statistic show` (with or without -p).
func Parse(text string) ([]Link, error) {
	words := strings.Fields(text)
	if len(words) == 0 {
		return nil, errors.New("rdma statistic: empty output (no RDMA device?)")
	}
	var links []Link
	seen := map[string]bool{}
	for i := 0; i < len(words); {
		if words[i] != "link" {
			if len(links) == 0 {
				return nil, fmt.Errorf("rdma statistic: output does not start with \"link\": %q", textcut.Head(strings.TrimSpace(text), 160))
			}
			return nil, fmt.Errorf("rdma statistic: link %s: unexpected %q", links[len(links)-1].Name(), textcut.Head(words[i], 60))
		}
		if i+1 >= len(words) {
			return nil, errors.New("rdma statistic: \"link\" without a device")
		}
		dev, port, ok := strings.Cut(words[i+1], "/")
		p, err := strconv.Atoi(port)
		if !ok || dev == "" || err != nil || p < 0 || p > 1<<16 {
			return nil, fmt.Errorf("rdma statistic: %q is not DEV/PORT", textcut.Head(words[i+1], 60))
		}
		l := Link{Device: dev, Port: p, Counters: map[string]uint64{}}
		if seen[l.Name()] {
			return nil, fmt.Errorf("rdma statistic: link %s listed twice", textcut.Head(l.Name(), 60))
		}
		seen[l.Name()] = true
		i += 2
		for i < len(words) && words[i] != "link" {
			if i+1 >= len(words) || words[i+1] == "link" {
				return nil, fmt.Errorf("rdma statistic: link %s: counter %q has no value", l.Name(), textcut.Head(words[i], 60))
			}
			name, val := words[i], words[i+1]
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("rdma statistic: link %s: %s = %q is not a count", l.Name(), textcut.Head(name, 60), textcut.Head(val, 30))
			}
			if _, dup := l.Counters[name]; dup {
				return nil, fmt.Errorf("rdma statistic: link %s: %q listed twice", l.Name(), textcut.Head(name, 60))
			}
			l.Counters[name] = n
			l.Order = append(l.Order, name)
			i += 2
		}
		if len(l.Counters) == 0 {
			return nil, fmt.Errorf("rdma statistic: link %s has no counter", l.Name())
		}
		links = append(links, l)
	}
	return links, nil
}

// Change is a counter that grew between two snapshots.
type Change struct {
	Link          string // "DEV/PORT"
	Counter       string
	Before, After uint64
}

// Increase is After - Before.
func (c Change) Increase() uint64 { return c.After - c.Before }

func (c Change) String() string {
	return fmt.Sprintf("%s %s +%d (%d -> %d)", c.Link, c.Counter, c.Increase(), c.Before, c.After)
}

// Delta returns the counters that grew from before to after, in after's link order and by
// counter name. It fails when the snapshots do not hold the same links and counters or a
// counter went down (a driver reload between them): a difference it cannot compute is never
// reported as no change.
func Delta(before, after []Link) ([]Change, error) {
	if len(before) != len(after) {
		return nil, fmt.Errorf("rdma statistic delta: %d links before, %d after", len(before), len(after))
	}
	prev := map[string]Link{}
	for _, l := range before {
		prev[l.Name()] = l
	}
	var out []Change
	for _, a := range after {
		b, ok := prev[a.Name()]
		if !ok {
			return nil, fmt.Errorf("rdma statistic delta: link %s was not in the first snapshot", textcut.Head(a.Name(), 60))
		}
		if len(b.Counters) != len(a.Counters) {
			return nil, fmt.Errorf("rdma statistic delta: link %s had %d counters, has %d", a.Name(), len(b.Counters), len(a.Counters))
		}
		for _, name := range slices.Sorted(maps.Keys(a.Counters)) {
			bv, ok := b.Counters[name]
			av := a.Counters[name]
			switch {
			case !ok:
				return nil, fmt.Errorf("rdma statistic delta: link %s: %q was not in the first snapshot", a.Name(), textcut.Head(name, 60))
			case av < bv:
				return nil, fmt.Errorf("rdma statistic delta: link %s: %q went from %d to %d (driver reloaded?)", a.Name(), textcut.Head(name, 60), bv, av)
			case av > bv:
				out = append(out, Change{Link: a.Name(), Counter: name, Before: bv, After: av})
			}
		}
	}
	return out, nil
}
