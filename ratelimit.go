package bodo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// The lockout guard. The server locks a key for 5 minutes after more than 50
// refusals in 60 s; the client keeps the key's refusals, plus the attempts in
// flight that could still be refused, at or below half of that in any 60 s
// window, and holds further attempts on the key until the window clears.
const (
	refusalLimit  = 25
	refusalWindow = 60 * time.Second
)

// allLevels stands for every level in a quota block whose policy the client
// does not know: then every call of the key is held.
const allLevels = "*"

// keyState is what the client knows of one API key on one host. Every Client
// in the process with the same key and host shares it.
type keyState struct {
	mu       sync.Mutex
	refusals []time.Time // 429 answers in the last refusalWindow, oldest first
	reserved int         // attempts in flight, each a possible refusal
	changed  chan struct{}
	blocks   map[string]time.Time // exhausted quota policy → when it resets
}

var keyStates = struct {
	sync.Mutex
	m map[string]*keyState
}{m: map[string]*keyState{}}

// stateFor returns the shared state of apiKey on host. The map is keyed by a
// hash of the key, never the key itself.
func stateFor(host, apiKey string) *keyState {
	sum := sha256.Sum256([]byte(apiKey))
	id := host + "/" + hex.EncodeToString(sum[:])
	keyStates.Lock()
	defer keyStates.Unlock()
	s := keyStates.m[id]
	if s == nil {
		s = &keyState{blocks: map[string]time.Time{}}
		keyStates.m[id] = s
	}
	return s
}

// levelsOf returns the policies an operation counts against.
func levelsOf(op *ops.Operation) []string {
	levels := []string{"key", "parallel", "principal", "org"}
	if op.Class.IsWrite() {
		levels = append(levels, "write")
	}
	switch op.Class {
	case ops.ClassDelete:
		levels = append(levels, "delete", "delete-day")
	case ops.ClassRead:
		levels = append(levels, "egress")
	}
	return levels
}

var knownLevels = []string{"key", "write", "parallel", "principal", "org", "delete", "delete-day", "egress"}

// ticket is an admitted attempt; done ends it, telling whether the server
// refused it with a 429.
type ticket struct {
	s    *keyState
	once sync.Once
}

func (t *ticket) done(refused bool) {
	t.once.Do(func() {
		s := t.s
		s.mu.Lock()
		s.reserved--
		if refused {
			s.refusals = append(s.refusals, time.Now())
		}
		s.signal()
		s.mu.Unlock()
	})
}

// signal wakes every waiter; s.mu is held.
func (s *keyState) signal() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// admit lets one attempt of cl go: it refuses at once, without sending, a
// call that a known exhausted quota would refuse, and it waits while the key
// is at the lockout guard's limit. A context whose deadline falls before the
// guard could let the attempt go ends the wait at once.
func (s *keyState) admit(ctx context.Context, cl *call) (*ticket, error) {
	for {
		s.mu.Lock()
		now := time.Now()
		if err := s.blockedLocked(cl, now); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		cut := 0
		for cut < len(s.refusals) && now.Sub(s.refusals[cut]) >= refusalWindow {
			cut++
		}
		s.refusals = s.refusals[cut:]
		if len(s.refusals)+s.reserved < refusalLimit {
			s.reserved++
			s.mu.Unlock()
			return &ticket{s: s}, nil
		}
		var clears time.Duration
		if len(s.refusals) > 0 {
			clears = s.refusals[0].Add(refusalWindow).Sub(now)
		}
		onlyTime := s.reserved == 0
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()

		if deadline, ok := ctx.Deadline(); ok && onlyTime && time.Until(deadline) < clears {
			return nil, fmt.Errorf("%w: %w", guardError(cl, clears), context.DeadlineExceeded)
		}
		var timeout <-chan time.Time
		var timer *time.Timer
		if clears > 0 {
			timer = time.NewTimer(clears)
			timeout = timer.C
		}
		select {
		case <-changed:
		case <-timeout:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", guardError(cl, clears), context.Cause(ctx))
		}
	}
}

func guardError(cl *call, wait time.Duration) *Error {
	return &Error{
		Operation:  cl.op.ID,
		Status:     http.StatusTooManyRequests,
		Code:       CodeRateLimited,
		Title:      "Held by the client",
		Detail:     fmt.Sprintf("the key had %d refusals in the last %v; the client holds its calls until the window clears, so the server does not lock the key", refusalLimit, refusalWindow),
		RetryAfter: wait,
		Local:      true,
		Request:    redactedRequest(cl.req),
	}
}

// blockedLocked returns the local refusal of a call that would hit an
// exhausted quota; s.mu is held.
func (s *keyState) blockedLocked(cl *call, now time.Time) error {
	for policy, until := range s.blocks {
		if !now.Before(until) {
			delete(s.blocks, policy)
			continue
		}
		if policy != allLevels && !slices.Contains(cl.levels, policy) {
			continue
		}
		return &Error{
			Operation:  cl.op.ID,
			Status:     http.StatusTooManyRequests,
			Code:       CodeQuotaExhausted,
			Title:      "Quota exhausted",
			Detail:     fmt.Sprintf("the %s quota is used up until %s; the client does not send calls that would hit it", policyName(policy), until.UTC().Format(time.RFC3339)),
			Policy:     policy,
			ResetsAt:   until,
			RetryAfter: until.Sub(now),
			Local:      true,
			Request:    redactedRequest(cl.req),
		}
	}
	return nil
}

func policyName(p string) string {
	if p == allLevels {
		return "key's"
	}
	return fmt.Sprintf("%q", p)
}

// block records an exhausted quota from a QUOTA_EXHAUSTED answer, until its
// resetsAt (or, without one, its Retry-After).
func (s *keyState) block(e *Error) {
	if e.Code != CodeQuotaExhausted || e.Local {
		return
	}
	until := e.ResetsAt
	if until.IsZero() && e.hinted {
		until = time.Now().Add(e.RetryAfter)
	}
	if until.IsZero() {
		return
	}
	policy := e.Policy
	if !slices.Contains(knownLevels, policy) {
		policy = allLevels
	}
	s.mu.Lock()
	if until.After(s.blocks[policy]) {
		s.blocks[policy] = until
	}
	s.mu.Unlock()
}
