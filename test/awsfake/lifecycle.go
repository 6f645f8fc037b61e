package awsfake

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// work is a machine call running in the background. done and err are
// guarded by Server.mu.
type work struct {
	done bool
	err  error
}

// doneWork is the work of a transition that needs no machine call.
func doneWork() *work { return &work{done: true} }

// settle tracks a resource in a transitional state: it moves on once its
// work is done and it has been reported in the transitional state polls times.
type settle struct {
	work  *work
	polls int
}

// machineTimeout bounds one machine call, so a wedged boot cannot keep an
// instance pending forever.
const machineTimeout = 20 * time.Minute

// background runs op (a machine call) off the request path, serialised per
// instance by lock, then records its outcome in w and calls after (both
// under s.mu). It runs under s.mu.
func (s *Server) background(lock *sync.Mutex, w *work, op func(ctx context.Context) error, after func(error)) {
	if s.closed {
		w.done, w.err = true, fmt.Errorf("the fake is shutting down")
		if after != nil {
			after(w.err)
		}
		return
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		lock.Lock()
		ctx, cancel := context.WithTimeout(s.bgCtx, machineTimeout)
		err := op(ctx)
		cancel()
		lock.Unlock()
		s.mu.Lock()
		w.done, w.err = true, err
		if after != nil {
			after(err)
		}
		s.mu.Unlock()
		if err != nil {
			s.logf("machine call failed: %v", err)
		}
	}()
}

// advance moves a transitional resource on when it may: its work is done
// and it has been seen in the transitional state TransitionPolls times. It
// reports whether the caller should apply the next state. Runs under s.mu.
func (s *Server) advance(st *settle) bool {
	if st.work == nil || !st.work.done {
		return false
	}
	if st.polls < s.transitionPolls {
		st.polls++
		return false
	}
	return true
}
