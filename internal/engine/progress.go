package engine

import (
	"fmt"
	"time"
)

// DefaultProgressEvery is how often a long wait says it is still waiting: often enough that a
// CI log shows the bake alive, rarely enough that a 15-minute DCGM run adds 15 lines.
const DefaultProgressEvery = time.Minute

// waiting says, every ProgressEvery until stop is called, what the run is waiting for and for
// how long ("still waiting for the DCGM diagnostics: 2m0s of at most 15m0s").
func (b *Bake) waiting(what string, limit time.Duration) (stop func()) {
	done := make(chan struct{})
	start := b.now()
	go func() {
		t := time.NewTicker(b.opt.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				msg := fmt.Sprintf("dlami: still waiting for %s: %s", what, b.now().Sub(start).Round(time.Second))
				if limit > 0 {
					msg += " of at most " + limit.String()
				}
				b.ui.Say(msg)
			}
		}
	}()
	return func() { close(done) }
}
