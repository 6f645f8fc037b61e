// Package pause waits between polls in a way a cancellation ends at once.
package pause

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends, when it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
