package sandbox

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// The policy names of bodo-api.md, in the order RateLimit-Policy lists them.
const (
	policyKey       = "key"
	policyWrite     = "write"
	policyParallel  = "parallel"
	policyPrincipal = "principal"
	policyOrg       = "org"
	policyDelete    = "delete"
	policyDeleteDay = "delete-day"
	policyEgress    = "egress"
	policyLockout   = "lockout"
)

// demand is what a call takes from the levels.
type demand struct {
	points  float64
	writes  int
	deletes int
	egress  bool        // the call reads records
	extra   []extraTake // from enforced extra policies
}

// refusal is why a call is not admitted.
type refusal struct {
	status   int
	code     string
	policy   string
	part     string // the partition of a partitioned extra policy
	detail   msg
	args     []any // of detail
	wait     time.Duration
	resetsAt time.Time
}

var refusalDetails = map[string]msg{
	policyKey:       {"Die Grenze dieses Schlüssels ist erreicht.", "This key's limit is reached."},
	policyWrite:     {"Die Schreibgrenze dieses Schlüssels ist erreicht.", "This key's write limit is reached."},
	policyParallel:  {"Zu viele gleichzeitige Aufrufe mit diesem Schlüssel.", "Too many concurrent calls with this key."},
	policyPrincipal: {"Die Grenze aller Schlüssel dieses Prinzipals ist erreicht.", "The limit of all keys of this principal is reached."},
	policyOrg:       {"Die Grenze der Organisation ist erreicht.", "The organisation's limit is reached."},
	policyDelete:    {"Die Löschgrenze dieses Schlüssels ist erreicht.", "This key's delete limit is reached."},
	policyDeleteDay: {"Das tägliche Löschkontingent dieses Schlüssels ist verbraucht; das Löschen ist bis zum Zurücksetzen pausiert.",
		"This key's daily delete quota is used up; deleting is paused until it resets."},
	policyEgress: {"Das Kontingent gelesener Datensätze dieses Schlüssels ist verbraucht.", "This key's quota of records read is used up."},
}

// shapeOf is the shape of a built-in level: Limits.Shapes, else
// Limits.Shape, else TokenBucket.
func (l Limits) shapeOf(policy string) Shape {
	if sh := l.Shapes[policy]; sh != "" {
		return sh
	}
	if l.Shape != "" {
		return l.Shape
	}
	return TokenBucket
}

// keyFull is what a fresh key level holds: KeyCapacity for a token bucket,
// KeyQuota for the window shapes.
func (l Limits) keyFull() int {
	if l.shapeOf(policyKey) == TokenBucket {
		return l.KeyCapacity
	}
	return l.KeyQuota
}

// advance brings every level of k (and its principal and org) up to now.
// Partitions of extra policies are brought up to date when they are used.
func (s *Server) advance(k *apiKey, now time.Time) {
	for _, l := range []limiter{k.key, k.write, k.del, k.share, k.principal.lim, s.org, k.deleteDay, k.egress} {
		l.advance(now)
	}
}

// need is one level a demand takes from.
type need struct {
	policy, part string
	l            limiter
	n            float64
	never        time.Duration
}

// needs are the levels d takes from, built-in ones first in policy order,
// then the enforced extra policies; advance first.
func (s *Server) needs(k *apiKey, now time.Time, d demand) []need {
	never := s.lim.Window
	ns := []need{{policyKey, "", k.key, d.points, never}}
	if d.writes > 0 {
		ns = append(ns, need{policyWrite, "", k.write, float64(d.writes), never})
	}
	if d.deletes > 0 {
		ns = append(ns, need{policyDelete, "", k.del, float64(d.deletes), never})
	}
	ns = append(ns,
		need{policyPrincipal, "", k.principal.lim, d.points, never},
		need{policyOrg, "", s.org, d.points, never},
		need{policyOrg, "", k.share, d.points, never})
	for _, t := range d.extra {
		p := &s.extras[t.pol]
		ns = append(ns, need{p.Name, t.part, s.extraLimiter(k, t.pol, t.part, now, false), t.n, p.Window})
	}
	return ns
}

