package dlami

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strings"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// verify launches one instance from t.ami (or the nodes), checks it and cleans up; it returns
// the instance type the check ran on and, when the test across nodes ran and passed, how many
// nodes it passed on (0 when it was skipped or only warned). The cleanup's outcome goes to run.
// It tags nothing: the AMI's fate waits for the verdict on every copy.
func (p *PostProcessor) verify(ctx context.Context, ui packersdk.Ui, ec2For func(context.Context, string) (launch.EC2API, error), run *run, t target, typ string) (string, int, error) {
	c := &p.config
	api, err := ec2For(ctx, t.region)
	if err != nil {
		return "", 0, err
	}
	say := func(s string) { ui.Say("dlami: " + t.region + ": " + s) }
	tags := map[string]string{"Name": "dlami-verify " + t.ami, "dlami:verify": t.ami}
	maps.Copy(tags, c.RunTags)
	cands := c.candidates(typ)
	spec := launch.Spec{
		ImageID: t.ami, InstanceType: cands[0].InstanceType, Count: c.Nodes, SubnetID: cands[0].SubnetID, SecurityGroupIDs: c.SecurityGroupIDs,
		Fallbacks: cands[1:], MarketType: c.MarketType,
		AssociatePublicIPAddress: c.AssociatePublicIPAddress, IAMInstanceProfile: c.IAMInstanceProfile,
		CapacityReservationPreference: c.CapacityReservationPreference, CapacityReservationID: c.CapacityReservationID,
		CapacityReservationGroupARN: c.CapacityReservationGroupARN, SSHCIDR: c.SSHCIDR, Tags: tags, RunID: run.id,
		Poll: p.poll, CleanupTimeout: p.cleanupTimeout, CallTimeout: p.callTimeout, ProgressEvery: p.progressEvery,
	}
	c.launchSettings(&spec)
	if c.Nodes > 1 {
		spec.RequireEFA = fmt.Sprintf("nodes = %d", c.Nodes)
	}
	lctx, lcancel := context.WithTimeout(ctx, c.SSHTimeout)
	in, err := launch.Launch(lctx, api, spec, say)
	lcancel()
	if err != nil {
		// Launch cleaned up itself; only what it could not remove is left to report.
		run.leaked(t.region, launch.Leaks(err))
		return "", 0, err
	}
	typ = in.Placement.InstanceType
	if in.Layout.EFA == 0 && c.efa != 0 {
		say(fmt.Sprintf("%s takes no EFA interface (%s): the EFA checks judge none", typ, c.efaSetting()))
	}
	if len(in.Nodes()) == 1 && in.DescribedEFA < in.Layout.EFA {
		ui.Error(fmt.Sprintf("dlami: %s: EC2 describes %d EFA interfaces on %s, the launch asked for %d (%s): the checks judge against what the launch asked for, so the EFA devices the host lacks fail",
			t.region, in.DescribedEFA, in.ID, in.Layout.EFA, c.efaSetting()))
	}
	if len(in.Refused) > 0 {
		var refused []string
		for _, r := range in.Refused {
			refused = append(refused, fmt.Sprintf("%s: %s", r.Placement, r.Code))
		}
		say(fmt.Sprintf("verifying on %s (no capacity for %s)", in.Placement, strings.Join(refused, "; ")))
	}
	check := p.checkBoot
	switch {
	case check != nil:
	case len(in.Nodes()) > 1:
		check = p.checkNodes
	default:
		check = p.check
	}
	p.across = nil
	err = check(ctx, ui, in, t, typ, say)
	// Always terminate and delete the temporaries, before anything else (success, failure,
	// timeout and Ctrl-C): the instance costs money every second it runs. What it cannot
	// remove is reported, last, with its command; it does not change the verdict.
	cerr := launch.Cleanup(ctx, in, say)
	if cerr != nil {
		ui.Error("dlami: " + t.region + ": " + cerr.Error())
	}
	run.cleanedUp(t.region, cerr)
	for _, n := range in.Nodes() {
		run.ran = append(run.ran, ranNode{t.region, n.Lifetime()})
	}
	if err != nil {
		return "", 0, err
	}
	n := len(in.Nodes())
	switch {
	case n == 1:
		say(fmt.Sprintf("%s booted healthy on %s", t.ami, typ))
		return typ, 0, nil
	case p.across != nil && *p.across == result.Pass:
		say(fmt.Sprintf("%s booted healthy on %d × %s and passed the NCCL test across them", t.ami, n, typ))
		return typ, n, nil
	}
	status := "was not judged"
	if p.across != nil && *p.across != "" {
		status = "is " + string(*p.across)
	}
	say(fmt.Sprintf("%s booted healthy on %d × %s; the NCCL test across them %s (%s, and %s and %s on multi-node NVLink types), so %s is not set", t.ami, n, typ, status, result.NCCLMultiNode, result.IMEXDomain, result.NCCLMNNVL, amitags.VerifiedNodes))
	return typ, 0, nil
}

// launchReport is what the report says about the launch.
func launchReport(in *launch.Instance, c *Config) *report.Launch {
	l := &report.Launch{InstanceType: in.Placement.InstanceType, SubnetID: cmp.Or(in.SubnetID, in.Placement.SubnetID), InstanceID: in.ID, MarketType: c.MarketType, CapacityReservationID: c.CapacityReservationID,
		EFA: in.DescribedEFA, EFASetting: c.efaSetting(), SecurityGroups: in.SecurityGroups, PlacementGroup: in.PlacementGroup(), ElasticIP: in.ElasticIP}
	if len(in.Layout.Interfaces) > 1 {
		for _, i := range in.Layout.Interfaces {
			l.NetworkInterfaces = append(l.NetworkInterfaces, fmt.Sprintf("%d/%d %s", i.Card, i.Device, i.Type))
		}
	}
	for _, r := range in.Refused {
		l.Refused = append(l.Refused, report.LaunchRefusal{InstanceType: r.InstanceType, SubnetID: r.SubnetID, Code: r.Code, Message: r.Message})
	}
	return l
}
