// Package imexctl parses what `nvidia-imex-ctl -N` prints of an IMEX domain, as JSON (`-N -j`)
// or as its text table, into typed facts: the domain's state, each node's state, host and
// version, and the state of every node's connection to every node. It runs nothing.
//
// Facts (grace-blackwell.md section 1.5): the JSON is `{"nodes":{"0":{"status":"READY",
// "host":…,"connections":{"1":{"host":…,"status":"CONNECTED","changed":true},…},
// "changed":true,"version":"570.172.08"},…},"timestamp":"8/8/2025 17:38:02.641","status":"UP"}`;
// a node never configured reports status DOWN, node UNAVAILABLE, connection INVALID (both from
// aws/aws-parallelcluster test_gb200.py). The text form is a legend, a timestamp, `Nodes:`,
// one `Node #0   - 172.31.48.81    - READY                - Version: 570.172` line per node,
// a `Nodes From\To` matrix of one-letter connection states and `Domain State: UP` (AWS
// ParallelCluster and PCS user guides; NVIDIA's IMEX guide, cmdservice.html).
package imexctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Domain states: the top-level `status` of `-N -j`, `Domain State:` of the text form.
const (
	DomainUp       = "UP"
	DomainDown     = "DOWN"
	DomainDegraded = "DEGRADED"
)

// Node states seen: READY (serving), UNAVAILABLE (never reached: a placeholder address).
const (
	NodeReady       = "READY"
	NodeUnavailable = "UNAVAILABLE"
)

// Connection states, as `-N -j` spells them (CONNECTED, INVALID are the JSON's own words); the
// text form's one-letter codes map to these through the table's legend.
const (
	ConnConnected      = "CONNECTED"
	ConnInvalid        = "INVALID"
	ConnNeverConnected = "NEVER_CONNECTED"
	ConnRecovering     = "RECOVERING"
	ConnDisconnected   = "DISCONNECTED"
	ConnAuthenticating = "AUTHENTICATING"
	ConnVersionMismat  = "VERSION_MISMATCH"
	ConnNodeMapMismat  = "NODE_MAP_MISMATCH"
)

// legend maps the text table's codes to connection states (the legend nvidia-imex-ctl prints).
var legend = map[string]string{
	"C": ConnConnected, "I": ConnInvalid, "N": ConnNeverConnected, "R": ConnRecovering,
	"D": ConnDisconnected, "A": ConnAuthenticating, "!V!": ConnVersionMismat, "!M!": ConnNodeMapMismat,
}

// Domain is one node's view of its IMEX domain.
type Domain struct {
	// Status is the domain's state (DomainUp, DomainDown, DomainDegraded).
	Status string
	// Timestamp is when the view was taken, as the tool prints it ("8/8/2025 17:38:02.641").
	Timestamp string
	// Nodes are the domain's nodes by index.
	Nodes []Node
}

// Node is one node of the domain.
type Node struct {
	Index int
	// Host is the node's address as nodes_config.cfg gives it.
	Host string
	// Status is NodeReady, NodeUnavailable, or what else the tool says.
	Status string
	// Version is the node's IMEX/driver version ("570.172.08"; "" when not reported).
	Version string
	// Connections are this node's connections to the domain's nodes (itself included), by
	// target index.
	Connections []Connection
}

// Connection is one node's connection to another.
type Connection struct {
	To     int
	Host   string
	Status string
}

// Parse reads either form: JSON when the output starts with '{', else the text table.
func Parse(out string) (Domain, error) {
	if strings.HasPrefix(strings.TrimSpace(out), "{") {
		return ParseJSON(out)
	}
	return ParseText(out)
}

type jsonConn struct {
	Host   string `json:"host"`
	Status string `json:"status"`
}

type jsonNode struct {
	Status      string              `json:"status"`
	Host        string              `json:"host"`
	Connections map[string]jsonConn `json:"connections"`
	Version     string              `json:"version"`
}

type jsonDomain struct {
	Nodes     map[string]jsonNode `json:"nodes"`
	Timestamp string              `json:"timestamp"`
	Status    *string             `json:"status"`
}

