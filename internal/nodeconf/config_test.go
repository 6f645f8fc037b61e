package nodeconf

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// One type is the node_check block and the file in the image: every setting of the block is
// written under the same name, durations as the block reads them ("5m0s"), and the file reads
// back to the same settings.
func TestConfigIsTheBlockAndTheFile(t *testing.T) {
	c := Config{
		Action: ActionDrain, Before: []string{"slurmd.service"}, NCCL: true, DCGMLevel: 1, EFATraffic: true, GPUDirectRDMA: true, ContainerGPU: true,
		SkipChecks: []string{"nvme"}, WarnChecks: []string{"gpu-clocks"}, Timeout: 90 * time.Second, Textfile: TextfileNone,
		LoginUser: "ubuntu", Replace: ReplaceASG, NPDCondition: NPDConditionFailed,
		Evidence: Evidence{Disable: true, Dir: "/var/ev", MaxBundles: 3, MaxSizeMB: 64, S3URI: "s3://b/p", DCGMLevel: 3, BugReportTimeout: 4 * time.Minute},
		BOMPath:  "/etc/m.json", OutDir: "/var/out", CheckTimeout: 30 * time.Second, Scontrol: "/opt/slurm/bin/scontrol",
	}
	data := c.Encode()
	for _, want := range []string{`"timeout": "1m30s"`, `"check_timeout": "30s"`, `"bug_report_timeout": "4m0s"`, `"max_size_mb": 64`, `"disable": true`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("file lacks %s:\n%s", want, data)
		}
	}
	back, err := DecodeConfig(data)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip: %+v, %v\nwant %+v", back, err, c)
	}
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	var evidence map[string]json.RawMessage
	if err := json.Unmarshal(file["evidence"], &evidence); err != nil {
		t.Fatal(err)
	}
	for name := range (*FlatConfig)(nil).HCL2Spec() {
		if _, ok := file[name]; !ok {
			t.Errorf("node_check.%s is not in the file", name)
		}
	}
	for name := range (*FlatEvidence)(nil).HCL2Spec() {
		if _, ok := evidence[name]; !ok {
			t.Errorf("node_check.evidence.%s is not in the file", name)
		}
	}
	for _, fileOnly := range []string{"bom_path", "out_dir", "check_timeout", "scontrol"} {
		if _, ok := (*FlatConfig)(nil).HCL2Spec()[fileOnly]; ok {
			t.Errorf("%s is a setting of the block; the provisioner fills it in", fileOnly)
		}
	}
	for name, in := range map[string]string{
		"a misspelt setting":          `{"acton": "drain"}`,
		"a misspelt evidence setting": `{"evidence": {"max_bytes": 1}}`,
		"a duration in nanoseconds":   `{"timeout": 300000000000}`,
	} {
		if _, err := DecodeConfig([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Resolved fills in every default once; a config without settings resolves to the installed
// defaults, and the rule validates the result for the block and the command alike, each
// naming the setting its own way.
func TestResolvedAndOneRule(t *testing.T) {
	r := Config{}.Resolved()
	if r.Action != ActionBlock || !slices.Equal(r.Before, DefaultBefore) || r.Timeout != DefaultTimeout || r.Textfile != DefaultTextfile ||
		r.Replace != ReplaceNone || r.NPDCondition != NPDConditionFailed || r.Evidence.Dir != DefaultEvidenceDir ||
		r.BOMPath == "" || r.OutDir != DefaultOutDir || r.CheckTimeout != time.Minute || r.Scontrol != DefaultScontrol {
		t.Errorf("resolved: %+v", r)
	}
	if err := r.Validate(inBlock); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
	if r.TextfilePath() != DefaultTextfile || (Config{Textfile: TextfileNone}).TextfilePath() != "" {
		t.Error("textfile none must write none, the default the default path")
	}
	flag := func(s string) string { return "--" + s }
	for _, tc := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Timeout = 5 * time.Second }, "timeout 5s: use 10s to 1h"},
		{func(c *Config) { c.Timeout = 61 * time.Minute }, "timeout 1h1m0s: use 10s to 1h"},
		{func(c *Config) { c.Textfile = "/tmp/x.txt" }, `textfile "/tmp/x.txt": an absolute path ending in .prom`},
		{func(c *Config) { c.Action = "explode" }, `action "explode": use block, drain, report`},
		{func(c *Config) { c.Action, c.Before = ActionBlock, []string{} }, `action = "block" with an empty`},
		{func(c *Config) { c.LoginUser = "root; reboot" }, `login_user "root; reboot"`},
		{func(c *Config) { c.CheckTimeout = time.Millisecond }, "check_timeout 1ms: must be at least 1s"},
		{func(c *Config) { c.Evidence.MaxSizeMB = -1 }, "evidence.max_size_mb -1"},
	} {
		c := r
		tc.set(&c)
		for _, name := range []func(string) string{inBlock, flag} {
			err := c.Validate(name)
			if want := name(tc.want); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v, want %q", err, want)
			}
		}
	}
	for _, d := range []time.Duration{10 * time.Second, time.Hour} {
		c := r
		c.Timeout = d
		if err := c.Validate(inBlock); err != nil {
			t.Errorf("timeout %s refused: %v", d, err)
		}
	}
}
