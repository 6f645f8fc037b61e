package engine

import (
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/progress"
)

// DefaultProgressEvery is how often a long wait says it is still waiting (progress.DefaultEvery,
// the one pace of the plugin's waits).
const DefaultProgressEvery = progress.DefaultEvery

// waiting says, every ProgressEvery until stop is called, what the run is waiting for and for
// how long ("still waiting for the DCGM diagnostics: 2m0s of at most 15m0s").
func (b *Bake) waiting(what string, limit time.Duration) (stop func()) {
	pace := progress.Pace{Every: b.opt.ProgressEvery, Now: b.now}
	return pace.Waiting(func(s string) { b.ui.Say("dlami: " + s) }, progress.Fixed(what), limit)
}
