package sandbox

import (
	"fmt"
	"net/url"
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
// answer's retryAfterMs.
func (k *apiKey) announce(w waitKey, now time.Time, latency, wait time.Duration) {
	end := now.Add(time.Duration(ceilDiv(wait, time.Millisecond)) * time.Millisecond)
	m, id := k.waitLevel, w.id()
	if w.all {
		m, id = k.waitAll, w.policy
	}
	if cur, ok := m[id]; !ok || end.After(cur.end) {
		from := now.Add(latency)
		if ok && now.Before(cur.end) && cur.from.Before(from) {
			from = cur.from
		}
		m[id] = announced{from: from, end: end}
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
	sent, oldest := now.Add(-c.legs.up), now.Add(-s.cfg.maxUp)
	within := func(w announced) bool { return sent.After(w.from) && sent.Before(w.end) }
	for policy, w := range k.waitAll {
		switch {
		case !oldest.Before(w.end):
			delete(k.waitAll, policy)
		case within(w):
			early = append(early, policy)
			waits = append(waits, w)
		}
	}
	if routed && len(k.waitLevel) > 0 {
		for id, w := range k.waitLevel {
			if !oldest.Before(w.end) {
				delete(k.waitLevel, id)
			}
		}
		for _, w := range s.takesFrom(d) {
			if a, ok := k.waitLevel[w.id()]; ok && within(a) {
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
		running := func(a announced) bool { return now.After(a.from) && now.Before(a.end) }
		for _, a := range k.waitAll {
			if running(a) {
				return true
			}
		}
		for _, w := range s.takesFrom(d) {
			if a, ok := k.waitLevel[w.id()]; ok && running(a) {
				return true
			}
		}
		return false
	})
}
