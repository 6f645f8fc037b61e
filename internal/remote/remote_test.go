package remote

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowEmpty returns EOF only after a pause, like an idle stderr stream that closes when the
// command exits.
type slowEmpty struct{}

func (slowEmpty) Read([]byte) (int, error) { time.Sleep(50 * time.Millisecond); return 0, io.EOF }

// The communicator copies stdout and stderr into one writer at the same time. With a
// *bytes.Buffer the idle stream's ReadFrom truncated the other stream's output to nothing.
func TestBufferKeepsOutputOfConcurrentStreams(t *testing.T) {
	var out Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(&out, slowEmpty{}) }()
	go func() { defer wg.Done(); _, _ = io.Copy(&out, strings.NewReader(strings.Repeat("x", 17000))) }()
	wg.Wait()
	if got := len(out.String()); got != 17000 {
		t.Fatalf("kept %d of 17000 bytes", got)
	}
}

func TestScriptCommandQuotes(t *testing.T) {
	got := ScriptCommand("echo 'a b'")
	want := `/bin/sh -c 'echo '\''a b'\'''`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
