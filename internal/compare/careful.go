package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bodo-app/bodo-go/internal/agents"
	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/google/uuid"
	"golang.org/x/time/rate"
)

// The careful engineer's settings: the documented limits of bodo-api.md,
// fixed.
const (
	carefulKeyRate    = 5   // points a second: 300 points/min
	carefulKeyBurst   = 600 // the key bucket's capacity
	carefulWriteRate  = 1   // writes a second: 60 writes/min
	carefulWriteBurst = 60
	carefulParallel   = 6 // calls in flight
	carefulRetries    = 2 // as the official SDKs
	carefulJitter     = 250 * time.Millisecond
	carefulBackoff    = time.Second // the first wait of a 429 or 503 without a hint; doubles
)

// newCareful is the careful engineer's client: the generated client over
// a carefulTransport.
func newCareful(env Env) (agents.API, error) {
	return newRaw(env, &http.Client{Transport: &carefulTransport{
		next:   env.Transport,
		key:    rate.NewLimiter(carefulKeyRate, carefulKeyBurst),
		writes: rate.NewLimiter(carefulWriteRate, carefulWriteBurst),
		slots:  make(chan struct{}, carefulParallel),
	}})
}

// carefulTransport is what a careful engineer writes by hand from
// bodo-api.md: before every attempt it takes the call's cost from key (and
// one from writes for the write classes) and a slot of slots; it retries a
// 429 or 503 up to carefulRetries times after retryAfterMs, else
// Retry-After, else 1, 2 s, plus up to carefulJitter (never a
// QUOTA_EXHAUSTED, never a connection error); it gives every POST and PATCH
// without one an Idempotency-Key, the same on each retry. Nothing adapts.
type carefulTransport struct {
	next   http.RoundTripper
	key    *rate.Limiter
	writes *rate.Limiter
	slots  chan struct{}
}

// RoundTrip implements http.RoundTripper.
func (c *carefulTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	ctx := req.Context()
	idemKey := req.Header.Get("Idempotency-Key")
	if idemKey == "" && (req.Method == http.MethodPost || req.Method == http.MethodPatch) {
		idemKey = uuid.NewString()
	}
	cost, write := 1, false
	if op, _, ok := ops.Match(req.Method, req.URL.Path); ok {
		cost, write = max(op.CostFor(req.URL.Query().Get), 1), op.Class.IsWrite()
	}
	for attempt := 0; ; attempt++ {
		if err := c.take(ctx, cost, write); err != nil {
			return nil, err
		}
		r := req.Clone(ctx)
		if req.Body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if idemKey != "" {
			r.Header.Set("Idempotency-Key", idemKey)
		}
		resp, err := c.next.RoundTrip(r)
		<-c.slots
		if err != nil || attempt == carefulRetries ||
			resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
			return resp, err
		}
		data, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(data))
		wait, retry := carefulWait(resp, data, attempt)
		if !retry {
			return resp, nil
		}
		t := time.NewTimer(wait + rand.N(carefulJitter+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// take waits until key holds cost points (and writes one write, for a
// write) and a slot is free, and takes them.
func (c *carefulTransport) take(ctx context.Context, cost int, write bool) error {
	now := time.Now()
	rs := []*rate.Reservation{c.key.ReserveN(now, cost)}
	if write {
		rs = append(rs, c.writes.ReserveN(now, 1))
	}
	var delay time.Duration
	for _, r := range rs {
		delay = max(delay, r.DelayFrom(now))
	}
	cancel := func() {
		for _, r := range rs {
			r.Cancel()
		}
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			cancel()
			return ctx.Err()
		}
	}
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// carefulWait is the wait before retrying the 429 or 503 answer resp with
// body data after attempt (from 0), and whether to retry at all: not on
// QUOTA_EXHAUSTED.
func carefulWait(resp *http.Response, data []byte, attempt int) (time.Duration, bool) {
	var p struct {
		Code         string `json:"code"`
		RetryAfterMs *int64 `json:"retryAfterMs"`
	}
	_ = json.Unmarshal(data, &p)
	if p.Code == "QUOTA_EXHAUSTED" {
		return 0, false
	}
	if p.RetryAfterMs != nil && *p.RetryAfterMs >= 0 {
		return time.Duration(*p.RetryAfterMs) * time.Millisecond, true
	}
	if v := strings.TrimSpace(resp.Header.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			return time.Duration(s) * time.Second, true
		}
		if at, err := http.ParseTime(v); err == nil {
			return max(time.Until(at), 0), true
		}
	}
	return carefulBackoff << attempt, true
}
