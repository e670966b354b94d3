package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// stats is the part of bodo-staging's GET /__stats?series=1 that a row
// needs (see ../shared/staging/README.md).
type stats struct {
	Config struct {
		Scale       float64 `json:"scale"`
		ForeignLoad float64 `json:"foreignLoad"`
		Quotas      struct {
			Key             float64 `json:"key"`
			KeyCapacity     float64 `json:"keyCapacity"`
			Write           float64 `json:"write"`
			Parallel        int     `json:"parallel"`
			Principal       float64 `json:"principal"`
			Org             float64 `json:"org"`
			OrgSharePercent float64 `json:"orgSharePercent"`
		} `json:"quotas"`
	} `json:"config"`
	// Foreign is what the foreign load took (-foreign-load): less than
	// asked when the org had nothing left.
	Foreign struct {
		TakenFromOrgs float64 `json:"takenFromOrgs"`
	} `json:"foreignLoad"`
	StartedAt time.Time           `json:"startedAt"` // the time series' t=0
	Now       time.Time           `json:"now"`
	Keys      map[string]keyStats `json:"keys"`
}

// keyStats is what the server measured of one key.
type keyStats struct {
	Requests              int            `json:"requests"`
	Refused               int            `json:"refused"`
	RefusedByCode         map[string]int `json:"refusedByCode"`
	Overloaded            int            `json:"overloaded"`
	AcceptedPoints        float64        `json:"acceptedPoints"`
	MaxInFlight           int            `json:"maxInFlight"`
	Lockouts              int            `json:"lockouts"`
	Early                 int            `json:"early"`
	EarlyEvents           []string       `json:"earlyEvents"`
	DuplicateContactNames int            `json:"duplicateContactNames"`
	DuplicateInvoicePairs int            `json:"duplicateInvoicePairs"`
	MoneyRepeatedWithKey  int            `json:"moneyRepeatedWithNewKey"`
	FirstRequestAt        time.Time      `json:"firstRequestAt"`
	TimeSeries            struct {
		Rows []struct {
			T        int     `json:"t"`
			Requests int     `json:"requests"`
			Points   float64 `json:"points"`
		} `json:"rows"`
	} `json:"timeSeries"`
}

func readStats(r io.Reader) (*stats, error) {
	var s stats
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if s.Config.Scale <= 0 {
		return nil, fmt.Errorf("stats: scale %v", s.Config.Scale)
	}
	return &s, nil
}

// stallAfter is how many contract seconds without a request, while the
// agents run and no wait the server announced holds every call (waitLog),
// count as a stall: the sandbox profiles' stallWindow.
const stallAfter = 10

// firstMinutes is the start of a run that has its own goodput target.
const firstMinutes = 2 * 60

// result is one run as the server measured it.
type result struct {
	Secs         float64 // contract seconds from the key's first request to the end of the run
	Goodput      float64 // points accepted against allowance over the run
	GoodputStart float64 // the same over the first firstMinutes (the run's length when shorter)
	// WritesStart is how many writes the server answered with a 2xx in
	// those minutes (-1: not known), of WritesAllowed: while the write
	// level binds, an agent's reads wait behind its next write.
	WritesStart   int
	WritesAllowed float64
	Requests      int
	Refused       int // refusals the client caused: all but the injected OVERLOADED
	Lockouts      int
	Early         int
	FirstEarly    string
	Stalls        int
	StallsAt      []int // contract seconds from the first request to where each stall began
	MaxInFlight   int
	Parallel      int
	Duplicates    int
	Errors        int // calls the agents saw fail
	Processes     int
	Agents        int // in each process
}