// admit checks every level that applies to d, all or nothing; advance
// first. A demand no level could ever hold is refused with 400, never with
// 429. It changes nothing.
func (s *Server) admit(k *apiKey, now time.Time, d demand) *refusal {
	lim := s.lim
	needs := s.needs(k, now, d)
	for _, n := range needs {
		if n.n > n.l.full()+eps {
			return &refusal{status: http.StatusBadRequest, code: codeBadRequest,
				detail: msg{"Diese Anfrage braucht %g, die Grenze %q fasst höchstens %g; teile sie auf.",
					"This request needs %g, the limit %q holds at most %g; split it up."},
				args: []any{n.n, n.policy, n.l.full()}}
		}
	}
	if d.deletes > lim.DeleteDayQuota {
		return &refusal{status: http.StatusBadRequest, code: codeBadRequest,
			detail: msg{"Diese Anfrage löscht %d Datensätze, die Grenze %q erlaubt %d.", "This request deletes %d records, the limit %q allows %d."},
			args:   []any{d.deletes, policyDeleteDay, lim.DeleteDayQuota}}
	}

	var quota, limited *refusal
	pick := func(cur **refusal, r *refusal) {
		if *cur == nil || r.wait > (*cur).wait {
			*cur = r
		}
	}
	if d.deletes > 0 && !k.deleteDay.has(float64(d.deletes)) {
		at := k.deleteDay.resetsAt()
		pick(&quota, &refusal{code: codeQuotaExhausted, policy: policyDeleteDay, wait: at.Sub(now), resetsAt: at})
	}
	if d.egress && k.egress.used+eps >= k.egress.quota {
		at := k.egress.resetsAt()
		pick(&quota, &refusal{code: codeQuotaExhausted, policy: policyEgress, wait: at.Sub(now), resetsAt: at})
	}
	if quota != nil {
		quota.status = http.StatusTooManyRequests
		quota.detail = refusalDetails[quota.policy]
		return quota
	}
	if k.parallel >= lim.Parallel {
		pick(&limited, &refusal{policy: policyParallel, wait: time.Duration(100+rand.IntN(900)) * time.Millisecond})
	}
	for _, n := range needs {
		if !n.l.has(n.n) {
			pick(&limited, &refusal{policy: n.policy, part: n.part, wait: n.l.wait(n.n, n.never)})
		}
	}
	if limited != nil {
		limited.status = http.StatusTooManyRequests
		limited.code = codeRateLimited
		limited.detail = refusalDetails[limited.policy]
		switch {
		case limited.detail == msg{}:
			limited.detail = msg{"Die Grenze %q dieses Schlüssels ist erreicht.", "This key's limit %q is reached."}
			limited.args = []any{limited.policy}
		case limited.policy == policyOrg && s.org.has(d.points):
			limited.detail = msg{"Dieser Schlüssel hat seinen Anteil an der Grenze der Organisation ausgeschöpft.",
				"This key has used up its share of the organisation's limit."}
		}
		return limited
	}
	return nil
}

func (s *Server) charge(k *apiKey, now time.Time, d demand) {
	k.key.take(d.points)
	k.write.take(float64(d.writes))
	k.del.take(float64(d.deletes))
	k.principal.lim.take(d.points)
	s.org.take(d.points)
	k.share.take(d.points)
	k.deleteDay.take(float64(d.deletes))
	for _, t := range d.extra {
		s.extraLimiter(k, t.pol, t.part, now, true).take(t.n)
	}
	k.parallel++
}

// refusalAnswer is the 429 (or 400) for r.
func (s *Server) refusalAnswer(c *call, r *refusal) answer {
	p := c.problem(r.status, r.code, r.detail, r.args...)
	p.Policy = r.policy
	if r.status != http.StatusTooManyRequests {
		return problemAnswer(p)
	}
	if !r.resetsAt.IsZero() {
		p.ResetsAt = r.resetsAt.UTC().Format(time.RFC3339)
	}
	return retryable(p, r.wait)
}

// noteRefusal records a 429 of the levels against k and locks k when the
// refusals in the sliding window pass the limit. Lockout answers are noted
// for rejectionsLast60s but do not count towards the next lockout.
func (s *Server) noteRefusal(k *apiKey, now time.Time, lockout bool) {
	s.pruneRefusals(k, now)
	k.refusals = append(k.refusals, refusalMark{at: now, lockout: lockout})
	if lockout {
		return
	}
	n := 0
	for _, m := range k.refusals {
		if !m.lockout && !m.at.Before(k.countFrom) {
			n++
		}
	}
	if n > s.lim.LockoutRefusals {
		k.lockedUntil = now.Add(s.lim.LockoutDuration)
		k.countFrom = k.lockedUntil
		k.stats.Lockouts++
	}
}

