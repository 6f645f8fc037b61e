package localhost

import (
	"context"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
)

// TestQueryKillsHungTools: a tool that never ends is killed with its whole process
// group when the bound ends, and the query returns at once.
func TestQueryKillsHungTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Host{}.Query(ctx, []bundle.Command{{Name: "hang", Shell: "sleep 30", Timeout: 30 * time.Second}})
	if err == nil || time.Since(start) > 4*time.Second {
		t.Fatalf("hung query: %v after %s", err, time.Since(start))
	}
	s, err := Host{}.Query(context.Background(), []bundle.Command{{Name: "ok", Shell: "echo hello; exit 3"}})
	if err != nil || s["ok"].Output != "hello" || s["ok"].ExitCode != 3 {
		t.Errorf("query: %+v %v", s, err)
	}
}
