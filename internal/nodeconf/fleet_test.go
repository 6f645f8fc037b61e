package nodeconf

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Only one owner replaces a node: Auto Scaling and Kubernetes node repair together are refused,
// naming both settings; every other combination is accepted.
func TestCheckOneOwner(t *testing.T) {
	for _, r := range append(Replacers, "") {
		for _, c := range append(NPDConditions, "") {
			err := (Config{Replace: r, NPDCondition: c}).checkFleet(inBlock)
			fight := r == ReplaceASG && c == NPDConditionAcceleratedHardwareReady
			switch {
			case fight && (err == nil || !strings.Contains(err.Error(), `node_check.replace = "asg" together with node_check.npd_condition = "AcceleratedHardwareReady": two owners`)):
				t.Errorf("replace %q, condition %q: %v", r, c, err)
			case !fight && err != nil:
				t.Errorf("replace %q, condition %q refused: %v", r, c, err)
			}
		}
	}
	err := (Config{Replace: "karpenter", NPDCondition: "GpuHealthy"}).checkFleet(inBlock)
	for _, want := range []string{`node_check.replace "karpenter": use none, asg`, `node_check.npd_condition "GpuHealthy": use DLAMINodeCheckFailed, AcceleratedHardwareReady`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want %q", err, want)
		}
	}
}

func TestParseS3URI(t *testing.T) {
	for _, c := range []struct {
		uri, bucket, prefix, err string
	}{
		{"s3://gpu-evidence", "gpu-evidence", "", ""},
		{"s3://gpu-evidence/", "gpu-evidence", "", ""},
		{"s3://gpu.evidence-1/fleet/p5/", "gpu.evidence-1", "fleet/p5", ""},
		{"https://gpu-evidence.s3.amazonaws.com/x", "", "", "does not start with s3://"},
		{"s3://Gpu_Evidence/x", "", "", "not an S3 bucket name"},
		{"s3://ab", "", "", "not an S3 bucket name"},
		{"s3://a..b/x", "", "", "not an S3 bucket name"},
		{"s3://gpu-evidence/a//b", "", "", "empty segment"},
		{"s3://gpu-evidence/a\nb", "", "", "control character"},
	} {
		b, p, err := ParseS3URI(c.uri)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want %q", c.uri, err, c.err)
			}
			continue
		}
		if err != nil || b != c.bucket || p != c.prefix {
			t.Errorf("%q: %q %q %v", c.uri, b, p, err)
		}
	}
}

func FuzzParseS3URI(f *testing.F) {
	for _, s := range []string{"s3://gpu-evidence/fleet", "s3://a/b", "s3://x..y", "", "s3:///"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		b, p, err := ParseS3URI(uri)
		if err != nil {
			return
		}
		if !s3BucketRE.MatchString(b) || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
			t.Errorf("%q accepted as bucket %q prefix %q", uri, b, p)
		}
	})
}

func TestEvidenceValidate(t *testing.T) {
	if errs := (Evidence{}).Validate("node_check.evidence."); len(errs) != 0 {
		t.Errorf("defaults refused: %v", errs)
	}
	errs := (Evidence{Dir: "var/evidence", MaxBundles: -1, MaxSizeMB: -1, S3URI: "bucket/x", DCGMLevel: 7, BugReportTimeout: time.Second}).Validate("node_check.evidence.")
	joined := ""
	for _, e := range errs {
		joined += e.Error() + "\n"
	}
	for _, want := range []string{"node_check.evidence.dir", "node_check.evidence.max_bundles -1", "node_check.evidence.max_size_mb -1",
		"node_check.evidence.s3_uri", "node_check.evidence.dcgm_level = 7", "node_check.evidence.bug_report_timeout 1s"} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors lack %q:\n%s", want, joined)
		}
	}
	r := (Evidence{}).Resolved()
	if r.Dir != DefaultEvidenceDir || r.MaxBundles != DefaultEvidenceMaxBundles || r.MaxSizeMB != DefaultEvidenceMaxSizeMB || r.BugReportTimeout != DefaultBugReportTimeout {
		t.Errorf("resolved: %+v", r)
	}
	// The budget: quick parts and the bug report; DCGM's level 3 adds its hour; slurm mode
	// only the quick parts; off, nothing.
	if b := (Evidence{}).Budget(ModeBoot); b != EvidenceQuickBudget+DefaultBugReportTimeout {
		t.Errorf("boot budget %s", b)
	}
	if b := (Evidence{DCGMLevel: 3}).Budget(ModeNPD); b != EvidenceQuickBudget+DefaultBugReportTimeout+time.Hour {
		t.Errorf("dcgm 3 budget %s", b)
	}
	if b := (Evidence{DCGMLevel: 3}).Budget(ModeSlurm); b != SlurmEvidenceBudget {
		t.Errorf("slurm budget %s", b)
	}
	if b := (Evidence{Disable: true}).Budget(ModeBoot); b != 0 {
		t.Errorf("disabled budget %s", b)
	}
}

