// Package ibport parses the port state of RDMA devices as the kernel's InfiniBand core shows it
// in sysfs: /sys/class/infiniband/<dev>/ports/<n>/state ("4: ACTIVE") and phys_state
// ("5: LinkUp"), both written as "%d: %s" by drivers/infiniband/core/sysfs.c (state_show,
// phys_state_show), read for every device by the probe's command, one line per attribute:
//
//	rdmap79s0 state 4: ACTIVE
//	rdmap79s0 phys_state 5: LinkUp
//	rdmap80s0 state unreadable: cat: rdmap80s0/ports/1/state: Input/output error
package ibport

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// The kernel's codes for the two attributes this package judges by (include/rdma/ib_verbs.h:
// enum ib_port_state, enum ib_port_phys_state).
const (
	StateActive   = 4 // IB_PORT_ACTIVE, "ACTIVE"
	PhysLinkUp    = 5 // IB_PORT_PHYS_STATE_LINK_UP, "LinkUp"
	maxDevices    = 1024
	maxDeviceName = 64
)

// Attr is one sysfs attribute as the kernel wrote it: its code and its name ("4", "ACTIVE").
type Attr struct {
	Code int
	Name string
}

// String renders the attribute as sysfs shows it: "4: ACTIVE".
func (a Attr) String() string { return fmt.Sprintf("%d: %s", a.Code, a.Name) }

// Port is one device's port: its state and physical state, or why either could not be read.
type Port struct {
	Device    string
	State     *Attr
	PhysState *Attr
	// Problem says why an attribute could not be read ("" when both were).
	Problem string
}

// Up reports whether the port was read and is ACTIVE with its link up.
func (p Port) Up() bool {
	return p.Problem == "" && p.State != nil && p.PhysState != nil && p.State.Code == StateActive && p.PhysState.Code == PhysLinkUp
}

var (
	// value is sysfs's "%d: %s" ("7: Phy Test" has a space in its name).
	value      = regexp.MustCompile(`^([0-9]{1,3}): ([A-Za-z_<>][A-Za-z_<> ]{0,39})$`)
	deviceName = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)
)

// ParseAttr reads one attribute's value, "4: ACTIVE".
func ParseAttr(s string) (Attr, error) {
	m := value.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Attr{}, fmt.Errorf("not a sysfs port attribute (\"N: NAME\"): %q", textcut.Head(strings.TrimSpace(s), 120))
	}
	n, _ := strconv.Atoi(m[1])
	return Attr{Code: n, Name: strings.TrimSpace(m[2])}, nil
}

// Parse reads the probe's listing: "<device> <state|phys_state> <value>" lines, the value as
// sysfs wrote it or "unreadable: <why>". Devices come out in the order they first appear. A
// line that is none of these makes the whole listing unreadable: nothing is guessed.
func Parse(text string) ([]Port, error) {
	var ports []Port
	index := map[string]int{}
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSuffix(raw, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		dev, rest, ok1 := strings.Cut(line, " ")
		attr, val, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || !deviceName.MatchString(dev) || len(dev) > maxDeviceName || (attr != "state" && attr != "phys_state") {
			return nil, fmt.Errorf("port state listing, line %d: not \"<device> state|phys_state <value>\": %q", i+1, textcut.Head(line, 160))
		}
		k, seen := index[dev]
		if !seen {
			if len(ports) >= maxDevices {
				return nil, fmt.Errorf("port state listing: more than %d devices", maxDevices)
			}
			index[dev] = len(ports)
			k = len(ports)
			ports = append(ports, Port{Device: dev})
		}
		p := &ports[k]
		if why, bad := strings.CutPrefix(val, "unreadable:"); bad {
			p.Problem = joinProblem(p.Problem, fmt.Sprintf("ports/1/%s unreadable: %s", attr, textcut.Head(strings.TrimSpace(why), 200)))
			continue
		}
		a, err := ParseAttr(val)
		if err != nil {
			p.Problem = joinProblem(p.Problem, fmt.Sprintf("ports/1/%s: %v", attr, err))
			continue
		}
		dst := &p.State
		if attr == "phys_state" {
			dst = &p.PhysState
		}
		if *dst != nil && **dst != a {
			p.Problem = joinProblem(p.Problem, fmt.Sprintf("ports/1/%s read twice, %q then %q", attr, (*dst).String(), a.String()))
			continue
		}
		*dst = &a
	}
	for i := range ports {
		p := &ports[i]
		if p.Problem == "" && (p.State == nil || p.PhysState == nil) {
			missing := "state"
			if p.State != nil {
				missing = "phys_state"
			}
			p.Problem = "ports/1/" + missing + " not listed"
		}
	}
	return ports, nil
}

func joinProblem(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
