package nodeconf

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestUnitAndNPDConfig(t *testing.T) {
	c := Config{Action: ActionBlock, Timeout: 300 * time.Second, Before: DefaultBefore, OutDir: DefaultOutDir}
	u := Unit(c)
	for _, want := range []string{
		"Type=oneshot", "After=nvidia-persistenced.service nvidia-fabricmanager.service nvidia-dcgm.service",
		"Before=slurmd.service kubelet.service", "RequiredBy=slurmd.service kubelet.service", "TimeoutStartSec=530", // 300s run, 200s evidence (20s quick parts, 3m bug report), 30s slack
		"ExecStart=/usr/local/sbin/dlami-node-check --mode boot --config /etc/dlami-node-check/config.json",
	} {
		if !strings.Contains(u, want+"\n") {
			t.Errorf("unit lacks %q:\n%s", want, u)
		}
	}
	c.Action = ActionDrain
	if strings.Contains(Unit(c), "RequiredBy=") {
		t.Error("a drain unit is RequiredBy the job units: its failure would keep slurmd from starting")
	}
	var npd struct {
		Plugin     string                  `json:"plugin"`
		Conditions []struct{ Type string } `json:"conditions"`
		Rules      []struct {
			Type, Condition, Path string
			Args                  []string
		} `json:"rules"`
	}
	if err := json.Unmarshal(NPDConfig(c), &npd); err != nil {
		t.Fatal(err)
	}
	if npd.Plugin != "custom" || npd.Conditions[0].Type != NPDCondition || npd.Rules[0].Condition != NPDCondition ||
		npd.Rules[0].Type != "permanent" || npd.Rules[0].Path != BinaryPath || strings.Join(npd.Rules[0].Args, " ") != "--mode npd --config "+ConfigPath {
		t.Errorf("NPD config: %+v", npd)
	}
	back, err := DecodeConfig(c.Encode())
	if err != nil || back.Action != ActionDrain {
		t.Errorf("config round trip: %+v %v", back, err)
	}
	if _, err := DecodeConfig([]byte(`{"acton": "drain"}`)); err == nil {
		t.Error("a misspelt setting was accepted")
	}
	if err := CheckUnitName("node_check.before[0]", "slurmd; rm -rf /"); err == nil {
		t.Error("a unit name with a shell command was accepted")
	}
}

// The Slurm wrapper runs the installed binary in Slurm mode with the installed config.
func TestSlurmWrapper(t *testing.T) {
	want := "exec " + BinaryPath + " --mode " + string(ModeSlurm) + " --config " + ConfigPath + "\n"
	if w := SlurmWrapper(); !strings.HasPrefix(w, "#!/bin/sh\n") || !strings.HasSuffix(w, want) {
		t.Errorf("wrapper:\n%s\nwant it to end with %q", w, want)
	}
}

// TestDrainUnitOrdering: with action drain the unit runs scontrol, which needs munged and the
// network (and, on AWS ParallelCluster, Slurm's configuration on a network file system): it is
// ordered after them, as Debian's slurmd.service is. The other actions need none of them.
func TestDrainUnitOrdering(t *testing.T) {
	c := Config{Action: ActionDrain, Timeout: 300 * time.Second, Before: DefaultBefore, OutDir: DefaultOutDir}
	u := Unit(c)
	for _, want := range []string{"After=munge.service network-online.target remote-fs.target", "Wants=network-online.target"} {
		if !strings.Contains(u, "\n"+want+"\n") {
			t.Errorf("drain unit lacks %q:\n%s", want, u)
		}
	}
	for _, a := range []Action{ActionBlock, ActionReport} {
		c.Action = a
		if u := Unit(c); strings.Contains(u, "munge") || strings.Contains(u, "network-online") {
			t.Errorf("action %s orders on munge or the network:\n%s", a, u)
		}
	}
}