// With AcceleratedHardwareReady the plugin's condition is readiness: node-problem-detector sets
// a custom plugin's condition True on exit 1 and False on exit 0 (pkg/custompluginmonitor,
// toConditionStatus), so a failing node exits 0 (False, what Karpenter and EKS repair act on)
// and a passing one 1 (True); the default condition keeps the problem polarity.
func TestNPDConditionPolarity(t *testing.T) {
	if NPDExit("", true) != NPDProblem || NPDExit("", false) != NPDOK || NPDExit(NPDConditionFailed, true) != NPDProblem {
		t.Error("DLAMINodeCheckFailed: a failing node must exit 1 (condition True)")
	}
	if NPDExit(NPDConditionAcceleratedHardwareReady, true) != NPDOK || NPDExit(NPDConditionAcceleratedHardwareReady, false) != NPDProblem {
		t.Error("AcceleratedHardwareReady: a failing node must exit 0 (condition False), a passing one 1 (True)")
	}
	var doc struct {
		MetricsReporting bool `json:"metricsReporting"`
		PluginConfig     struct {
			Timeout string `json:"timeout"`
		} `json:"pluginConfig"`
		Conditions []struct{ Type, Reason, Message string }      `json:"conditions"`
		Rules      []struct{ Condition, Reason, Timeout string } `json:"rules"`
	}
	c := Config{Timeout: 5 * time.Minute, NPDCondition: NPDConditionAcceleratedHardwareReady}
	if err := json.Unmarshal(NPDConfig(c), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.MetricsReporting || doc.Conditions[0].Type != NPDConditionAcceleratedHardwareReady || doc.Rules[0].Condition != NPDConditionAcceleratedHardwareReady ||
		doc.Conditions[0].Reason != NPDConditionFailed || doc.Rules[0].Reason != "DLAMINodeCheckPassed" {
		t.Errorf("AcceleratedHardwareReady config: %+v", doc)
	}
	// The rule waits for the run, its evidence and its actions: 5m + 3m20s + 30s.
	if doc.Rules[0].Timeout != "8m50s" || doc.PluginConfig.Timeout != "9m20s" {
		t.Errorf("timeouts: rule %s, plugin %s", doc.Rules[0].Timeout, doc.PluginConfig.Timeout)
	}
}

// npd_condition AcceleratedHardwareReady with a run bound past half of node repair's 10-minute
// toleration is refused, naming the HCL settings and the fix; the default bound passes.
func TestCheckConditionTimeout(t *testing.T) {
	for _, c := range []struct {
		condition string
		timeout   time.Duration
		wantErr   bool
	}{
		{NPDConditionAcceleratedHardwareReady, 0, false}, // DefaultTimeout, 5m
		{NPDConditionAcceleratedHardwareReady, 5 * time.Minute, false},
		{NPDConditionAcceleratedHardwareReady, 5*time.Minute + time.Second, true},
		{NPDConditionAcceleratedHardwareReady, 30 * time.Minute, true},
		{NPDConditionFailed, 30 * time.Minute, false},
		{"", 30 * time.Minute, false},
	} {
		err := Config{NPDCondition: c.condition, Timeout: c.timeout}.checkFleet(inBlock)
		if (err != nil) != c.wantErr {
			t.Errorf("%q with timeout %s: %v, want error %v", c.condition, c.timeout, err, c.wantErr)
			continue
		}
		if err == nil {
			continue
		}
		for _, want := range []string{`node_check.timeout ` + c.timeout.String() + ` together with node_check.npd_condition = "AcceleratedHardwareReady"`,
			"False for 10m0s", "set node_check.timeout to at most 5m0s", `or use node_check.npd_condition = "DLAMINodeCheckFailed"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
		}
	}
}

// inBlock names a setting as the provisioner's node_check block spells it.
func inBlock(setting string) string { return "node_check." + setting }
