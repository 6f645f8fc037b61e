package imexctl

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file           string
		status         string
		nodes          int
		first          Node
		healthy, unset bool
		problems       []string
	}{
		{"healthy-2node.json", DomainUp, 2, Node{Index: 0, Host: "192.168.103.159", Status: NodeReady, Version: "570.172.08"}, true, false, nil},
		{"not-configured.json", DomainDown, 1, Node{Index: 0, Host: "0.0.0.0", Status: NodeUnavailable}, false, true,
			[]string{"domain state DOWN, not UP", "node #0 (0.0.0.0) UNAVAILABLE, not READY", "node #0 (0.0.0.0) to node #0 (0.0.0.0): INVALID"}},
		{"healthy-18node.txt", DomainUp, 18, Node{Index: 0, Host: "172.31.48.81", Status: NodeReady, Version: "570.172"}, true, false, nil},
		{"healthy-1node.txt", DomainUp, 1, Node{Index: 0, Host: "10.136.206.48", Status: NodeReady}, true, false, nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			d, err := Parse(read(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != tc.status || len(d.Nodes) != tc.nodes {
				t.Fatalf("status %q nodes %d, want %q %d", d.Status, len(d.Nodes), tc.status, tc.nodes)
			}
			n := d.Nodes[0]
			if n.Index != tc.first.Index || n.Host != tc.first.Host || n.Status != tc.first.Status || n.Version != tc.first.Version {
				t.Errorf("node 0 = %+v, want %+v", n, tc.first)
			}
			if len(n.Connections) != tc.nodes {
				t.Errorf("node 0 has %d connections, want %d", len(n.Connections), tc.nodes)
			}
			if d.Healthy() != tc.healthy || d.Unconfigured() != tc.unset {
				t.Errorf("healthy %v unconfigured %v, want %v %v (problems %q)", d.Healthy(), d.Unconfigured(), tc.healthy, tc.unset, d.Problems())
			}
			if tc.problems != nil && !slices.Equal(d.Problems(), tc.problems) {
				t.Errorf("problems %q, want %q", d.Problems(), tc.problems)
			}
		})
	}
}

