package sandbox

import (
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// ExtraPolicy is a policy beyond the eight levels of bodo-api.md, counted
// per key. An announced one (not Hidden) is listed in RateLimit-Policy on
// every answer. An Enforced one is charged by every call it covers, takes
// part in the choice of the narrowest level for the RateLimit field of those
// calls (the smallest remaining share of its full level, as for the built-in
// levels), refuses them with 429 RATE_LIMITED and policy Name when they do
// not fit (the longest wait wins when several levels refuse) and is listed
// by GET /v1/rate_limit (Hidden ones too). One that is not enforced is never
// charged and never named in RateLimit.
//
// A batch is charged as its parts: each part an operation covers is charged
// as a call of its own (on its own path's partition); a policy that lists
// "batch" in Operations also covers the batch as a whole.
type ExtraPolicy struct {
	Name     string        // the policy name: printable ASCII, not one of the built-in levels
	Quota    int           // units per Window; must be positive
	Window   time.Duration // zero means Limits.Window
	Unit     string        // "requests" (one per call, the default) or "points" (the call's cost)
	Shape    Shape         // how it counts; zero means TokenBucket, holding Quota
	Enforced bool          // charged and refusing; otherwise only announced
	// Operations are the operationIds it covers; empty means every
	// operation.
	Operations []string
	// Query, when set, limits the policy to calls that give this query
	// parameter a non-empty value (as the +5 cost of q counts it).
	Query string
	// Partitioned counts the policy per request path: a partition of its
	// own for every path, announced and reported with the parameter pk, a
	// Byte Sequence of the path (pk=:<base64 of the path>:). GET
	// /v1/rate_limit reports the key's most used partition.
	Partitioned bool
	// Hidden keeps the policy out of RateLimit-Policy.
	Hidden bool
}

// WithExtraPolicies adds policies beyond the eight levels. New panics on a
// policy without a name, with a name taken, a non-positive Quota, an unknown
// Unit, Shape or operationId.
func WithExtraPolicies(policies ...ExtraPolicy) Option {
	return func(c *config) { c.extras = append(c.extras, policies...) }
}

const (
	unitRequests = "requests"
	unitPoints   = "points"
)

var builtinPolicies = []string{policyKey, policyWrite, policyParallel, policyPrincipal, policyOrg,
	policyDelete, policyDeleteDay, policyEgress, policyLockout}

// extraPolicies checks the policies and fills in their defaults.
func extraPolicies(in []ExtraPolicy, lim Limits) []ExtraPolicy {
	out := make([]ExtraPolicy, 0, len(in))
	seen := map[string]bool{}
	for _, p := range in {
		if !printableASCII(p.Name) || slices.Contains(builtinPolicies, p.Name) || seen[p.Name] {
			panic(fmt.Sprintf("sandbox: extra policy name %q is empty, not printable ASCII or taken", p.Name))
		}
		seen[p.Name] = true
		if p.Quota <= 0 {
			panic(fmt.Sprintf("sandbox: extra policy %q needs a positive quota", p.Name))
		}
		if p.Window <= 0 {
			p.Window = lim.Window
		}
		switch p.Unit {
		case "":
			p.Unit = unitRequests
		case unitRequests, unitPoints:
		default:
			panic(fmt.Sprintf("sandbox: extra policy %q: unit %q is neither requests nor points", p.Name, p.Unit))
		}
		if p.Shape == "" {
			p.Shape = TokenBucket
		}
		if !p.Shape.valid() {
			panic(fmt.Sprintf("sandbox: extra policy %q: unknown shape %q", p.Name, p.Shape))
		}
		for _, id := range p.Operations {
			if _, ok := ops.ByID(id); !ok {
				panic(fmt.Sprintf("sandbox: extra policy %q: unknown operation %q", p.Name, id))
			}
		}
		p.Operations = slices.Clone(p.Operations)
		out = append(out, p)
	}
	return out
}

func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}

// covers reports whether p counts a call of op with this query.
func (p *ExtraPolicy) covers(op *ops.Operation, query func(string) string) bool {
	if len(p.Operations) == 0 {
		if op.Class == ops.ClassBatch {
			return false
		}
	} else if !slices.Contains(p.Operations, op.ID) {
		return false
	}
	return p.Query == "" || query(p.Query) != ""
}

// extraTake is what a call takes from one partition of an enforced extra
// policy.
type extraTake struct {
	pol  int    // index into Server.extras
	part string // the partition: the request path, "" when not partitioned
	n    float64
}

// extraTakes adds what a call of op on path, costing points, takes from the
// enforced extra policies to d.
func (s *Server) extraTakes(d *demand, op *ops.Operation, query func(string) string, path string, points float64) {
	for i := range s.extras {
		p := &s.extras[i]
		if !p.Enforced || !p.covers(op, query) {
			continue
		}
		t := extraTake{pol: i, n: 1}
		if p.Unit == unitPoints {
			t.n = points
		}
		if p.Partitioned {
			t.part = path
		}
		j := slices.IndexFunc(d.extra, func(e extraTake) bool { return e.pol == t.pol && e.part == t.part })
		if j < 0 {
			d.extra = append(d.extra, t)
		} else {
			d.extra[j].n += t.n
		}
	}
}

// extraLimiter is k's limiter of one partition of extra policy i, brought
// up to now. A partition not used yet is made; store keeps it.
func (s *Server) extraLimiter(k *apiKey, i int, part string, now time.Time, store bool) limiter {
	if l, ok := k.extra[i][part]; ok {
		l.advance(now)
		return l
	}
	p := &s.extras[i]
	l := newLimiter(p.Shape, float64(p.Quota), float64(p.Quota), p.Window, s.origin, now, 0)
	if store {
		k.extra[i][part] = l
	}
	return l
}

// extraState is one partition of extra policy i as RateLimit reports it.
func (s *Server) extraState(k *apiKey, i int, part string, now time.Time) levelState {
	p := &s.extras[i]
	l := s.extraLimiter(k, i, part, now, false)
	return levelState{name: p.Name, quota: p.Quota, window: p.Window, unit: p.Unit, remaining: l.remaining(),
		full: max(int(l.full()), 1), reset: l.reset(p.Window), pk: part, partitioned: p.Partitioned}
}

// extraListing is every enforced extra policy as GET /v1/rate_limit reports
// it: a partitioned one by the key's partition with the smallest remaining
// share (a fresh one when none is used).
func (s *Server) extraListing(k *apiKey, now time.Time) []levelState {
	var out []levelState
	for i := range s.extras {
		if !s.extras[i].Enforced {
			continue
		}
		best := s.extraState(k, i, "", now)
		if s.extras[i].Partitioned {
			share := math.Inf(1)
			for part := range k.extra[i] {
				st := s.extraState(k, i, part, now)
				if sh := float64(st.remaining) / float64(st.full); sh < share || sh == share && st.reset > best.reset {
					best, share = st, sh
				}
			}
		}
		out = append(out, best)
	}
	return out
}

// pkParam is the pk parameter of a partition: a Byte Sequence.
func pkParam(part string) sfParam {
	return sfParam{"pk", ":" + base64.StdEncoding.EncodeToString([]byte(part)) + ":"}
}