// ParseJSON reads `nvidia-imex-ctl -N -j`. Output that is not one JSON object with a
// top-level status and integer node keys is an error: a half-read domain is never judged.
func ParseJSON(out string) (Domain, error) {
	dec := json.NewDecoder(strings.NewReader(out))
	var j jsonDomain
	if err := dec.Decode(&j); err != nil {
		return Domain{}, fmt.Errorf("nvidia-imex-ctl -N -j: not JSON: %w", err)
	}
	if dec.More() {
		return Domain{}, errors.New("nvidia-imex-ctl -N -j: text after the JSON object")
	}
	if j.Status == nil || strings.TrimSpace(*j.Status) == "" {
		return Domain{}, errors.New("nvidia-imex-ctl -N -j: no top-level status")
	}
	d := Domain{Status: strings.TrimSpace(*j.Status), Timestamp: j.Timestamp}
	for k, n := range j.Nodes {
		idx, err := index(k)
		if err != nil {
			return Domain{}, fmt.Errorf("nvidia-imex-ctl -N -j: node key %q: %w", k, err)
		}
		if n.Status == "" {
			return Domain{}, fmt.Errorf("nvidia-imex-ctl -N -j: node %d has no status", idx)
		}
		node := Node{Index: idx, Host: n.Host, Status: n.Status, Version: n.Version}
		for ck, c := range n.Connections {
			to, err := index(ck)
			if err != nil {
				return Domain{}, fmt.Errorf("nvidia-imex-ctl -N -j: node %d connection key %q: %w", idx, ck, err)
			}
			node.Connections = append(node.Connections, Connection{To: to, Host: c.Host, Status: c.Status})
		}
		slices.SortFunc(node.Connections, func(a, b Connection) int { return a.To - b.To })
		d.Nodes = append(d.Nodes, node)
	}
	slices.SortFunc(d.Nodes, func(a, b Node) int { return a.Index - b.Index })
	return d, nil
}

func index(k string) (int, error) {
	i, err := strconv.Atoi(k)
	if err != nil || i < 0 {
		return 0, errors.New("not a node index")
	}
	return i, nil
}

var (
	nodeLine   = regexp.MustCompile(`^Node #(\d+)\s+-\s+(\S+)\s+-\s+(\S+)(?:\s+-\s+Version:\s*(\S*))?\s*$`)
	stateLine  = regexp.MustCompile(`^Domain State:\s*(\S+)\s*$`)
	matrixHead = regexp.MustCompile(`^Nodes From\\To\s+(.*)$`)
)

// ParseText reads `nvidia-imex-ctl -N` (the table). The node lines, the matrix and `Domain
// State:` must all be there; a matrix cell that is not a legend code is an error.
func ParseText(out string) (Domain, error) {
	var d Domain
	var cols []int
	seenNodes, seenState := false, false
	prev := ""
	byIndex := map[int]int{}
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimSpace(strings.TrimSuffix(raw, "\r"))
		switch {
		case line == "":
			continue
		case line == "Nodes:":
			seenNodes, d.Timestamp = true, prev
		case nodeLine.MatchString(line):
			m := nodeLine.FindStringSubmatch(line)
			idx, _ := strconv.Atoi(m[1])
			if _, dup := byIndex[idx]; dup {
				return Domain{}, fmt.Errorf("nvidia-imex-ctl -N: node #%d listed twice", idx)
			}
			byIndex[idx] = len(d.Nodes)
			d.Nodes = append(d.Nodes, Node{Index: idx, Host: m[2], Status: m[3], Version: m[4]})
		case matrixHead.MatchString(line):
			cols = nil
			for _, f := range strings.Fields(matrixHead.FindStringSubmatch(line)[1]) {
				c, err := index(f)
				if err != nil {
					return Domain{}, fmt.Errorf("nvidia-imex-ctl -N: matrix column %q: %w", f, err)
				}
				cols = append(cols, c)
			}
		case stateLine.MatchString(line):
			d.Status, seenState = stateLine.FindStringSubmatch(line)[1], true
		case cols != nil && !seenState:
			f := strings.Fields(line)
			from, err := index(f[0])
			if err != nil {
				return Domain{}, fmt.Errorf("nvidia-imex-ctl -N: matrix row %q: %w", line, err)
			}
			if len(f)-1 != len(cols) {
				return Domain{}, fmt.Errorf("nvidia-imex-ctl -N: matrix row %d has %d cells for %d columns", from, len(f)-1, len(cols))
			}
			i, ok := byIndex[from]
			if !ok {
				return Domain{}, fmt.Errorf("nvidia-imex-ctl -N: matrix row %d names no listed node", from)
			}
			for k, code := range f[1:] {
				st, ok := legend[code]
				if !ok {
					return Domain{}, fmt.Errorf("nvidia-imex-ctl -N: matrix row %d: %q is no connection state of the legend", from, code)
				}
				d.Nodes[i].Connections = append(d.Nodes[i].Connections, Connection{To: cols[k], Status: st})
			}
		}
		prev = line
	}
	switch {
	case !seenNodes:
		return Domain{}, errors.New("nvidia-imex-ctl -N: no Nodes: section")
	case !seenState:
		return Domain{}, errors.New("nvidia-imex-ctl -N: no Domain State line")
	case len(d.Nodes) > 0 && cols == nil:
		return Domain{}, errors.New("nvidia-imex-ctl -N: no Nodes From\\To matrix")
	}
	hosts := map[int]string{}
	for _, n := range d.Nodes {
		hosts[n.Index] = n.Host
	}
	for i := range d.Nodes {
		for k := range d.Nodes[i].Connections {
			d.Nodes[i].Connections[k].Host = hosts[d.Nodes[i].Connections[k].To]
		}
	}
	slices.SortFunc(d.Nodes, func(a, b Node) int { return a.Index - b.Index })
	return d, nil
}

