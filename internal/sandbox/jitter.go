package sandbox

import (
	"math/rand/v2"
	"sync"
	"time"
)

// WithJitteredLatency replaces WithLatency's fixed delay with a
// pseudo-random one drawn for every request, as on the internet: the
// request reaches the server after one draw (the server counts it, and
// judges whether it comes early, when it arrives) and the answer comes
// back after another, each uniform within (base ± jitter)/2, so that a
// round trip lies within base ± jitter and answers can arrive in another
// order than their requests were sent. The call stays in flight at the
// server from its arrival until its answer is delivered. A request is
// early when it was sent (its arrival less its way there) after an
// answer that asked to wait reached the client and before that wait was
// over. The draws are seeded by WithSeed, so a run repeats as far as the
// goroutines' order does. jitter is cut to base; base <= 0 turns it off.
func WithJitteredLatency(base, jitter time.Duration) Option {
	return func(c *config) {
		if base <= 0 {
			c.jitter = nil
			return
		}
		jitter = min(max(jitter, 0), base)
		lo, span := (base-jitter)/2, int64(jitter)
		j := &jitterDraws{}
		c.jitter = func() (up, down time.Duration) {
			j.mu.Lock()
			defer j.mu.Unlock()
			if j.rng == nil { // at the first request, when WithSeed is in
				j.rng = rand.New(rand.NewPCG(c.seed, 0x6a6974746572))
			}
			leg := func() time.Duration {
				if span == 0 {
					return lo
				}
				return lo + time.Duration(j.rng.Int64N(span+1))
			}
			up = leg()
			return up, leg()
		}
		c.maxUp = lo + jitter
	}
}

type jitterDraws struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// legs is a request's way to the server and its answer's way back.
type legs struct{ up, down time.Duration }

// legs draws the ways of one exchange: WithJitteredLatency's, or none
// there and WithLatency's back.
func (s *Server) legs() legs {
	if s.cfg.jitter != nil {
		up, down := s.cfg.jitter()
		return legs{up: up, down: down}
	}
	return legs{down: s.cfg.latency}
}
