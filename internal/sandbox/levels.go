package sandbox

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
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

// eps absorbs float rounding so that waiting exactly retryAfterMs is enough.
const eps = 1e-9

// bucket is a token bucket evaluated lazily: level is brought up to date
// from the time elapsed whenever it is looked at. drain is a constant
// consumption by someone else (the foreign load on the org bucket); it takes
// at most what the bucket holds.
type bucket struct {
	level, capacity float64
	rate, drain     float64 // points per second
	at              time.Time
}

func newBucket(capacity float64, quota int, window time.Duration, now time.Time) *bucket {
	return &bucket{level: capacity, capacity: capacity, rate: float64(quota) / window.Seconds(), at: now}
}

func (b *bucket) advance(now time.Time) {
	if !now.After(b.at) {
		return
	}
	dt := now.Sub(b.at).Seconds()
	b.level = min(max(b.level+(b.rate-b.drain)*dt, 0), b.capacity)
	b.at = now
}

func (b *bucket) has(n float64) bool { return b.level+eps >= n }

func (b *bucket) take(n float64) { b.level = max(b.level-n, 0) }

func (b *bucket) remaining() int { return int(math.Floor(b.level + eps)) }

// wait is how long until n points are there; never is returned when the
// foreign drain eats every refill.
func (b *bucket) wait(n float64, never time.Duration) time.Duration {
	if b.has(n) {
		return 0
	}
	net := b.rate - b.drain
	if net <= 0 {
		return never
	}
	return time.Duration(math.Ceil((n - b.level) / net * 1e9))
}

func (b *bucket) toFull(never time.Duration) time.Duration {
	if b.level+eps >= b.capacity {
		return 0
	}
	return b.wait(b.capacity, never)
}

// fixedWindow is a quota counted in fixed windows from the server's origin.
type fixedWindow struct {
	length time.Duration
	idx    int64
	used   int
}

func (w *fixedWindow) advance(origin, now time.Time) {
	if i := int64(now.Sub(origin) / w.length); i != w.idx {
		w.idx, w.used = i, 0
	}
}

func (w *fixedWindow) resetsAt(origin time.Time) time.Time {
	return origin.Add(time.Duration(w.idx+1) * w.length)
}

// demand is what a call takes from the levels.
type demand struct {
	points  float64
	writes  int
	deletes int
	egress  bool // the call reads records
}

// refusal is why a call is not admitted.
type refusal struct {
	status   int
	code     string
	policy   string
	detail   string
	wait     time.Duration
	resetsAt time.Time
}

var refusalDetails = map[string]string{
	policyKey:       "Die Grenze dieses Schlüssels ist erreicht.",
	policyWrite:     "Die Schreibgrenze dieses Schlüssels ist erreicht.",
	policyParallel:  "Zu viele gleichzeitige Aufrufe mit diesem Schlüssel.",
	policyPrincipal: "Die Grenze aller Schlüssel dieses Prinzipals ist erreicht.",
	policyOrg:       "Die Grenze der Organisation ist erreicht.",
	policyDelete:    "Die Löschgrenze dieses Schlüssels ist erreicht.",
	policyDeleteDay: "Das tägliche Löschkontingent dieses Schlüssels ist verbraucht; das Löschen ist bis zum Zurücksetzen pausiert.",
	policyEgress:    "Das Kontingent gelesener Datensätze dieses Schlüssels ist verbraucht.",
}

// advance brings every level of k (and its principal and org) up to now.
func (s *Server) advance(k *apiKey, now time.Time) {
	for _, b := range []*bucket{k.bucket, k.write, k.del, k.share, k.principal.bucket, s.orgBucket} {
		b.advance(now)
	}
	k.deleteDay.advance(s.origin, now)
	k.egress.advance(s.origin, now)
}