// Problems lists why the domain is not healthy, by ParallelCluster's rule (assert_imex_status
// in aws/aws-parallelcluster test_gb200.py): the domain UP, every node READY, every node
// CONNECTED to every node of the domain (itself included). None means healthy.
func (d Domain) Problems() []string {
	var out []string
	if d.Status != DomainUp {
		out = append(out, "domain state "+d.Status+", not "+DomainUp)
	}
	if len(d.Nodes) == 0 {
		return append(out, "the domain lists no node")
	}
	for _, n := range d.Nodes {
		if n.Status != NodeReady {
			out = append(out, fmt.Sprintf("node #%d (%s) %s, not %s", n.Index, n.Host, n.Status, NodeReady))
		}
		for _, m := range d.Nodes {
			c, ok := n.connection(m.Index)
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("node #%d (%s) reports no connection to node #%d (%s)", n.Index, n.Host, m.Index, m.Host))
			case c.Status != ConnConnected:
				out = append(out, fmt.Sprintf("node #%d (%s) to node #%d (%s): %s", n.Index, n.Host, m.Index, m.Host, c.Status))
			}
		}
	}
	return out
}

// Mismatches lists how the domain's nodes differ from hosts, the list every node was given
// (node #i at hosts[i]): IMEX numbers the nodes in the order of nodes_config.cfg, so a node
// elsewhere, missing or extra means the node read another list. None means the same list.
func (d Domain) Mismatches(hosts []string) []string {
	var out []string
	seen := make([]bool, len(hosts))
	for _, n := range d.Nodes {
		switch {
		case n.Index >= len(hosts):
			out = append(out, fmt.Sprintf("node #%d (%s) is not in the list of %d nodes", n.Index, n.Host, len(hosts)))
		case n.Host != hosts[n.Index]:
			out = append(out, fmt.Sprintf("node #%d is %s, not %s", n.Index, n.Host, hosts[n.Index]))
			seen[n.Index] = true
		default:
			seen[n.Index] = true
		}
	}
	for i, ok := range seen {
		if !ok {
			out = append(out, fmt.Sprintf("node #%d (%s) is missing", i, hosts[i]))
		}
	}
	return out
}

// Healthy reports whether Problems finds none.
func (d Domain) Healthy() bool { return len(d.Problems()) == 0 }

// Unconfigured reports whether every node's address is the placeholder 0.0.0.0 that
// ParallelCluster ships "just to get IMEX started" (grace-blackwell.md section 1.5): no domain
// was formed yet, which is what an image looks like before a job's prolog writes the real
// addresses.
func (d Domain) Unconfigured() bool {
	if len(d.Nodes) == 0 {
		return false
	}
	for _, n := range d.Nodes {
		if n.Host != "0.0.0.0" {
			return false
		}
	}
	return true
}

func (n Node) connection(to int) (Connection, bool) {
	for _, c := range n.Connections {
		if c.To == to {
			return c, true
		}
	}
	return Connection{}, false
}