func TestParseJSONFields(t *testing.T) {
	d, err := ParseJSON(read(t, "healthy-2node.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Timestamp != "8/8/2025 17:38:02.641" {
		t.Errorf("timestamp %q", d.Timestamp)
	}
	c := d.Nodes[1].Connections
	if len(c) != 2 || c[0] != (Connection{To: 0, Host: "192.168.103.159", Status: ConnConnected}) || c[1].Host != "192.168.107.187" {
		t.Errorf("node 1 connections %+v", c)
	}
}

func TestParseTextFields(t *testing.T) {
	d, err := ParseText(read(t, "healthy-18node.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Timestamp != "5/12/2025 06:08:10.580" {
		t.Errorf("timestamp %q", d.Timestamp)
	}
	last := d.Nodes[17]
	if last.Index != 17 || last.Host != "172.31.56.47" || len(last.Connections) != 18 || last.Connections[16] != (Connection{To: 16, Host: "172.31.55.197", Status: ConnConnected}) {
		t.Errorf("node 17 %+v", last)
	}
}

// The broken domains are the sourced captures with one thing changed, each named.
func TestUnhealthyDomains(t *testing.T) {
	healthyJSON := read(t, "healthy-2node.json")
	healthyText := read(t, "healthy-18node.txt")
	for _, tc := range []struct {
		name, out string
		want      string
	}{
		{"json domain DEGRADED", strings.Replace(healthyJSON, `"status": "UP"`, `"status": "DEGRADED"`, 1), "domain state DEGRADED, not UP"},
		{"json node 1 UNAVAILABLE", strings.Replace(healthyJSON, `"status": "READY",
   "host": "192.168.107.187"`, `"status": "UNAVAILABLE",
   "host": "192.168.107.187"`, 1), "node #1 (192.168.107.187) UNAVAILABLE, not READY"},
		{"json pair INVALID", strings.Replace(healthyJSON, `"host": "192.168.107.187",
     "status": "CONNECTED"`, `"host": "192.168.107.187",
     "status": "INVALID"`, 1), "node #0 (192.168.103.159) to node #1 (192.168.107.187): INVALID"},
		{"json connection missing", strings.Replace(healthyJSON, `"1": {
     "host": "192.168.107.187",
     "status": "CONNECTED",
     "changed": true
    },`, ``, 1), "node #0 (192.168.103.159) reports no connection to node #1 (192.168.107.187)"},
		{"text domain DOWN", strings.Replace(healthyText, "Domain State: UP", "Domain State: DOWN", 1), "domain state DOWN, not UP"},
		{"text never connected", strings.Replace(healthyText, "       3        C   C", "       3        C   N", 1), "node #3 (172.31.49.228) to node #1 (172.31.48.98): NEVER_CONNECTED"},
		{"text version mismatch", strings.Replace(healthyText, "       2        C   C", "       2        C   !V!", 1), "node #2 (172.31.48.221) to node #1 (172.31.48.98): VERSION_MISMATCH"},
		{"text node UNAVAILABLE", strings.Replace(healthyText, "172.31.56.47    - READY", "172.31.56.47    - UNAVAILABLE", 1), "node #17 (172.31.56.47) UNAVAILABLE, not READY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.out == healthyJSON || tc.out == healthyText {
				t.Fatal("the mutation changed nothing")
			}
			d, err := Parse(tc.out)
			if err != nil {
				t.Fatal(err)
			}
			if d.Healthy() || !slices.Contains(d.Problems(), tc.want) {
				t.Errorf("problems %q, want one %q", d.Problems(), tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	healthyText := read(t, "healthy-1node.txt")
	for _, tc := range []struct{ name, out, want string }{
		{"empty", "", "no Nodes: section"},
		{"ctl cannot connect", "Query Status returned error code: 14 - failed to connect to all addresses; last error: UNKNOWN: ipv6:[::]:50005: Address family not supported by protocol\n", "no Nodes: section"},
		{"json no status", `{"nodes":{},"timestamp":"x"}`, "no top-level status"},
		{"json truncated", `{"nodes":{"0":{"status":"READY"`, "not JSON"},
		{"json bad node key", `{"nodes":{"a":{"status":"READY"}},"status":"UP"}`, `node key "a"`},
		{"json node without status", `{"nodes":{"0":{"host":"1.2.3.4"}},"status":"UP"}`, "node 0 has no status"},
		{"json trailing text", `{"status":"UP"} {"status":"UP"}`, "text after"},
		{"text no state", strings.Replace(healthyText, "Domain State: UP", "", 1), "no Domain State"},
		{"text no matrix", strings.Replace(healthyText, " Nodes From\\To  0\n       0        C\n", "", 1), "no Nodes From\\To matrix"},
		{"text unknown code", strings.Replace(healthyText, "       0        C", "       0        Z", 1), "no connection state of the legend"},
		{"text short row", strings.Replace(healthyText, "       0        C", "       0", 1), "has 0 cells for 1 columns"},
		{"text duplicate node", strings.Replace(healthyText, "Node #0   - 10.136.206.48   - READY\n", "Node #0   - 10.136.206.48   - READY\nNode #0   - 10.1.1.1   - READY\n", 1), "listed twice"},
		{"text row of unknown node", strings.Replace(healthyText, "       0        C", "       5        C", 1), "names no listed node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestProblemsOfEmptyDomain(t *testing.T) {
	if p := (Domain{Status: DomainUp}).Problems(); !slices.Equal(p, []string{"the domain lists no node"}) {
		t.Errorf("problems %q", p)
	}
	if (Domain{}).Unconfigured() {
		t.Error("an empty domain is not the placeholder configuration")
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"healthy-2node.json", "not-configured.json", "healthy-18node.txt", "healthy-1node.txt"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, out string) {
		d, err := Parse(out)
		if err != nil {
			return
		}
		// A parsed domain is judged without panicking, and healthy only when UP with nodes.
		if d.Healthy() && (d.Status != DomainUp || len(d.Nodes) == 0) {
			t.Fatalf("healthy domain %+v", d)
		}
		for _, n := range d.Nodes {
			if n.Status == "" {
				t.Fatalf("node without status %+v", n)
			}
		}
	})
}

func TestMismatches(t *testing.T) {
	d := Domain{Status: DomainUp, Nodes: []Node{{Index: 0, Host: "10.0.1.5"}, {Index: 1, Host: "10.0.1.6"}}}
	for _, tc := range []struct {
		name  string
		hosts []string
		want  []string
	}{
		{"same list", []string{"10.0.1.5", "10.0.1.6"}, nil},
		{"another address", []string{"10.0.1.5", "10.0.1.7"}, []string{"node #1 is 10.0.1.6, not 10.0.1.7"}},
		{"a node missing", []string{"10.0.1.5", "10.0.1.6", "10.0.1.7"}, []string{"node #2 (10.0.1.7) is missing"}},
		{"a node extra", []string{"10.0.1.5"}, []string{"node #1 (10.0.1.6) is not in the list of 1 nodes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.Mismatches(tc.hosts); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
