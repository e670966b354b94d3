package sandbox

import (
	"net/url"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// WouldAccept reports whether a call of operationID with query by key
// would be admitted now: by WithGateway's gateway, by every level it takes
// from (with the cost the ops table gives it), the enforced extra policies
// that cover it, the lockout and the parallel slots. It charges nothing and
// changes nothing; faults are not consulted. A partitioned extra policy is
// judged on the partition of the operation's path, which for an operation
// with path parameters is a partition not used yet. An unknown key or
// operation, and batch (whose cost is in its body), are never accepted.
func (s *Server) WouldAccept(key, operationID string, query url.Values) bool {
	return s.judge(key, operationID, query, func(k *apiKey, d demand, now time.Time) bool {
		if now.Before(k.lockedUntil) || s.gate != nil && !s.gate.pass(now, false) {
			return false
		}
		s.advance(k, now)
		return s.admit(k, now, d) == nil
	})
}

// judge reports f of the key's state and the demand of a call of operationID
// with query (the extra policies that cover it included), with s locked;
// false for an unknown key or operation, and for batch, whose cost is in
// its body.
func (s *Server) judge(key, operationID string, query url.Values, f func(k *apiKey, d demand, now time.Time) bool) bool {
	op, ok := ops.ByID(operationID)
	if !ok || op.Class == ops.ClassBatch {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	if k == nil {
		return false
	}
	d := opDemand(op, query.Get)
	s.extraTakes(&d, op, query.Get, op.Path, d.points)
	return f(k, d, time.Now())
}
