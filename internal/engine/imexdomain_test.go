package engine

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// imexHost is the p6-b200 fake host told it is a multi-node NVLink tray (expect.multi_node_nvlink)
// with IMEX channel 0 present; its one-node domain job prints out. ran counts the job's runs.
func imexHost(t *testing.T, out string, ran *int) *fakeHost {
	h := newFakeHost(t)
	h.hostOut["host.imex_channel"] = fakeSection{out: "channel0: character device"}
	h.jobs = map[string]func(context.Context, *fakeHost, host.Job, io.Writer) (int, error){
		"imex-domain.sh": func(_ context.Context, _ *fakeHost, j host.Job, w io.Writer) (int, error) {
			*ran++
			if !j.AsRoot {
				t.Error("the one-node domain job does not run as root")
			}
			io.WriteString(w, out)
			return 0, nil
		},
	}
	return h
}

const oneNodeUp = `@@DLAMI-IMEX WAS inactive
@@DLAMI-IMEX CONFIG absent
@@DLAMI-IMEX ADDRESS 10.1.42.17
@@DLAMI-IMEX RESTART 0
@@DLAMI-IMEX ACTIVE active
@@DLAMI-IMEX BEGIN
{"nodes":{"0":{"status":"READY","host":"10.1.42.17","connections":{"0":{"host":"10.1.42.17","status":"CONNECTED","changed":true}},"changed":true,"version":"595.91.07"}},"timestamp":"8/8/2025 17:38:02.641","status":"UP"}
@@DLAMI-IMEX END 0
@@DLAMI-IMEX RESTORED
`

// A bake on a multi-node NVLink host with imex = "host" brings up the one-node domain and check
// imex judges it; elsewhere the job does not run.
func TestBakeIMEXOneNodeDomain(t *testing.T) {
	mnnvl := true
	bake := func(out string, multi bool) (Options, int, error) {
		opt := options(t)
		opt.KeepGoing = true // the p6-b200 fabric fails nvlink-fabric once told it is multi-node
		opt.Checks.IMEX = settings.IMEXHost
		if multi {
			opt.Checks.Expect.MultiNodeNVLink = &mnnvl
		}
		ran := 0
		err := Run(context.Background(), imexHost(t, out, &ran), &recordingUI{}, opt)
		return opt, ran, err
	}
	opt, ran, _ := bake(oneNodeUp, true)
	if c := check(readReport(t, opt.ReportDir), "imex"); ran != 1 || c.Status != "pass" {
		t.Errorf("healthy one-node domain: ran %d, imex %s %q", ran, c.Status, c.Message)
	}
	opt, _, err := bake(strings.Replace(oneNodeUp, "@@DLAMI-IMEX RESTORED", "@@DLAMI-IMEX RESTORE-FAILED the temporary /etc/nvidia-imex/nodes_config.cfg could not be removed", 1), true)
	if c := check(readReport(t, opt.ReportDir), "imex"); err == nil || c.Status != "fail" || !strings.Contains(c.Message, "could not be removed") {
		t.Errorf("restore failed: %v, imex %s %q", err, c.Status, c.Message)
	}
	opt, _, _ = bake(strings.Replace(oneNodeUp, `"status":"UP"`, `"status":"DOWN"`, 1), true)
	if c := check(readReport(t, opt.ReportDir), "imex"); c.Status != "fail" || !strings.Contains(c.Message, "domain state DOWN, not UP") {
		t.Errorf("domain down: imex %s %q", c.Status, c.Message)
	}
	// Not a multi-node NVLink host: no job (the fake host fails the test on one), the service's
	// state judged as before.
	opt, ran, _ = bake(oneNodeUp, false)
	if c := check(readReport(t, opt.ReportDir), "imex"); ran != 0 || c.Status == "pass" {
		t.Errorf("p6-b200: ran %d, imex %s %q", ran, c.Status, c.Message)
	}
}

// A verification judges what the image has: it never brings up the one-node domain (it would
// restart the service of a launched image), and imex judges the service's state as before.
func TestVerifyLeavesIMEXAlone(t *testing.T) {
	mnnvl := true
	o := verifyOptions(t, bakedBOM(t))
	o.Checks.IMEX = settings.IMEXHost
	o.Checks.Expect.MultiNodeNVLink = &mnnvl
	// The p6-b200's zero clique would fail nvlink-fabric and end the run before the function
	// phase, where a bake brings the domain up.
	o.Checks.Skip = []string{"nvlink-fabric"}
	ran := 0
	err := Verify(context.Background(), imexHost(t, oneNodeUp, &ran), &recordingUI{}, o)
	r := readReport(t, o.ReportDir)
	if c := check(r, "imex"); err != nil || ran != 0 || c.Status != "warn" || !strings.Contains(c.Message, "the IMEX domain is not judged") {
		t.Errorf("verification: %v, ran %d, imex %s %q (failed %v)", err, ran, c.Status, c.Message, r.FailedChecks)
	}
}
