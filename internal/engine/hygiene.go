package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// Hygiene is image_hygiene: the last step of a bake removes what must not be in every
// instance launched from the image, or must be unique to each: the build's SSH key, the SSH
// host keys, the machine id, cloud-init's instance state, logs and shell history.
type Hygiene struct {
	// LoginUser is the SSH user whose authorized_keys held the build key (Packer's User).
	LoginUser string
	// BuildKey is the public key Packer logged in with, "type base64" (authorized_keys
	// format); empty when it is not known (agent or password authentication), and then no
	// authorized_keys line is removed and the check warns.
	BuildKey string
}

// imageHygiene is image_hygiene, the bake's last step: the cleanup job, then the check judged
// from a read-only probe of the same paths. A failed check fails the bake.
func (b *Bake) imageHygiene(ctx context.Context) error {
	h := b.opt.ImageHygiene
	if h == nil {
		return nil
	}
	b.stage("image hygiene (the build's SSH key, host keys, machine id, cloud-init state, logs, history)")
	start := b.now()
	run, err := b.runJob(ctx, probe.HygieneScript(h.LoginUser, h.BuildKey), false)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("image hygiene: %w", err)
	}
	log := strings.TrimSpace(run.output)
	for _, l := range strings.Split(log, "\n") {
		if l != "" {
			b.ui.Message(l)
		}
	}
	hy := &b.run.Hygiene
	hy.CleanupExit, hy.CleanupLog, hy.BuildKeyKnown = run.code, log, len(strings.Fields(h.BuildKey)) >= 2
	if run.timedOut && run.code == 0 {
		hy.CleanupExit = -1
	}
	hy.State = probe.HygieneState(ctx, b.host, h.LoginUser, h.BuildKey)
	c := b.judge(checks.PhaseImage, b.now().Sub(start))[0]
	if c.Status.Failing() {
		return verdict("image hygiene failed: %s", c.Message)
	}
	if c.Status == result.Warn {
		b.ui.Error("dlami: image-hygiene warn: " + c.Message)
	}
	b.ui.Say("dlami: image hygiene done: the build's SSH access is gone from the image; no later provisioner can log in with a new connection")
	return nil
}