func (s *Server) pruneRefusals(k *apiKey, now time.Time) {
	i := 0
	for i < len(k.refusals) && now.Sub(k.refusals[i].at) >= s.lim.LockoutWindow {
		i++
	}
	k.refusals = k.refusals[i:]
}

// lockoutAnswer is the answer to call c of a key locked until then.
func (s *Server) lockoutAnswer(c *call, until time.Time) answer {
	left := until.Sub(c.now)
	p := c.problem(http.StatusTooManyRequests, codeRateLimited,
		msg{"Dieser Schlüssel ist nach zu vielen Absagen bis %s gesperrt.", "This key is locked after too many refusals until %s."},
		until.UTC().Format(time.RFC3339))
	p.Policy = policyLockout
	a := retryable(p, left)
	a.header.Set("RateLimit", s.formatRateLimit([]levelState{{name: policyKey, remaining: 0, reset: left}}))
	return a
}

// levelState is one level as GET /v1/rate_limit and the RateLimit field
// report it.
type levelState struct {
	name        string
	quota       int
	window      time.Duration // 0 for parallel
	unit        string
	remaining   int
	full        int // remaining when the level is full
	reset       time.Duration
	capacity    int    // key only
	pk          string // the partition of a partitioned extra policy
	partitioned bool
}

// levels reports every built-in level of k at now, in policy order; advance
// first.
func (s *Server) levels(k *apiKey, now time.Time) []levelState {
	lim := s.lim
	never := lim.Window
	state := func(name, unit string, quota int, window time.Duration, l limiter) levelState {
		return levelState{name: name, quota: quota, window: window, unit: unit, remaining: l.remaining(),
			full: max(int(l.full()), 1), reset: l.reset(never)}
	}
	key := state(policyKey, "points", lim.KeyQuota, lim.Window, k.key)
	key.capacity = key.full
	org := state(policyOrg, "points", lim.OrgQuota, lim.Window, k.share)
	org.remaining = min(s.org.remaining(), k.share.remaining())
	org.reset = max(s.org.reset(never), k.share.reset(never))
	return []levelState{
		key,
		state(policyWrite, "requests", lim.WriteQuota, lim.Window, k.write),
		{name: policyParallel, quota: lim.Parallel, unit: "concurrent-requests", remaining: max(lim.Parallel-k.parallel, 0),
			full: lim.Parallel},
		state(policyPrincipal, "points", lim.PrincipalQuota, lim.Window, k.principal.lim),
		org,
		state(policyDelete, "requests", lim.DeleteQuota, lim.Window, k.del),
		state(policyDeleteDay, "requests", lim.DeleteDayQuota, lim.DayLength, k.deleteDay),
		state(policyEgress, "records", lim.EgressQuota, lim.EgressWindow, k.egress),
	}
}

// callStates are the levels that apply to a call of demand d: key,
// principal and org, write, delete, delete-day and egress when the call
// counts against them, parallel only when no slot is left, and the
// partitions of the enforced extra policies that cover the call.
func (s *Server) callStates(k *apiKey, now time.Time, d demand) []levelState {
	s.advance(k, now)
	var out []levelState
	for _, st := range s.levels(k, now) {
		switch st.name {
		case policyWrite:
			if d.writes == 0 {
				continue
			}
		case policyDelete, policyDeleteDay:
			if d.deletes == 0 {
				continue
			}
		case policyEgress:
			if !d.egress {
				continue
			}
		case policyParallel:
			if st.remaining > 0 {
				continue
			}
		}
		out = append(out, st)
	}
	for _, t := range d.extra {
		out = append(out, s.extraState(k, t.pol, t.part, now))
	}
	return out
}

// narrowest is the index of the state with the smallest remaining share of
// its full level; the first of equals.
func narrowest(states []levelState) int {
	best, bestShare := 0, math.Inf(1)
	for i, st := range states {
		if share := float64(st.remaining) / float64(max(st.full, 1)); share < bestShare {
			best, bestShare = i, share
		}
	}
	return best
}

