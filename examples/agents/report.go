package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go"
)

// recorder counts what the program sees of a run: each call's outcome and
// latency, each retry (WithOnRetry) and wait (WithOnWait) of the client,
// and each request on the wire. It is safe for concurrent use.
type recorder struct {
	mu        sync.Mutex
	start     time.Time
	calls     int
	ok        int
	points    int            // the documented cost of every call the server answered (and so charged)
	errors    map[string]int // failed calls by code
	refusals  map[string]int // 429 and 503 answers by code, retried or not
	n429      int
	lockouts  int // refusals with policy "lockout"
	gaveUp    int // calls that failed on a limit
	waits     int
	waitedFor time.Duration
	heldBy    map[string]int // waits by what held the call last
	latencies []time.Duration
	requests  int
	inFlight  int
	maxFlight int
}

func newRecorder() *recorder {
	return &recorder{start: time.Now(), errors: map[string]int{}, refusals: map[string]int{}, heldBy: map[string]int{}}
}

// called records a call of kind that took d and ended with err.
func (r *recorder) called(kind string, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.latencies = append(r.latencies, d)
	if err == nil {
		r.ok++
		r.points += cost(kind)
		return
	}
	var e *bodo.Error
	if !errors.As(err, &e) { // every error of the client is a *bodo.Error; this is for the unexpected
		r.errors[err.Error()]++
		return
	}
	switch {
	case e.Local:
		r.errors["held locally ("+e.Policy+")"]++
		r.gaveUp++
	case e.Status == 0:
		r.errors["no answer"]++
	case e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable:
		r.refused(e)
		r.errors[e.Code]++
		r.gaveUp++
	case e.Status == http.StatusUnauthorized:
		r.errors[e.Code]++
	default: // answered, so charged, but not what the agent hoped for
		r.points += cost(kind)
		r.errors[cmp.Or(e.Code, http.StatusText(e.Status))]++
	}
}

// retried is the client's WithOnRetry hook.
func (r *recorder) retried(ev bodo.RetryEvent) {
	var e *bodo.Error
	if !errors.As(ev.Err, &e) || (e.Status != http.StatusTooManyRequests && e.Status != http.StatusServiceUnavailable) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused(e)
}

// refused counts a refusal; r.mu is held.
func (r *recorder) refused(e *bodo.Error) {
	r.refusals[e.Code]++
	if e.Status == http.StatusTooManyRequests {
		r.n429++
	}
	if e.Policy == "lockout" {
		r.lockouts++
	}
}

// waited is the client's WithOnWait hook.
func (r *recorder) waited(ev bodo.WaitEvent) {
	if ev.Err != nil {
		return // a call the budget did not let go: its error counts it
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits++
	r.waitedFor += ev.Wait
	r.heldBy[ev.Reason]++
}

// transport wraps next and counts the requests and those in flight.
func (r *recorder) transport(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.requests++
		r.inFlight++
		r.maxFlight = max(r.maxFlight, r.inFlight)
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.inFlight--
			r.mu.Unlock()
		}()
		return next.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// summary is what a run did.
type summary struct {
	Elapsed      time.Duration
	Calls, OK    int
	Requests     int
	Points       int
	Allowance    int    // the key's capacity plus its quota over the run
	KeyLimit     string // how the allowance was reckoned
	Refusals     map[string]int
	Status429    int
	Lockouts     int
	Errors       map[string]int
	GaveUp       int
	Waits        int
	Waited       time.Duration
	HeldBy       map[string]int
	P50, P99     time.Duration
	MaxInFlight  int
	Budget       bodo.Budget           // the client's view at the end
	RateLimit    *bodo.RateLimitStatus // the server's view at the end; nil if RateLimit failed
	RateLimitErr error
}

// Goodput is the share of the allowance the server accepted.
func (s summary) Goodput() float64 { return float64(s.Points) / float64(max(s.Allowance, 1)) }

// summarize takes the counts of rec, then asks the client for its budget
// and the server for the key's rate-limit status.
func summarize(ctx context.Context, client *bodo.Client, rec *recorder) summary {
	rec.mu.Lock()
	s := summary{
		Elapsed: time.Since(rec.start), Calls: rec.calls, OK: rec.ok, Requests: rec.requests, Points: rec.points,
		Refusals: maps.Clone(rec.refusals), Status429: rec.n429, Lockouts: rec.lockouts, Errors: maps.Clone(rec.errors),
		GaveUp: rec.gaveUp, Waits: rec.waits, Waited: rec.waitedFor, HeldBy: maps.Clone(rec.heldBy), MaxInFlight: rec.maxFlight,
	}
	lat := slices.Clone(rec.latencies)
	rec.mu.Unlock()
	slices.Sort(lat)
	s.P50, s.P99 = percentile(lat, 50), percentile(lat, 99)

	s.Budget = client.Budget()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	s.RateLimit, s.RateLimitErr = client.RateLimit(ctx)

	quota, window, capacity := keyLevel(s.Budget, s.RateLimit)
	if window > 0 {
		s.Allowance = capacity + int(float64(quota)*s.Elapsed.Seconds()/window.Seconds())
		s.KeyLimit = fmt.Sprintf("capacity %d + %d points per %.0f s over the run", capacity, quota, window.Seconds())
	}
	return s
}

// keyLevel returns the key level's quota, window and capacity: the
// server's figures when RateLimit answered, else the client's.
func keyLevel(b bodo.Budget, st *bodo.RateLimitStatus) (quota int, window time.Duration, capacity int) {
	if st != nil {
		for _, p := range st.Policies {
			if p.Name == "key" {
				return p.Quota, p.Window, p.Capacity
			}
		}
	}
	for _, l := range b.Levels {
		if l.Name == "key" {
			return l.Quota, l.Window, max(l.Capacity, l.Quota)
		}
	}
	return 0, 0, 0
}

// percentile returns the p-th percentile of the sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p/100))]
}

