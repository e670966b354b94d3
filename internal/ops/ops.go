// Package ops describes the operations of the bodo API as openapi.json
// declares them: method, path template, cost in points and class. The table
// itself (ops_gen.go) is generated from openapi.json by go generate; nothing
// here is typed by hand except the types.
package ops

import "strings"

// Class is an operation's x-bodo-class: which levels besides the key bucket
// it counts against.
type Class string

// The classes of bodo-api.md.
const (
	ClassRead    Class = "read"
	ClassWrite   Class = "write"
	ClassDelete  Class = "delete"
	ClassMoney   Class = "money"
	ClassLongRun Class = "long-run"
	ClassBatch   Class = "batch"
)

// IsWrite reports whether the class counts against the write level: write,
// delete, money and long-run do.
func (c Class) IsWrite() bool {
	switch c {
	case ClassWrite, ClassDelete, ClassMoney, ClassLongRun:
		return true
	}
	return false
}

// Egress is an operation's x-bodo-egress: what a read counts against the
// egress level.
type Egress string

// The egress kinds.
const (
	EgressNone Egress = ""     // nothing (writes, and reads of no records: me, rate_limit, openapi.json)
	EgressOne  Egress = "one"  // one record (a get, a count)
	EgressPage Egress = "page" // the records a list returns, at most its limit
)

// Operation is one entry of the generated table.
type Operation struct {
	ID     string // operationId, e.g. "listContacts"
	Method string // HTTP method, upper case
	Path   string // path template, e.g. "/v1/contacts/{id}"
	Cost   int    // x-bodo-cost: points charged for a call
	Class  Class  // x-bodo-class
	// Idempotent is true for methods that may be repeated without a second
	// effect (GET, HEAD, PUT, DELETE). POST and PATCH are idempotent only
	// with an Idempotency-Key.
	Idempotent bool
	// KeyRequired is true when the server refuses the call without an
	// Idempotency-Key (money actions).
	KeyRequired bool
	// Egress says what a read counts against the egress level.
	Egress Egress
	// Conditional is true for a GET that answers an ETag and takes
	// If-None-Match (a 304 then costs its points but no egress records).
	Conditional bool
	// ParamCosts are surcharges for query parameters that, when given a
	// non-empty value, add points (x-bodo-cost on the parameter: q adds 5).
	ParamCosts map[string]int
	// SumOfParts is true when x-bodo-cost states the rule {"sum": "parts"}
	// instead of a number (batch): the call costs the sum of its parts'
	// costs, which the caller computes from the body; Cost is then 0.
	SumOfParts bool
}

// CostFor returns the points a call costs given its query parameters:
// Cost plus the surcharge of every costed parameter that is present and
// non-empty. A batch's cost is the sum of its parts (SumOfParts) and is
// computed by the caller from the body.
func (o *Operation) CostFor(query func(name string) string) int {
	cost := o.Cost
	for name, extra := range o.ParamCosts {
		if query(name) != "" {
			cost += extra
		}
	}
	return cost
}

// ByID returns the operation with the given operationId.
func ByID(id string) (*Operation, bool) {
	for i := range Table {
		if Table[i].ID == id {
			return &Table[i], true
		}
	}
	return nil, false
}

// Match finds the operation for a concrete method and path (without query),
// such as "GET" and "/v1/contacts/con_01…", and returns its path parameters.
// A literal segment wins over a parameter, so /v1/contacts/count is
// countContacts, not getContact.
func Match(method, path string) (*Operation, map[string]string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var best *Operation
	var bestParams map[string]string
	bestLiterals := -1
	for i := range Table {
		op := &Table[i]
		if op.Method != method {
			continue
		}
		tsegs := strings.Split(strings.Trim(op.Path, "/"), "/")
		if len(tsegs) != len(segs) {
			continue
		}
		params := map[string]string{}
		literals := 0
		ok := true
		for j, t := range tsegs {
			if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
				if segs[j] == "" {
					ok = false
					break
				}
				params[t[1:len(t)-1]] = segs[j]
				continue
			}
			if t != segs[j] {
				ok = false
				break
			}
			literals++
		}
		if ok && literals > bestLiterals {
			best, bestParams, bestLiterals = op, params, literals
		}
	}
	return best, bestParams, best != nil
}