// admit checks every level that applies to d, all or nothing. A demand no
// level could ever hold is refused with 400, never with 429.
func (s *Server) admit(k *apiKey, now time.Time, d demand) *refusal {
	lim := s.lim
	never := lim.Window
	type need struct {
		policy string
		b      *bucket
		n      float64
	}
	needs := []need{{policyKey, k.bucket, d.points}}
	if d.writes > 0 {
		needs = append(needs, need{policyWrite, k.write, float64(d.writes)})
	}
	if d.deletes > 0 {
		needs = append(needs, need{policyDelete, k.del, float64(d.deletes)})
	}
	needs = append(needs,
		need{policyPrincipal, k.principal.bucket, d.points},
		need{policyOrg, s.orgBucket, d.points},
		need{policyOrg, k.share, d.points})
	for _, n := range needs {
		if n.n > n.b.capacity+eps {
			return &refusal{status: http.StatusBadRequest, code: codeBadRequest,
				detail: fmt.Sprintf("Diese Anfrage braucht %g, die Grenze %q fasst höchstens %g; teile sie auf.", n.n, n.policy, n.b.capacity)}
		}
	}
	if d.deletes > lim.DeleteDayQuota {
		return &refusal{status: http.StatusBadRequest, code: codeBadRequest,
			detail: fmt.Sprintf("Diese Anfrage löscht %d Datensätze, die Grenze %q erlaubt %d.", d.deletes, policyDeleteDay, lim.DeleteDayQuota)}
	}

	var quota, limited *refusal
	pick := func(cur **refusal, r *refusal) {
		if *cur == nil || r.wait > (*cur).wait {
			*cur = r
		}
	}
	if d.deletes > 0 && k.deleteDay.used+d.deletes > lim.DeleteDayQuota {
		at := k.deleteDay.resetsAt(s.origin)
		pick(&quota, &refusal{code: codeQuotaExhausted, policy: policyDeleteDay, wait: at.Sub(now), resetsAt: at})
	}
	if d.egress && k.egress.used >= lim.EgressQuota {
		at := k.egress.resetsAt(s.origin)
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
		if !n.b.has(n.n) {
			pick(&limited, &refusal{policy: n.policy, wait: n.b.wait(n.n, never)})
		}
	}
	if limited != nil {
		limited.status = http.StatusTooManyRequests
		limited.code = codeRateLimited
		limited.detail = refusalDetails[limited.policy]
		if limited.policy == policyOrg && s.orgBucket.has(d.points) {
			limited.detail = "Dieser Schlüssel hat seinen Anteil an der Grenze der Organisation ausgeschöpft."
		}
		return limited
	}
	return nil
}

func (s *Server) charge(k *apiKey, d demand) {
	k.bucket.take(d.points)
	k.write.take(float64(d.writes))
	k.del.take(float64(d.deletes))
	k.principal.bucket.take(d.points)
	s.orgBucket.take(d.points)
	k.share.take(d.points)
	k.deleteDay.used += d.deletes
	k.parallel++
}

