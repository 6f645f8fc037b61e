package dlami

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// A single-node verification whose instance EC2 gave fewer EFA interfaces than the launch
// asked for (the fake's efa-dropped fault: EC2 describes none, and the host shows none) is
// judged against the request: efa-devices fails naming asked, described and the host, the EFA
// traffic test is not turned off, the UI says it, and the AMI is not tagged verified. The
// first boot's SSH probe is replaced by the facts of the host the fake EC2 booted (its EFA
// cards), judged by the real EFA judges with the options the single-node path uses.
func TestEFADroppedByEC2IsNotVerified(t *testing.T) {
	const ami = "ami-0000000000000e041"
	f, p := launchable(t, ami, "snap-00000000000000e41", map[string]interface{}{"efa": "all"})
	p.config.InstanceType = "p6-b200.48xlarge"
	f.srv.SetFault(awsfake.OpRunInstances, "us-east-1", awsfake.Fault{EFADropped: 1})
	var judged []result.Check
	p.checkBoot = func(_ context.Context, _ packersdk.Ui, in *launch.Instance, tg target, typ string, _ func(string)) error {
		o := p.config.singleNodeOptions(in, tg, typ, bom.BOM{})
		if o.Checks.Function.EFATraffic.Skip {
			t.Errorf("the EFA traffic test is off for a launch that asked for %d EFA interfaces", in.Layout.EFA)
		}
		cards := -1
		for _, inst := range f.srv.State("us-east-1", false).Regions["us-east-1"].Instances {
			if inst.ID == in.ID {
				cards = len(inst.EFACards)
			}
		}
		if cards != 0 || in.DescribedEFA != 0 || in.Layout.EFA != 8 {
			t.Fatalf("the fault did not drop the EFA: host cards %d, described %d, asked %d", cards, in.DescribedEFA, in.Layout.EFA)
		}
		run := hostWithEFA(t, cards)
		target := checks.Resolve(run.Host, o.Checks, typ)
		target.Launch = o.Common.Launch
		var failed []string
		for _, id := range []string{result.EFADevices, result.EFATraffic, result.GPUDirectRDMA} {
			e, _ := checks.Lookup(id)
			c := e.Judge(run, target)
			judged = append(judged, c)
			if c.Status.Failing() {
				failed = append(failed, id)
			}
		}
		if len(failed) > 0 {
			return errors.New("first boot failed: " + strings.Join(failed, ", "))
		}
		return nil
	}
	out := &syncBuffer{}
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: out, ErrorWriter: out}
	_, _, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami))
	if err == nil {
		t.Error("the verification passed an instance EC2 gave no EFA interface")
	}
	if img, ok := f.image("us-east-1", ami); !ok || img.Tags[amitags.Verified] == "true" {
		t.Errorf("registered %v, tags %v: tagged verified without EFA proven", ok, img.Tags)
	}
	if len(judged) != 3 {
		t.Fatalf("judged %v", judged)
	}
	want := `the launch asked for 8 EFA interfaces (efa = "all"), EC2 describes 0 on the instance and the PCI bus shows no EFA function`
	if c := judged[0]; c.Status != result.Fail || !strings.Contains(c.Message, want) {
		t.Errorf("efa-devices %s %q, want fail with %q", c.Status, c.Message, want)
	}
	for _, c := range judged[1:] {
		if c.Status == result.Pass || c.Status == result.Skip || strings.Contains(c.Message, "post-processor") {
			t.Errorf("%s %s %q: judged as if no EFA was due", c.ID, c.Status, c.Message)
		}
	}
	if !strings.Contains(out.String(), "EC2 describes 0 EFA interfaces on i-") || !strings.Contains(out.String(), "the launch asked for 8") {
		t.Errorf("the UI does not say EC2 gave fewer EFA interfaces than asked:\n%s", out.String())
	}
}

// hostWithEFA is what the probe reads of a p6-b200.48xlarge with n EFA devices: 8 GPUs, n EFA
// PCI functions, rdmap devices and fi_info domains; with none, fi_info finds no EFA provider.
func hostWithEFA(t *testing.T, n int) facts.Run {
	t.Helper()
	lines := strings.Repeat("0000:51:00.0 0x10de 0x2901 0x030200\n", 8) + strings.Repeat("0000:82:00.0 0x1d0f 0xefa3 0x020000\n", n)
	inv, err := pci.Parse(lines)
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	for i := 0; i < n; i++ {
		devs = append(devs, "rdmap"+string(rune('a'+i))+"s0")
	}
	h := facts.Host{Instance: facts.Instance{Type: "p6-b200.48xlarge", Source: "imds"}, PCI: facts.Read(inv, ""),
		RDMA: facts.Read(facts.RDMADevices{EFA: devs}, ""), Domains: facts.Read(devs, "")}
	if n == 0 {
		h.Domains = facts.Unread[[]string]("fi_info: fi_getinfo: -61 (No data available)", "")
	}
	return facts.Run{Host: h, GDR: facts.NCCLRun{NotApplicable: "no EFA on this host: GPUDirect RDMA does not apply"}}
}
