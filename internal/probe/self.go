package probe

import (
	"context"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/instanceid"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/uptime"
)

// Sections of Self.
const (
	sectionInstanceID = "host.instance_id"
	sectionUptime     = "host.uptime"
)

// instanceIDCommand prints the instance id: cloud-init's record of the instance it runs on
// (written at every boot of a new instance, world-readable), else IMDSv2's, one second per
// request as imdsCommand.
const instanceIDCommand = `cat /var/lib/cloud/data/instance-id 2>/dev/null || ` +
	`{ TOKEN=$(curl -s -m 1 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token) && curl -s -f -m 1 -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/instance-id; }`

// Self reads the instance's type (as InstanceType does), id and uptime, in one round trip.
// What it cannot read carries the reason.
func Self(ctx context.Context, r Runner) (facts.Self, error) {
	cmds := hostCommands(Options{NVMePath: "/"})[:2]
	cmds = append(cmds,
		bundle.Command{Name: sectionInstanceID, Shell: instanceIDCommand, Timeout: 3 * time.Second},
		bundle.Command{Name: sectionUptime, Shell: "cat /proc/uptime", Timeout: 10 * time.Second},
	)
	sections, err := query(ctx, r, "the instance's id and uptime", cmds)
	if err != nil {
		return facts.Self{}, err
	}
	return parseSelf(sections), nil
}

// parseSelf turns Self's sections into facts.
func parseSelf(sections map[string]bundle.Section) facts.Self {
	return facts.Self{
		Instance: instanceType(sections),
		ID:       parseWith(sections, sectionInstanceID, instanceid.Parse),
		Uptime:   parseWith(sections, sectionUptime, uptime.Parse),
	}
}