// refusalAnswer is the 429 (or 400) for r.
func (s *Server) refusalAnswer(c *call, r *refusal) answer {
	p := problem{Status: r.status, Code: r.code, Detail: r.detail, Instance: c.path, RequestID: c.reqID, Policy: r.policy}
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

func (s *Server) lockoutAnswer(c *call, k *apiKey) answer {
	left := k.lockedUntil.Sub(c.now)
	a := retryable(problem{
		Status: http.StatusTooManyRequests, Code: codeRateLimited, Policy: policyLockout,
		Detail:   fmt.Sprintf("Dieser Schlüssel ist nach zu vielen Absagen bis %s gesperrt.", k.lockedUntil.UTC().Format(time.RFC3339)),
		Instance: c.path, RequestID: c.reqID,
	}, left)
	a.header.Set("RateLimit", rateLimitItem(policyKey, 0, left))
	return a
}

// levelState is one level as GET /v1/rate_limit and the RateLimit field
// report it.
type levelState struct {
	name      string
	quota     int
	window    time.Duration // 0 for parallel
	unit      string
	remaining int
	full      int // remaining when the level is full
	reset     time.Duration
	capacity  int // key only
}

// levels reports every level of k at now, in policy order; advance first.
func (s *Server) levels(k *apiKey, now time.Time) []levelState {
	lim := s.lim
	never := lim.Window
	windowState := func(name, unit string, quota int, w *fixedWindow) levelState {
		st := levelState{name: name, quota: quota, window: w.length, unit: unit, remaining: max(quota-w.used, 0), full: quota}
		if w.used > 0 {
			st.reset = w.resetsAt(s.origin).Sub(now)
		}
		return st
	}
	orgRemaining := min(s.orgBucket.remaining(), k.share.remaining())
	return []levelState{
		{name: policyKey, quota: lim.KeyQuota, window: lim.Window, unit: "points", remaining: k.bucket.remaining(),
			full: lim.KeyCapacity, reset: k.bucket.toFull(never), capacity: lim.KeyCapacity},
		{name: policyWrite, quota: lim.WriteQuota, window: lim.Window, unit: "requests", remaining: k.write.remaining(),
			full: lim.WriteQuota, reset: k.write.toFull(never)},
		{name: policyParallel, quota: lim.Parallel, unit: "concurrent-requests", remaining: max(lim.Parallel-k.parallel, 0),
			full: lim.Parallel},
		{name: policyPrincipal, quota: lim.PrincipalQuota, window: lim.Window, unit: "points", remaining: k.principal.bucket.remaining(),
			full: lim.PrincipalQuota, reset: k.principal.bucket.toFull(never)},
		{name: policyOrg, quota: lim.OrgQuota, window: lim.Window, unit: "points", remaining: orgRemaining,
			full: max(int(k.share.capacity), 1), reset: max(s.orgBucket.toFull(never), k.share.toFull(never))},
		{name: policyDelete, quota: lim.DeleteQuota, window: lim.Window, unit: "requests", remaining: k.del.remaining(),
			full: lim.DeleteQuota, reset: k.del.toFull(never)},
		windowState(policyDeleteDay, "requests", lim.DeleteDayQuota, &k.deleteDay),
		windowState(policyEgress, "records", lim.EgressQuota, &k.egress),
	}
}

// rateLimitField is the RateLimit field for a call of demand d: the level
// that applies to d with the smallest remaining share of its full level.
// parallel only competes when no slot is left.
func (s *Server) rateLimitField(k *apiKey, now time.Time, d demand) string {
	s.advance(k, now)
	var best *levelState
	bestShare := math.Inf(1)
	states := s.levels(k, now)
	for i := range states {
		st := &states[i]
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
		if share := float64(st.remaining) / float64(max(st.full, 1)); share < bestShare {
			best, bestShare = st, share
		}
	}
	return rateLimitItem(best.name, best.remaining, best.reset)
}

// refusedField is the RateLimit field of a refusal: the refusing level.
func (s *Server) refusedField(k *apiKey, now time.Time, r *refusal) string {
	s.advance(k, now)
	for _, st := range s.levels(k, now) {
		if st.name == r.policy {
			reset := st.reset
			if r.policy == policyParallel {
				reset = r.wait
			}
			return rateLimitItem(st.name, st.remaining, reset)
		}
	}
	return rateLimitItem(policyKey, k.bucket.remaining(), k.bucket.toFull(s.lim.Window))
}

func rateLimitItem(name string, remaining int, reset time.Duration) string {
	return fmt.Sprintf("%q;r=%d;t=%d", name, max(remaining, 0), ceilDiv(reset, time.Second))
}

// policyField is the RateLimit-Policy field: every level with its quota,
// window in whole seconds and unit ("requests" is the default and left out).
func policyField(lim Limits) string {
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
	items := make([]string, len(pols))
	for i, p := range pols {
		var b strings.Builder
		fmt.Fprintf(&b, "%q;q=%d", p.name, p.quota)
		if p.window > 0 {
			b.WriteString(";w=" + strconv.FormatInt(windowSeconds(p.window), 10))
		}
		if p.unit != "" {
			fmt.Fprintf(&b, ";qu=%q", p.unit)
		}
		items[i] = b.String()
	}
	return strings.Join(items, ", ")
}

func windowSeconds(w time.Duration) int64 { return max(ceilDiv(w, time.Second), 1) }
