// Package progress says, at a steady pace, what a long wait waits for and how long it has
// waited, so that a CI log shows the run alive without flooding it. It owns the pace every
// wait of the plugin keeps (the engine's checks, the post-processor's SSH and retries, a
// launch's waits and its cleanup).
package progress

import (
	"fmt"
	"time"
)

// DefaultEvery is how often a long wait says it is still waiting: often enough that a CI log
// shows the run alive, rarely enough that a 15-minute DCGM run adds 15 lines.
const DefaultEvery = time.Minute

// Pace is how often, and by which clock, waits report.
type Pace struct {
	// Every is the interval between two lines; 0 means DefaultEvery.
	Every time.Duration
	// Now is the clock the waited time is read from; nil means time.Now.
	Now func() time.Time
	// ticks, when set (tests), replaces the ticker: each value sent is one tick.
	ticks <-chan time.Time
}

func (p Pace) every() time.Duration { return orDefault(p.Every, DefaultEvery) }

func (p Pace) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Line is what a wait says: "still waiting for SSH on 10.0.0.5:22: 2m0s of at most 30m0s"
// (limit 0 leaves out "of at most").
func Line(what string, waited, limit time.Duration) string {
	msg := fmt.Sprintf("still waiting for %s: %s", what, readable(waited))
	if limit > 0 {
		msg += " of at most " + readable(limit).String()
	}
	return msg
}

// readable rounds d to the second (to the millisecond below one).
func readable(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

// Waiting calls say with Line every p.Every until stop is called, describing the wait with
// what (read at each line: a wait whose state changes says the latest). stop waits until no
// line is being said, so nothing is said after it returns.
func (p Pace) Waiting(say func(string), what func() string, limit time.Duration) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	start := p.now()
	ticks := p.ticks
	var ticker *time.Ticker
	if ticks == nil {
		ticker = time.NewTicker(p.every())
		ticks = ticker.C
	}
	go func() {
		defer close(finished)
		if ticker != nil {
			defer ticker.Stop()
		}
		for {
			select {
			case <-done:
				return
			case <-ticks:
				say(Line(what(), p.now().Sub(start), limit))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// Fixed is a what for a wait whose description does not change.
func Fixed(what string) func() string { return func() string { return what } }