// rateLimitField is the RateLimit field for a call of demand d: the level
// that applies to d with the smallest remaining share of its full level
// (WithNarrowestOfAll: of all the key's levels). With noisy headers a
// second level may follow or precede it.
func (s *Server) rateLimitField(k *apiKey, now time.Time, d demand) string {
	var states []levelState
	if s.cfg.narrowestAll {
		states = s.keyStates(k, now)
	} else {
		states = s.callStates(k, now, d)
	}
	i := narrowest(states)
	return s.formatRateLimit(s.withSecond(states, i))
}

// refusedField is the RateLimit field of a refusal of a call of demand d:
// the refusing level first (with noisy headers, maybe with another level of
// the call).
func (s *Server) refusedField(k *apiKey, now time.Time, d demand, r *refusal) string {
	states := s.callStates(k, now, d)
	for i, st := range states {
		if st.name == r.policy && st.pk == r.part {
			if r.policy == policyParallel {
				states[i].reset = r.wait
			}
			return s.formatRateLimit(s.withSecond(states, i))
		}
	}
	return s.formatRateLimit([]levelState{s.levels(k, now)[0]})
}

// rateLimitMembers are the members of a RateLimit field for states.
func rateLimitMembers(states []levelState) []sfMember {
	ms := make([]sfMember, len(states))
	for i, st := range states {
		m := sfMember{name: st.name, params: []sfParam{
			{"r", strconv.Itoa(max(st.remaining, 0))},
			{"t", strconv.FormatInt(ceilDiv(st.reset, time.Second), 10)},
		}}
		if st.partitioned {
			m.params = append(m.params, pkParam(st.pk))
		}
		ms[i] = m
	}
	return ms
}

func (s *Server) formatRateLimit(states []levelState) string {
	ms := rateLimitMembers(states)
	if s.noise != nil {
		return s.noise.rateLimit(ms)
	}
	return joinMembers(ms)
}

// policyMembers are the members of RateLimit-Policy: every level with its
// quota, window in whole seconds and unit ("requests" is the default and
// left out), then the announced extra policies (a partitioned one with the
// partition of path).
func (s *Server) policyMembers(path string) []sfMember {
	lim := s.lim
	type pol struct {
		name   string
		quota  int
		window time.Duration
		unit   string
	}
	pols := []pol{
		{policyKey, lim.KeyQuota, lim.Window, "points"},
		{policyWrite, lim.WriteQuota, lim.Window, ""},
		{policyParallel, lim.Parallel, 0, "concurrent-requests"},
		{policyPrincipal, lim.PrincipalQuota, lim.Window, "points"},
		{policyOrg, lim.OrgQuota, lim.Window, "points"},
		{policyDelete, lim.DeleteQuota, lim.Window, ""},
		{policyDeleteDay, lim.DeleteDayQuota, lim.DayLength, ""},
		{policyEgress, lim.EgressQuota, lim.EgressWindow, "records"},
	}
	var ms []sfMember
	add := func(name string, quota int, window time.Duration, unit string) *sfMember {
		m := sfMember{name: name, params: []sfParam{{"q", strconv.Itoa(quota)}}}
		if window > 0 {
			m.params = append(m.params, sfParam{"w", strconv.FormatInt(windowSeconds(window), 10)})
		}
		if unit != "" && unit != unitRequests {
			m.params = append(m.params, sfParam{"qu", sfString(unit)})
		}
		ms = append(ms, m)
		return &ms[len(ms)-1]
	}
	for _, p := range pols {
		add(p.name, p.quota, p.window, p.unit)
	}
	for _, p := range s.extras {
		if p.Hidden {
			continue
		}
		m := add(p.Name, p.Quota, p.Window, p.Unit)
		if p.Partitioned {
			m.params = append(m.params, pkParam(path))
		}
	}
	return ms
}

// policyField is the RateLimit-Policy field lines for an answer to a
// request of path.
func (s *Server) policyField(path string) []string {
	if s.noise != nil {
		return s.noise.policyLines(append(s.policyMembers(path), s.noise.fakes...))
	}
	if s.policyHeader != nil {
		return s.policyHeader
	}
	return []string{joinMembers(s.policyMembers(path))}
}

func windowSeconds(w time.Duration) int64 { return max(ceilDiv(w, time.Second), 1) }
