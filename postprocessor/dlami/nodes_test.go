package dlami

import (
	"strings"
	"testing"
	"time"
)

func TestNodesSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"too many", map[string]interface{}{"nodes": 17}, "nodes = 17: use 1"},
		{"negative", map[string]interface{}{"nodes": -1}, "nodes = -1"},
		{"without EFA", map[string]interface{}{"nodes": 2, "efa": "none"}, `nodes = 2 with efa = "none"`},
		{"block without nodes", map[string]interface{}{"multi_node": map[string]interface{}{"max_bytes": "1G"}}, "multi_node without nodes"},
		{"bad size", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"max_bytes": "2GB"}}, `multi_node.max_bytes "2GB"`},
		{"bad env", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"env": map[string]string{"LD_PRELOAD": "x"}}}, `multi_node.env key "LD_PRELOAD"`},
		{"short timeout", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"timeout": "1s"}}, "multi_node.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := configure(t, tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
	p, err := configure(t, map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"timeout": "5m", "busbw_floor_gbps": 400}})
	if err != nil {
		t.Fatal(err)
	}
	c := &p.config
	m, err := c.multiNode().Resolved()
	if err != nil || !c.TemporaryPlacementGroup || !m.On() || m.Timeout != 5*time.Minute || m.BusBWFloorGBps != 400 || m.MaxBytes != "2G" {
		t.Errorf("nodes = 2: temporary placement group %v, test %+v %v", c.TemporaryPlacementGroup, m, err)
	}
	p, err = configure(t, map[string]interface{}{"nodes": 2, "placement_group": "ml-cluster"})
	if err != nil || p.config.TemporaryPlacementGroup {
		t.Errorf("an existing placement group: %v, temporary %v", err, p.config.TemporaryPlacementGroup)
	}
	p, err = configure(t, map[string]interface{}{})
	if err != nil || p.config.Nodes != 1 || p.config.TemporaryPlacementGroup {
		t.Errorf("default: nodes %d, temporary placement group %v (%v)", p.config.Nodes, p.config.TemporaryPlacementGroup, err)
	}
}
