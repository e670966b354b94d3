package agents

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// Stats counts what a run did, from the client's side: calls and their
// outcome, and (through Transport) every request, its status and the points
// the server accepted. It is safe for concurrent use.
type Stats struct {
	mu sync.Mutex
	c  Counts
}

// Counts are the numbers of a run.
type Counts struct {
	start     time.Time
	Calls     int
	OK        int
	Requests  int
	Refusals  map[string]int // 429 and 503 answers by problem code
	Status429 int            // 429 answers
	Status503 int            // 503 answers
	Errors    map[string]int // failed calls by kind
	GaveUp    int            // calls that failed on a limit: retries ran out, or refused locally
	Points    int            // points the server accepted (charged), from the table
	PerMinute []int          // points accepted in each minute of the run
	InFlight  int
	MaxFlight int
	Latencies []time.Duration // of every call, waits included
}

// NewStats starts counting now.
func NewStats() *Stats {
	return &Stats{c: Counts{start: time.Now(), Refusals: map[string]int{}, Errors: map[string]int{}}}
}

func (st *Stats) call(kind string, d time.Duration, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := &st.c
	s.Calls++
	s.Latencies = append(s.Latencies, d)
	if err == nil {
		s.OK++
		return
	}
	s.Errors[errorKind(err)]++
	if gaveUp(err) {
		s.GaveUp++
	}
}

// gaveUp reports whether a call failed on a limit: its retries ran out, it
// was refused locally, or its last answer was a refusal.
func gaveUp(err error) bool {
	var apiErr *bodo.Error
	var retryErr *bodo.RetryError
	var se *StatusError
	switch {
	case errors.As(err, &retryErr):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Local || apiErr.Temporary() || apiErr.Code == bodo.CodeQuotaExhausted
	case errors.As(err, &se):
		return se.Temporary() || se.Code == bodo.CodeQuotaExhausted
	}
	return false
}

func errorKind(err error) string {
	var apiErr *bodo.Error
	var st *StatusError
	switch {
	case errors.As(err, &st) && st.Code != "":
		return st.Code
	case errors.As(err, &st):
		return http.StatusText(st.Status)
	case errors.Is(err, bodo.ErrOutcomeUnknown):
		return "outcome unknown"
	case errors.As(err, &apiErr) && apiErr.Local:
		return "held locally (" + apiErr.Policy + ")"
	case errors.As(err, &apiErr) && apiErr.Code != "":
		return apiErr.Code
	case errors.As(err, &apiErr):
		return http.StatusText(apiErr.Status)
	}
	return "transport error"
}

// Snapshot returns a copy of the counts so far.
func (st *Stats) Snapshot() Counts {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := &st.c
	c := Counts{
		start: s.start, Calls: s.Calls, OK: s.OK, Requests: s.Requests, GaveUp: s.GaveUp, Points: s.Points,
		Status429: s.Status429, Status503: s.Status503,
		InFlight: s.InFlight, MaxFlight: s.MaxFlight, PerMinute: slices.Clone(s.PerMinute),
		Refusals: map[string]int{}, Errors: map[string]int{}, Latencies: slices.Clone(s.Latencies),
	}
	for k, v := range s.Refusals {
		c.Refusals[k] = v
	}
	for k, v := range s.Errors {
		c.Errors[k] = v
	}
	return c
}

// Count429 is the number of 429 answers.
func (s *Counts) Count429() int { return s.Status429 }

// Percentile returns the p-th percentile (0–100) of the call latencies.
func (s *Counts) Percentile(p float64) time.Duration {
	if len(s.Latencies) == 0 {
		return 0
	}
	l := slices.Clone(s.Latencies)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[min(len(l)-1, int(float64(len(l))*p/100))]
}

// Transport wraps next and counts every request into s: statuses, the
// problem code of each 429 and 503, calls in flight, and the points the
// server charged (the operation's cost; 1 for an idempotent replay; none
// for 401, 429 or 503, which the server does not charge).
func (st *Stats) Transport(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		st.mu.Lock()
		s := &st.c
		s.Requests++
		s.InFlight++
		s.MaxFlight = max(s.MaxFlight, s.InFlight)
		st.mu.Unlock()
		resp, err := next.RoundTrip(r)
		st.mu.Lock()
		defer st.mu.Unlock()
		s.InFlight--
		if err != nil {
			return resp, err
		}
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			var p struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(body, &p)
			if p.Code == "" {
				p.Code = http.StatusText(resp.StatusCode)
			}
			s.Refusals[p.Code]++
			if resp.StatusCode == http.StatusTooManyRequests {
				s.Status429++
			} else {
				s.Status503++
			}
		case http.StatusUnauthorized:
		default:
			points := 0
			if resp.Header.Get("Idempotent-Replayed") == "true" {
				points = 1
			} else if op, _, ok := ops.Match(r.Method, r.URL.Path); ok {
				points = op.CostFor(r.URL.Query().Get)
			}
			s.Points += points
			minute := int(time.Since(s.start) / time.Minute)
			for len(s.PerMinute) <= minute {
				s.PerMinute = append(s.PerMinute, 0)
			}
			s.PerMinute[minute] += points
		}
		return resp, nil
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
