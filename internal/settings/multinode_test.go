package settings

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestMultiNodeResolved(t *testing.T) {
	got, err := MultiNode{Nodes: 2}.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if !got.On() || got.MinBytes != "8" || got.MaxBytes != "2G" || got.Timeout != MultiNodeDefaultTimeout || got.MaxSizeBytes() != 2<<30 {
		t.Errorf("defaults: %+v", got)
	}
	if strings.Join(got.Args(), " ") != "-b 8 -e 2G -f 2 -g 1 -c 1 -n 20" {
		t.Errorf("args %q", got.Args())
	}
	if one, err := (MultiNode{}).Resolved(); err != nil || one.On() || one.Nodes != 1 {
		t.Errorf("unset: %+v %v", one, err)
	}
	bad := []struct {
		m    MultiNode
		want string
	}{
		{MultiNode{Nodes: -1}, "nodes = -1"},
		{MultiNode{Nodes: 17}, "nodes = 17"},
		{MultiNode{Nodes: 2, RanksPerNode: 65}, "multi_node.ranks_per_node"},
		{MultiNode{Nodes: 2, CUDAVersion: "13"}, "multi_node.cuda_version"},
		{MultiNode{Nodes: 2, MaxBytes: "2GB"}, "multi_node.max_bytes \"2GB\""},
		{MultiNode{Nodes: 2, MinBytes: "0"}, "multi_node.min_bytes"},
		{MultiNode{Nodes: 2, MinBytes: "4G", MaxBytes: "2G"}, "above multi_node.max_bytes"},
		{MultiNode{Nodes: 2, Timeout: time.Second}, "multi_node.timeout"},
		{MultiNode{Nodes: 2, BusBWFloorGBps: -1}, "multi_node.busbw_floor_gbps"},
		{MultiNode{Nodes: 2, BusBWFloorGBps: 400000}, "multi_node.busbw_floor_gbps = 400000"},
		{MultiNode{Nodes: 2, BusBWFloorGBps: math.NaN()}, "multi_node.busbw_floor_gbps = NaN"},
		{MultiNode{Nodes: 2, Env: map[string]string{"NCCL_DEBUG_FILE": "/tmp/x"}}, "multi_node.env key NCCL_DEBUG_FILE"},
		{MultiNode{Nodes: 2, Env: map[string]string{"NCCL_DEBUG_SUBSYS": "INIT,ENV"}}, "multi_node.env key NCCL_DEBUG_SUBSYS"},
		{MultiNode{Nodes: 2, Env: map[string]string{"LD_PRELOAD": "x"}}, "only NCCL_*"},
		{MultiNode{Nodes: 2, Env: map[string]string{"NCCL_DEBUG": "WARN"}}, "set by the test itself"},
		{MultiNode{Nodes: 2, Env: map[string]string{"NCCL_ALGO": "a\nb"}}, "line break"},
	}
	for _, tc := range bad {
		if _, err := tc.m.Resolved(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.m, err, tc.want)
		}
	}
	if _, err := (MultiNode{Nodes: 2, Env: map[string]string{"NCCL_MIN_NCHANNELS": "8", "FI_EFA_USE_DEVICE_RDMA": "1"}}).Resolved(); err != nil {
		t.Errorf("tuning env refused: %v", err)
	}
}
