package sandbox

import (
	"fmt"
	"net/url"
	"slices"
	"time"
)

// earlyTime is how KeyStats.FirstEarly writes a moment.
const earlyTime = "15:04:05.000000"

// waitAll names a wait announced for every request of a key.
func waitAll(policy string) waitKey { return waitKey{all: true, policy: policy} }

// waitID names a wait announced for the requests that take from a level
// (and, for a partitioned extra policy, from a partition of it).
func waitID(policy, part string) waitKey { return waitKey{policy: policy, part: part} }

type waitKey struct {
	all          bool
	policy, part string
}

func (w waitKey) id() string { return w.policy + "\x00" + w.part }

// announced is a wait an answer asked for: it binds the requests that
// arrive after the answer reached the client (from) until it is over (end).
// A request already on its way when the answer arrived, or sent at that very
// moment, is not early: no client could have held it.
type announced struct{ from, end time.Time }

// announce notes that an answer to k, delivered latency after now, asked it
// to wait: until now plus the wait rounded up to a millisecond, the
// answer's retryAfterMs. Each answer's wait is kept apart, from when that
// answer arrives: one answered later may arrive sooner (WithJitteredLatency),
// and a request sent after one wait ended and before the next answer
// arrived could not have been held.
func (k *apiKey) announce(w waitKey, now time.Time, latency, wait time.Duration) {
	end := now.Add(time.Duration(ceilDiv(wait, time.Millisecond)) * time.Millisecond)
	m, id := k.waitLevel, w.id()
	if w.all {
		m, id = k.waitAll, w.policy
	}
	a := announced{from: now.Add(latency), end: end}
	for _, cur := range m[id] {
		if !a.from.Before(cur.from) && !cur.end.Before(a.end) {
			return // within a wait already announced
		}
	}
	m[id] = append(m[id], a)
}

// within is the first of ws that at holds within (after from, before end).
func within(ws []announced, at time.Time) (announced, bool) {
	for _, w := range ws {
		if at.After(w.from) && at.Before(w.end) {
			return w, true
		}
	}
	return announced{}, false
}

// prune drops the waits of m over before oldest.
func prune(m map[string][]announced, oldest time.Time) {
	for id, ws := range m {
		ws = slices.DeleteFunc(ws, func(w announced) bool { return !oldest.Before(w.end) })
		if len(ws) == 0 {
			delete(m, id)
		} else {
			m[id] = ws
		}
	}
}

// noteEarly counts a request of k that arrives at now before a wait
// announced to k is over: one for every request, or, when the request was
// routed (d is what it takes), one for a level d takes from. With
// WithJitteredLatency it is the moment the request was sent (now less its
// way here) that must not fall within the wait. Waits that are over for
// every request still on its way are forgotten.
func (s *Server) noteEarly(k *apiKey, c *call, now time.Time, routed bool, d demand) {
	var early []string
	var waits []announced
	sent := now.Add(-c.legs.up)
	prune(k.waitAll, now.Add(-s.cfg.maxUp))
	for policy, ws := range k.waitAll {
		if w, ok := within(ws, sent); ok {
			early = append(early, policy)
			waits = append(waits, w)
		}
	}
	if routed && len(k.waitLevel) > 0 {
		prune(k.waitLevel, now.Add(-s.cfg.maxUp))
		for _, w := range s.takesFrom(d) {
			if a, ok := within(k.waitLevel[w.id()], sent); ok {
				early = append(early, w.policy)
				waits = append(waits, a)
			}
		}
	}
	seen := map[string]bool{}
	for _, policy := range early {
		if !seen[policy] {
			seen[policy] = true
			k.stats.EarlyByPolicy[policy]++
		}
	}
	if len(early) > 0 {
		k.stats.EarlyRequests++
		if len(k.stats.FirstEarly) < maxEarlyKept {
			at := now.Format(earlyTime)
			if c.legs.up > 0 {
				at += " (sent at " + sent.Format(earlyTime) + ")"
			}
			k.stats.FirstEarly = append(k.stats.FirstEarly, fmt.Sprintf("%s %s at %s, early for %s: the wait ran from %s to %s",
				c.method, c.path, at, early[0], waits[0].from.Format(earlyTime), waits[0].end.Format(earlyTime)))
		}
	}
}

// takesFrom are the levels a call of demand d takes from, parallel aside.
func (s *Server) takesFrom(d demand) []waitKey {
	ws := []waitKey{waitID(policyKey, ""), waitID(policyPrincipal, ""), waitID(policyOrg, "")}
	if d.writes > 0 {
		ws = append(ws, waitID(policyWrite, ""))
	}
	if d.deletes > 0 {
		ws = append(ws, waitID(policyDelete, ""), waitID(policyDeleteDay, ""))
	}
	if d.egress {
		ws = append(ws, waitID(policyEgress, ""))
	}
	for _, t := range d.extra {
		ws = append(ws, waitID(s.extras[t.pol].Name, t.part))
	}
	return ws
}

// WouldComeEarly reports whether a call of operationID with query by
// key, arriving now, would come before a wait the server announced to
// the key for it (KeyStats.EarlyRequests): one for every request, or one
// for a level the call takes from. A client that keeps to the waits sends
// no such call, whether or not the levels would admit it (WouldAccept). An
// unknown key or operation, and batch, never come early.
func (s *Server) WouldComeEarly(key, operationID string, query url.Values) bool {
	return s.judge(key, operationID, query, func(k *apiKey, d demand, now time.Time) bool {
		for _, ws := range k.waitAll {
			if _, ok := within(ws, now); ok {
				return true
			}
		}
		for _, w := range s.takesFrom(d) {
			if _, ok := within(k.waitLevel[w.id()], now); ok {
				return true
			}
		}
		return false
	})
}
