package sandbox

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"
)

// Gateway is a limiter in front of the API that gives no hints, as a
// reverse proxy or API gateway of the operator's may be: a leaky bucket,
// one for all requests (as one that limits the client's address), that
// leaks Rate requests a second and holds Burst. A request that would make
// it overflow is answered 429 with the text/plain body "Too Many Requests"
// and none of the API's fields: no Retry-After, RateLimit, RateLimit-Policy,
// Request-Id or problem. It never reaches the API: it is not charged, does
// not count towards a lockout and announces no wait.
type Gateway struct {
	Rate  float64 // requests a second the bucket leaks; must be positive
	Burst int     // requests the bucket holds; must be positive
}

// WithGateway puts g in front of the server. WithLimitFactor scales its
// Rate and Burst with the server's quotas. New panics on a Rate or Burst
// that is not positive.
func WithGateway(g Gateway) Option { return func(c *config) { c.gateway = &g } }

// Allowance is the requests g lets through over d from an empty bucket: its
// burst plus its rate over d.
func (g Gateway) Allowance(d time.Duration) int {
	return int(math.Floor(float64(g.Burst) + g.Rate*d.Seconds() + 1e-6))
}

// gatewayBucket is the state of a Gateway: level requests in the bucket at
// last.
type gatewayBucket struct {
	mu    sync.Mutex
	rate  float64
	burst float64
	level float64
	last  time.Time
}

func newGatewayBucket(g Gateway, factor float64, now time.Time) *gatewayBucket {
	if !(g.Rate > 0) || g.Burst <= 0 {
		panic(fmt.Sprintf("sandbox: gateway rate %g and burst %d must be positive", g.Rate, g.Burst))
	}
	return &gatewayBucket{rate: g.Rate * factor, burst: float64(scaleQuota(g.Burst, factor)), last: now}
}

// pass reports whether one more request fits in the bucket now, and when
// take is set adds it.
func (b *gatewayBucket) pass(now time.Time, take bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.last) {
		b.level = max(b.level-b.rate*now.Sub(b.last).Seconds(), 0)
		b.last = now
	}
	if b.level+1 > b.burst+eps {
		return false
	}
	if take {
		b.level++
	}
	return true
}

// refuseAtGateway answers r as the gateway does when its bucket is full,
// and counts it for r's key.
func (s *Server) refuseAtGateway(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if k := s.keys[bearer(r)]; k != nil {
		k.stats.GatewayRefused++
	}
	s.mu.Unlock()
	http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
}
