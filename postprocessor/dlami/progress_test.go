package dlami

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// Waiting for SSH says, at the progress pace, where it connects, its bound and the last
// answer.
func TestWaitingForSSHSaysSo(t *testing.T) {
	const ami = "ami-0000000000000c041"
	_, p := launchable(t, ami, "snap-00000000000000c41", map[string]interface{}{"ssh_timeout": "1s"})
	p.progressEvery = 100 * time.Millisecond
	out := &syncBuffer{}
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: out, ErrorWriter: out}
	start := time.Now()
	if _, _, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami)); err == nil {
		t.Fatal("nothing answers SSH, yet the verification passed")
	}
	took := time.Since(start)
	said := out.String()
	n := strings.Count(said, "dlami: us-east-1: still waiting for SSH on ")
	if n == 0 || !strings.Contains(said, "(ssh_timeout; last: ") || !strings.Contains(said, " of at most 1s") {
		t.Errorf("%d progress lines:\n%s", n, said)
	}
	// The pace holds: one line per interval at most, however often it tries.
	if limit := int(took/p.progressEvery) + 1; n > limit {
		t.Errorf("%d progress lines in %s at %s: more than %d", n, took, p.progressEvery, limit)
	}
}

// A tagging that takes long says what it waits for.
func TestSlowTaggingSaysSo(t *testing.T) {
	const ami = "ami-0000000000000c042"
	f, p := launchable(t, ami, "snap-00000000000000c42", map[string]interface{}{})
	p.progressEvery = 20 * time.Millisecond
	p.checkBoot = func(context.Context, packersdk.Ui, *launch.Instance, target, string, func(string)) error { return nil }
	f.srv.SetFault(awsfake.OpCreateTags, "us-east-1", awsfake.Fault{Latency: 150 * time.Millisecond})
	out := &syncBuffer{}
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: out, ErrorWriter: out}
	if _, _, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "dlami: us-east-1: still waiting for the tags on "+ami+": ") {
		t.Errorf("no progress line:\n%s", out.String())
	}
}