func (s summary) print(w io.Writer) {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	fmt.Fprintf(w, "ran %v\n", ms(s.Elapsed))
	fmt.Fprintf(w, "  calls           %d (%d ok)\n", s.Calls, s.OK)
	fmt.Fprintf(w, "  requests        %d\n", s.Requests)
	if s.Allowance > 0 {
		fmt.Fprintf(w, "  points accepted %d of an allowance of %d (%s): goodput %.1f %%\n", s.Points, s.Allowance, s.KeyLimit, 100*s.Goodput())
	} else {
		fmt.Fprintf(w, "  points accepted %d (the key's level is unknown)\n", s.Points)
	}
	fmt.Fprintf(w, "  429s            %d (%.2f %% of requests)%s\n", s.Status429, 100*float64(s.Status429)/float64(max(s.Requests, 1)), byCount(s.Refusals))
	fmt.Fprintf(w, "  lockouts        %d (refusals with policy lockout)\n", s.Lockouts)
	fmt.Fprintf(w, "  errors          %d%s\n", s.Calls-s.OK, byCount(s.Errors))
	fmt.Fprintf(w, "  gave up         %d (retries ran out, or held locally)\n", s.GaveUp)
	fmt.Fprintf(w, "  waited          %d calls for %v in all%s\n", s.Waits, ms(s.Waited), byCount(s.HeldBy))
	fmt.Fprintf(w, "  latency         p50 %v, p99 %v (waits included)\n", ms(s.P50), ms(s.P99))
	fmt.Fprintf(w, "  max in flight   %d\n", s.MaxInFlight)
	b := s.Budget
	fmt.Fprintf(w, "  budget          cap on calls in flight %d, pace %.2f, cuts %d, %d refusals in the last 60 s\n", b.InFlightCap, b.Pace, b.Cuts, b.Refusals)
	if s.RateLimit == nil {
		fmt.Fprintf(w, "  rate limit      %v\n", s.RateLimitErr)
		return
	}
	for i, p := range s.RateLimit.Policies {
		label := ""
		if i == 0 {
			label = "rate limit"
		}
		fmt.Fprintf(w, "  %-15s %v\n", label, p)
	}
	locked := "not locked out"
	if until, ok := s.RateLimit.LockedUntil.Get(); ok {
		locked = "locked out until " + until.Format(time.RFC3339)
	}
	fmt.Fprintf(w, "  %-15s %s, %d refusals in the last 60 s\n", "", locked, s.RateLimit.RejectionsLast60s)
}

// byCount renders m as ": k1 n1, k2 n2", most first; "" when m is empty.
func byCount(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return ": " + strings.Join(parts, ", ")
}

// console is where the program writes: the summary and, on a terminal, the
// progress line to out; the client's log lines to errOut, each on a line of
// its own.
type console struct {
	mu     sync.Mutex
	out    io.Writer
	errOut io.Writer
	tty    bool // out is a terminal: a progress line is drawn on it
}

func newConsole(out, errOut io.Writer) *console {
	c := &console{out: out, errOut: errOut}
	if f, ok := out.(*os.File); ok {
		fi, err := f.Stat()
		c.tty = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	return c
}

// logger is a text logger on errOut at level: "info", "warn" or "off".
func (c *console) logger(level string) *slog.Logger {
	l := slog.LevelInfo
	switch level {
	case "off":
		return slog.New(slog.DiscardHandler)
	case "warn":
		l = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(logWriter{c}, &slog.HandlerOptions{Level: l}))
}

// logWriter writes log lines to errOut, clearing the progress line first.
type logWriter struct{ c *console }

func (w logWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.c.tty {
		fmt.Fprint(w.c.errOut, "\r\033[K")
	}
	return w.c.errOut.Write(p)
}

func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, format, args...)
}

// progress redraws a line twice a second until done: the points accepted
// per minute over the last minute against the key's limit, calls, 429s,
// calls waiting for the budget and in flight.
func (c *console) progress(done <-chan struct{}, client *bodo.Client, rec *recorder) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	type sample struct {
		at     time.Time
		points int
	}
	window := []sample{{rec.start, 0}}
	for {
		select {
		case <-done:
			c.printf("\r\033[K")
			return
		case now := <-tick.C:
			rec.mu.Lock()
			points, calls, n429 := rec.points, rec.calls, rec.n429
			rec.mu.Unlock()
			window = append(window, sample{now, points})
			for len(window) > 2 && now.Sub(window[1].at) >= time.Minute {
				window = window[1:]
			}
			first := window[0]
			perMin := float64(points-first.points) / max(now.Sub(first.at).Minutes(), 1.0/60)
			b := client.Budget()
			quota, per, _ := keyLevel(b, nil)
			limit := 0.0
			if per > 0 {
				limit = float64(quota) * time.Minute.Seconds() / per.Seconds()
			}
			c.printf("\r\033[K%5.0fs  %5.0f points/min over the last %2.0fs (limit %.0f/min)  %d calls  %d × 429  %d waiting  %d in flight",
				now.Sub(rec.start).Seconds(), perMin, now.Sub(first.at).Seconds(), limit, calls, n429, b.Waiting, b.InFlight)
		}
	}
}
