package sandbox

import (
	"net/url"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// WouldAccept reports whether a call of operationID with query by apiKey
// would be admitted now: by WithGateway's gateway, by every level it takes
// from (with the cost the ops table gives it), the enforced extra policies
// that cover it, the lockout and the parallel slots. It charges nothing and
// changes nothing; faults are not consulted. A partitioned extra policy is
// judged on the partition of the operation's path, which for an operation
// with path parameters is a partition not used yet. An unknown key or
// operation, and batch (whose cost is in its body), are never accepted.
func (s *Server) WouldAccept(apiKey, operationID string, query url.Values) bool {
	op, ok := ops.ByID(operationID)
	if !ok || op.Class == ops.ClassBatch {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[apiKey]
	if k == nil {
		return false
	}
	now := time.Now()
	if now.Before(k.lockedUntil) || s.gate != nil && !s.gate.pass(now, false) {
		return false
	}
	d := opDemand(op, query.Get)
	s.extraTakes(&d, op, query.Get, op.Path, d.points)
	s.advance(k, now)
	return s.admit(k, now, d) == nil
}