// allowance is what the key may use in secs contract seconds: the key
// bucket's capacity and refill, or, when a foreign load eats the org, what
// the org leaves, and beside a peer (peerKey), what the principal leaves
// of what the peer took, if less. The org announces a quota a window and no
// capacity, and lets through exactly that on staging (the key and the
// foreign load together take its quota each minute, never a bucket's
// capacity on top); foreign is what the load took in those seconds.
func (s *stats) allowance(secs, foreign, peer float64) float64 {
	q := s.Config.Quotas
	key := q.KeyCapacity + q.Key*secs/60
	if peer > 0 {
		// The principal is a sliding log on staging, as the org is: its
		// quota for each minute the time begins, less what the peer took.
		key = min(key, q.Principal*math.Ceil(secs/60)-peer)
	}
	if s.Config.ForeignLoad == 0 {
		return key
	}
	return min(key, q.Org*secs/60-foreign)
}

// writesAllowed is what the write level allows in secs contract seconds:
// q a minute is at most q in any minute, so q for each minute the time
// begins (on every shape but a bucket that holds more than q).
func (s *stats) writesAllowed(secs float64) float64 {
	return s.Config.Quotas.Write * math.Ceil(secs/60)
}

// resultOf measures key's run, which ended when the stats were read, with
// the key's writes from log (nil: not known), what the foreign load had
// taken from the org at the end of the run's first minutes (negative: not
// known, taken as its share of the whole run's) and the waits the server
// announced that held every call of the key.
func (s *stats) resultOf(key string, log *writeLog, foreignStart float64, waits []span) (result, error) {
	k, ok := s.Keys[key]
	if !ok || k.Requests == 0 {
		return result{}, fmt.Errorf("stats: no request of key %s", key)
	}
	r := result{WritesStart: -1, Requests: k.Requests, Refused: k.Refused - k.Overloaded, Lockouts: k.Lockouts, Early: k.Early,
		MaxInFlight: k.MaxInFlight, Parallel: s.Config.Quotas.Parallel,
		Duplicates: k.DuplicateContactNames + k.DuplicateInvoicePairs + k.MoneyRepeatedWithKey}
	if len(k.EarlyEvents) > 0 {
		r.FirstEarly = k.EarlyEvents[0]
	}
	r.Secs = s.Now.Sub(k.FirstRequestAt).Seconds() * s.Config.Scale
	peer := s.Keys[peerKey]
	r.Goodput = k.AcceptedPoints / s.allowance(r.Secs, s.Foreign.TakenFromOrgs, peer.AcceptedPoints)

	rows := k.TimeSeries.Rows
	first := -1
	for i, row := range rows {
		if row.Requests > 0 {
			first = i
			break
		}
	}
	var startPoints, peerStart float64
	for _, row := range peer.TimeSeries.Rows {
		if first >= 0 && row.T >= rows[first].T && row.T-rows[first].T < firstMinutes {
			peerStart += row.Points
		}
	}
	idle := 0
	for _, row := range rows[max(first, 0):] {
		if row.T-rows[first].T < firstMinutes {
			startPoints += row.Points
		}
		if row.Requests > 0 || held(waits, s.StartedAt.Add(time.Duration((float64(row.T)+0.5)/s.Config.Scale*float64(time.Second)))) {
			idle = 0
			continue
		}
		if idle++; idle == stallAfter {
			r.Stalls++
			r.StallsAt = append(r.StallsAt, row.T-rows[first].T-stallAfter+1)
		}
	}
	short := min(firstMinutes, r.Secs)
	if foreignStart < 0 {
		foreignStart = s.Foreign.TakenFromOrgs * short / max(r.Secs, 1)
	}
	r.GoodputStart = startPoints / s.allowance(short, foreignStart, peerStart)
	if log != nil {
		r.WritesStart, r.WritesAllowed = log.before(short), s.writesAllowed(short)
	}
	return r, nil
}

// held reports whether one of waits covers the moment at (the middle of a
// row: the sandbox looks at one moment a second too).
func held(waits []span, at time.Time) bool {
	for _, w := range waits {
		if !at.Before(w.from) && at.Before(w.to) {
			return true
		}
	}
	return false
}
