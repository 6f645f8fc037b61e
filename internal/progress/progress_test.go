package progress

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// lines collects what a wait says.
type lines struct {
	mu  sync.Mutex
	got []string
}

func (l *lines) say(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, s)
}

// waitFor returns once n lines were said: a tick is taken when the wait receives it, and what
// the wait says of it (the clock, the description) is read after; the test must not move them
// before.
func (l *lines) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(l.all()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines said in 10s, want %d: %q", len(l.all()), n, l.all())
		}
		time.Sleep(time.Millisecond)
	}
}

func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// Each tick says what is waited for and for how long by the pace's clock, the latest
// description each time; nothing is said after stop.
func TestWaitingSaysEachTick(t *testing.T) {
	ticks := make(chan time.Time)
	clock := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(d)
	}
	what := "SSH on 10.0.0.5:22"
	var wmu sync.Mutex
	var l lines
	stop := Pace{Now: now, ticks: ticks}.Waiting(l.say, func() string {
		wmu.Lock()
		defer wmu.Unlock()
		return what
	}, 30*time.Minute)
	advance(time.Minute)
	ticks <- time.Time{}
	l.waitFor(t, 1)
	advance(61 * time.Second)
	wmu.Lock()
	what = "SSH on 10.0.0.5:22 (last: connection refused)"
	wmu.Unlock()
	ticks <- time.Time{}
	l.waitFor(t, 2)
	stop()
	select {
	case ticks <- time.Time{}:
		t.Error("the wait still listened after stop")
	default:
	}
	want := []string{
		"still waiting for SSH on 10.0.0.5:22: 1m0s of at most 30m0s",
		"still waiting for SSH on 10.0.0.5:22 (last: connection refused): 2m1s of at most 30m0s",
	}
	if got := l.all(); !slices.Equal(got, want) {
		t.Errorf("said %q, want %q", got, want)
	}
}

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		waited, limit time.Duration
		want          string
	}{
		{90*time.Second + 400*time.Millisecond, 0, "still waiting for x: 1m30s"},
		{59 * time.Second, 15 * time.Minute, "still waiting for x: 59s of at most 15m0s"},
		{20*time.Millisecond + 300*time.Microsecond, 299999 * time.Microsecond, "still waiting for x: 20ms of at most 300ms"},
	} {
		if got := Line("x", tc.waited, tc.limit); got != tc.want {
			t.Errorf("Line(%s, %s) = %q, want %q", tc.waited, tc.limit, got, tc.want)
		}
	}
}

// A wait that ends before its first interval says nothing: a quick step adds no line.
func TestQuickWaitSaysNothing(t *testing.T) {
	var l lines
	stop := Pace{Every: time.Hour}.Waiting(l.say, Fixed("x"), 0)
	stop()
	if got := l.all(); len(got) != 0 {
		t.Errorf("said %q", got)
	}
	if (Pace{}).every() != DefaultEvery || (Pace{Every: -1}).every() != DefaultEvery {
		t.Error("a zero or negative Every is not the default")
	}
}
