package bodo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jarcoal/httpmock"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// TestBatchDemandIsTheSumOfItsParts reads the parts from the body.
func TestBatchDemandIsTheSumOfItsParts(t *testing.T) {
	c, _ := mockClient(t)
	body := json.RawMessage(`{"name":"x"}`)
	req := BatchRequest{Requests: []BatchRequestItem{
		{Method: BatchMethodGet, Path: "/v1/contacts?q=ada&limit=10"},
		{Method: BatchMethodPost, Path: "/v1/contacts", Body: Value(body)},
		{Method: BatchMethodDelete, Path: "/v1/contacts/con_1"},
		{Method: BatchMethodGet, Path: "/v1/contacts/count"},
	}}
	cl, err := c.newCall(ops.Batch, func(server string) (*http.Request, error) {
		raw, _ := json.Marshal(req)
		return http.NewRequest(http.MethodPost, server+"v1/batch", bytesReader(raw))
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"key": 24, "principal": 24, "org": 24, "egress": 11, "write": 2, "delete": 1, "delete-day": 1}
	got := map[string]float64{}
	for _, d := range cl.bc.Demand {
		got[d.Level] = d.Amount
	}
	if cl.bc.Cost != 24 || !maps.Equal(got, want) {
		t.Errorf("cost %v, demand %v; want 24, %v", cl.bc.Cost, got, want)
	}
	var sent BatchRequest
	if err := json.Unmarshal(cl.body, &sent); err != nil {
		t.Fatal(err)
	}
	if !sent.Requests[1].IdempotencyKey.IsSet() || sent.Requests[0].IdempotencyKey.IsSet() || sent.Requests[2].IdempotencyKey.IsSet() {
		t.Errorf("only the POST part gets a key: %+v", sent.Requests)
	}
}

// budgetClient is a client whose key level holds n points and refills
// slowly, to make calls queue.
func budgetClient(t *testing.T, srv *sandbox.Server, opts ...Option) *Client {
	t.Helper()
	return sandboxClient(t, srv, opts...)
}

// TestFIFO: calls that queue for the budget are sent in the order they
// came. The key refills 5 points a second and each call costs 2, so the
// calls go one at a time, 0.4 s apart, and the order they reach the
// transport is the order they were admitted in.
func TestFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		var mu sync.Mutex
		var order []string
		var at []time.Time // when each was sent
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if limit := r.URL.Query().Get("limit"); limit != "" {
				mu.Lock()
				order = append(order, limit)
				at = append(at, time.Now())
				mu.Unlock()
			}
			return srv.Transport().RoundTrip(r)
		})
		c := newTestClient(t, rt, WithAPIKey(sandbox.TestKey))
		if _, err := c.Me(context.Background()); err != nil { // the answer shows the key is a bucket that refills
			t.Fatal(err)
		}
		c.state.Spend("key", 0)
		var wg sync.WaitGroup
		var want []string
		for i := range 10 {
			want = append(want, strconv.Itoa(i+1))
			wg.Go(func() {
				if _, err := c.Contacts.List(context.Background(), &ListContactsParams{Limit: Int(i + 1)}); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait()
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		// Calls admitted at the same instant go on to the transport in
		// either order; one that came later never goes at a later instant.
		if len(order) != len(want) {
			t.Fatalf("sent %v, want %d calls", order, len(want))
		}
		for i := range order {
			for j := i + 1; j < len(order); j++ {
				vi, _ := strconv.Atoi(order[i])
				vj, _ := strconv.Atoi(order[j])
				if vi > vj && !at[i].Equal(at[j]) {
					t.Errorf("call %d went at %v, before call %d at %v", vi, at[i], vj, at[j])
				}
			}
		}
		if b := c.Budget(); b.Waits != 10 || b.Waited < 3*time.Second {
			t.Errorf("waits %d over %v, want 10 over at least the last one's 4 s", b.Waits, b.Waited)
		}
	})
}

// TestContextFailsFastWhenTheBudgetWaitIsTooLong acts like x/time/rate's
// Wait: a deadline before the earliest moment the call could go fails at
// once; a cancel while waiting ends the wait and lets the next one go.
func TestContextFailsFastWhenTheBudgetWaitIsTooLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		var waits []WaitEvent
		c := budgetClient(t, srv, WithOnWait(func(ev WaitEvent) { waits = append(waits, ev) }))
		if _, err := c.Me(context.Background()); err != nil { // the answer shows the key is a bucket that refills
			t.Fatal(err)
		}
		c.state.Spend("key", -10) // 4 s until a 10-point call: 20 points at 5 a second
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := c.Contacts.Delete(ctx, "con_1")
		var apiErr *Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &apiErr) || !apiErr.Local || apiErr.Policy != "key" || apiErr.RetryAfter != 4*time.Second {
			t.Fatalf("err = %v", err)
		}
		if time.Since(start) != 0 || srv.Stats(sandbox.TestKey).Requests != 1 {
			t.Errorf("waited %v, sent %d", time.Since(start), srv.Stats(sandbox.TestKey).Requests)
		}

		ctx2, cancel2 := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Contacts.Delete(ctx2, "con_1") }()
		synctest.Wait()
		if b := c.Budget(); b.Waiting != 1 {
			t.Fatalf("%d waiting", b.Waiting)
		}
		cancel2()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait: %v", err)
		}
		if b := c.Budget(); b.Waiting != 0 {
			t.Errorf("%d still waiting after the cancel", b.Waiting)
		}
		_, err = c.Me(context.Background())
		// The two deletes the budget did not let go are events with an Err.
		if err != nil || len(waits) != 3 || waits[0].Err == nil || waits[1].Err == nil ||
			waits[2].Err != nil || waits[2].Reason != "key" || waits[2].Operation != "getMe" {
			t.Errorf("a later call: %v, waits %+v", err, waits)
		}
	})
}

// TestCallThatCanNeverFitFailsAtOnce: a batch of 11 deletes needs more than
// the delete level (10 a minute) can ever hold: refused without being sent.
func TestCallThatCanNeverFitFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		c := budgetClient(t, srv)
		if _, err := c.Me(context.Background()); err != nil {
			t.Fatal(err)
		}
		var parts []BatchRequestItem
		for range 11 {
			parts = append(parts, BatchRequestItem{Method: BatchMethodDelete, Path: "/v1/contacts/con_00000000000000000000000000"})
		}
		_, err := c.Batch(context.Background(), BatchRequest{Requests: parts})
		var apiErr *Error
		if !errors.As(err, &apiErr) || !apiErr.Local || apiErr.Policy != "delete" || !strings.Contains(err.Error(), "at most 10") {
			t.Fatalf("err = %v", err)
		}
		if !errors.Is(err, ErrCannotFit) || errors.Is(err, ErrRateLimited) || apiErr.Temporary() {
			t.Errorf("a call that can never fit looks like a passing rate limit: %v", err)
		}
		if srv.Stats(sandbox.TestKey).Requests != 1 {
			t.Errorf("%d requests", srv.Stats(sandbox.TestKey).Requests)
		}
	})
}

// TestPacesBeforeTheFirst429: 16 goroutines on one key for 5 virtual
// minutes see at most 0.5 % of 429s (none in most runs; one in about twenty
// under the race detector's scheduling, in the first burst) and use nearly
// all the key allows.
func TestPacesBeforeTheFirst429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLatency(20 * time.Millisecond))
		c := budgetClient(t, srv)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for ctx.Err() == nil {
					_, err := c.Contacts.Count(ctx, &CountContactsParams{Q: String("a")})
					var apiErr *Error
					if errors.As(err, &apiErr) && apiErr.Local {
						_ = sleep(ctx, max(apiErr.RetryAfter, time.Second))
					}
				}
			})
		}
		wg.Wait()
		time.Sleep(time.Second) // the sandbox finishes what the run's end cut off
		st := srv.Stats(sandbox.TestKey)
		allowance := 600 + 300*5
		refused := 0
		for _, n := range st.Refusals {
			refused += n
		}
		if refused*200 > st.Requests || st.MaxInFlight > 6 {
			t.Errorf("refusals %v of %d requests, max in flight %d", st.Refusals, st.Requests, st.MaxInFlight)
		}
		if st.PointsAccepted < allowance*98/100 || st.PointsAccepted > allowance {
			t.Errorf("%d points accepted of an allowance of %d", st.PointsAccepted, allowance)
		}
	})
}

// TestWithoutBudget sends at once, however empty the model says the key is.
func TestWithoutBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		c := budgetClient(t, srv, WithoutBudget())
		c.state.Spend("key", -1000)
		start := time.Now()
		if _, err := c.Me(context.Background()); err != nil || time.Since(start) != 0 {
			t.Errorf("%v after %v", err, time.Since(start))
		}
	})
}

// TestPanickingTransportFreesItsSlot: a RoundTripper that panics (and a
// caller that recovers) must not leave the attempt's slot taken for good.
func TestPanickingTransportFreesItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		panicked := false
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !panicked {
				panicked = true
				panic("transport bug")
			}
			return srv.Transport().RoundTrip(r)
		})
		c := newTestClient(t, rt, WithAPIKey(sandbox.TestKey))
		func() {
			defer func() { _ = recover() }()
			_, _ = c.Me(context.Background())
		}()
		if b := c.Budget(); b.InFlight != 0 {
			t.Fatalf("%d calls still in flight after the panic", b.InFlight)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := c.Me(ctx); err != nil {
			t.Errorf("the next call: %v", err)
		}
	})
}

// TestAPanickingLoggerFailsOnlyTheCallItLogs: a logger that panics as it
// logs a call held for SlowAfter fails that call with a local error that
// says so; the call leaves the budget, and the key's next call goes once
// the key level has room.
func TestAPanickingLoggerFailsOnlyTheCallItLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		c := budgetClient(t, srv, WithLogger(slog.New(panickingHandler{})))
		c.state.Spend("key", -30) // 6 s of refill before a point is left
		start := time.Now()
		_, err := c.Me(context.Background())
		var e *Error
		if !errors.As(err, &e) || !e.Local || e.Title != "Budget failed" || !strings.Contains(err.Error(), "logger panicked") {
			t.Fatalf("a call whose slow-wait log panicked: %v", err)
		}
		if waited := time.Since(start); waited != budget.SlowAfter {
			t.Errorf("it failed after %v, want SlowAfter", waited)
		}
		// The slow wait asked for the key's status too: that request of the
		// client's own waits for the key at most statusAdmitWithin.
		time.Sleep(statusAdmitWithin)
		synctest.Wait()
		if b := c.Budget(); b.Waiting != 0 || b.InFlight != 0 {
			t.Errorf("%d waiting, %d in flight after it failed", b.Waiting, b.InFlight)
		}
		ctx, cancel := context.WithTimeout(context.Background(), budget.SlowAfter)
		defer cancel()
		if _, err := c.Me(ctx); err != nil {
			t.Errorf("the next call: %v", err)
		}
	})
}

// panickingHandler is a slog.Handler that panics on every record.
type panickingHandler struct{}

func (panickingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panickingHandler) Handle(context.Context, slog.Record) error { panic("a broken log sink") }
func (h panickingHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h panickingHandler) WithGroup(string) slog.Handler           { return h }

// TestOneBudgetPerServer: the same key on the same server shares one
// budget however the base URL spells the host (issue 11, item 9).
func TestOneBudgetPerServer(t *testing.T) {
	suffix := strings.TrimPrefix(uniqueBaseURL(), "https://")
	suffix = strings.TrimSuffix(suffix, "/")
	var states []any
	for _, base := range []string{"https://api." + suffix, "https://API." + strings.ToUpper(suffix), "https://api." + suffix + ":443/"} {
		c, err := NewClient(WithAPIKey(testKey), WithBaseURL(base))
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, c.state)
	}
	if states[0] != states[1] || states[0] != states[2] {
		t.Errorf("three budgets for one server")
	}
	other, err := NewClient(WithAPIKey(testKey), WithBaseURL("https://api."+suffix+":8443"))
	if err != nil {
		t.Fatal(err)
	}
	if any(other.state) == states[0] {
		t.Errorf("another port shares the budget")
	}
}

// TestBatchGivesBackUnusedEgress: a batch reserves each list part's limit
// of egress records and gives back what the parts did not return (issue 11,
// item 6). 60 batches of two lists of limit 100 reserve 12,000 records, more
// than the 10,000 of the egress level; they return 6 records each, so no
// call may wait for egress, and the client's view stays the server's.
func TestBatchGivesBackUnusedEgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLatency(30 * time.Millisecond))
		c := sandboxClient(t, srv)
		ctx := context.Background()
		for _, name := range []string{"Ada", "Grace", "Edsger"} {
			if _, err := c.Contacts.Create(ctx, ContactCreate{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		list, _ := BatchPart(BatchMethodGet, "/v1/contacts?limit=100", nil)
		bad, _ := BatchPart(BatchMethodGet, "/v1/contacts?limit=100&cursor=nope", nil)
		start := time.Now()
		for range 60 {
			res, err := c.Batch(ctx, BatchRequest{Requests: []BatchRequestItem{list, list, bad}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Responses[2].Status != http.StatusBadRequest {
				t.Fatalf("the part with a foreign cursor answered %d", res.Responses[2].Status)
			}
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("60 batches took %v: they waited for egress records they never got", took)
		}
		var mine float64
		for _, l := range c.Budget().Levels {
			if l.Name == "egress" {
				mine = l.Remaining
			}
		}
		status, err := c.RateLimit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		server := -1
		for _, p := range status.Policies {
			if p.Name == "egress" {
				server = p.Remaining
			}
		}
		if mine < float64(server)-1 || mine > float64(server)+1 {
			t.Errorf("the client believes %v egress records are left, the server %d", mine, server)
		}
	})
}

// TestKeysOfOnePrincipalSplitItsLevel: two keys of one principal in one
// process, each able to take the whole principal level, learn from GET
// /v1/me that they share it and split it, instead of both taking what the
// server's r says is left (issue 11, item 10). The same two keys on two
// host names of one server (which the client takes for two servers, so
// nothing is split, as between two processes) each keep back what the
// other took at once (level.reserve): fewer refusals than that, not none.
func TestKeysOfOnePrincipalSplitItsLevel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		split      bool
		minRefused float64 // the least share of requests refused
		maxRefused float64 // the most
	}{
		// In 100 runs under -race, with the split 0 to 0.42 % of about
		// 1,800 requests are refused (a key's part of r cannot count the
		// other key's calls still in flight when r was said). Without it,
		// each key keeping back what the other took at once, 0.1 to 2.1 %
		// of about 1,650 in 30 runs.
		{"one host", true, 0, 0.007},
		{"two hosts", false, 0, 0.03},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				requests, refused, points, allowance := principalRun(t, tc.split)
				t.Logf("%d requests, %d refused, %d points of the principal's %d", requests, refused, points, allowance)
				if share := float64(refused) / float64(requests); share < tc.minRefused || share > tc.maxRefused {
					t.Errorf("%d of %d requests refused, want %.1f %% to %.1f %%", refused, requests, 100*tc.minRefused, 100*tc.maxRefused)
				}
				if float64(points) < 0.9*float64(allowance) {
					t.Errorf("%d points accepted of the principal's %d", points, allowance)
				}
			})
		})
	}
}

// TestTheKeysIdentityIsAskedAfterTheCall: once a second key talks to the
// host, a call of it has GET /v1/me asked whom the key belongs to, once it
// has ended, with a bound of its own: a call with WithAttemptTimeout(1s)
// and no retries, while the server takes 20 s to answer /v1/me, ends in
// milliseconds, and neither OnRetry nor OnWait hears of the client's own
// request. When both keys have their answer, the principal level is split.
func TestTheKeysIdentityIsAskedAfterTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
			if r.URL.Path == "/v1/me" {
				return sandbox.Fault{Delay: 20 * time.Second}
			}
			return sandbox.Fault{}
		}))
		base := WithBaseURL(uniqueBaseURL())
		a := sandboxClient(t, srv, base)
		if _, err := a.Contacts.List(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		var heard []string
		b := sandboxClient(t, srv, base, WithAPIKey(sandbox.SecondKey),
			WithOnRetry(func(e RetryEvent) { heard = append(heard, "retry "+e.Operation) }),
			WithOnWait(func(e WaitEvent) { heard = append(heard, "wait "+e.Operation) }))
		start := time.Now()
		if _, err := b.Contacts.List(context.Background(), nil, WithAttemptTimeout(time.Second), WithMaxRetries(0)); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("a list with WithAttemptTimeout(1s) took %v", took)
		}
		if _, err := a.Contacts.List(context.Background(), nil); err != nil { // a asks too
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		for _, l := range b.Budget().Levels {
			if l.Name == "principal" && l.Share != 0.5 {
				t.Errorf("the principal level once /v1/me answered: Share %v, want half", l.Share)
			}
		}
		if len(heard) > 0 {
			t.Errorf("the caller's hooks heard %v", heard)
		}
	})
}

// principalRun runs 8 agents on each of two keys of one principal for 10
// virtual minutes, both clients on one host name when split, else on two,
// against a principal level no bigger than one key's, and returns what the
// server saw.
func principalRun(t *testing.T, split bool) (requests, refused, points, allowance int) {
	srv := sandbox.New(sandbox.WithLatency(30*time.Millisecond),
		sandbox.WithLimits(sandbox.Limits{KeyQuota: 300, KeyCapacity: 300, PrincipalQuota: 300}))
	baseA, baseB := WithBaseURL(uniqueBaseURL()), WithBaseURL(uniqueBaseURL())
	if split {
		baseB = baseA
	}
	a := sandboxClient(t, srv, baseA)
	b := sandboxClient(t, srv, baseB, WithAPIKey(sandbox.SecondKey))
	const run = 10 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range []*Client{a, b} {
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					_, err := c.Contacts.Count(ctx, nil)
					if errors.Is(err, context.DeadlineExceeded) {
						return // the run ends before the call could go
					}
					if err != nil && !errors.Is(err, ErrRateLimited) {
						t.Errorf("Count: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	// The sandbox finishes the requests whose callers gave up when the run
	// ended; a goroutine still asleep in it would outlive the bubble.
	time.Sleep(time.Second)
	for _, k := range []string{sandbox.TestKey, sandbox.SecondKey} {
		st := srv.Stats(k)
		requests += st.Requests
		points += st.PointsAccepted
		for _, n := range st.Refusals {
			refused += n
		}
	}
	for _, c := range []*Client{a, b} {
		for _, l := range c.Budget().Levels {
			if l.Name == "principal" && l.Quota != 300 {
				t.Errorf("principal level quota %d", l.Quota)
			}
		}
	}
	return requests, refused, points, 300 + 300*int(run/time.Minute)
}

// TestSlowWaitsAreLoggedOnce: 20 goroutines import 100 contacts at the
// documented 60 writes/min. Each create still held by the write level after
// 5 s is logged once at INFO, with the level, how long it waited, how much
// longer it expects to wait and how many calls wait behind it. A call that
// waits 1 s logs nothing.
func TestSlowWaitsAreLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		var buf bytes.Buffer
		var mu sync.Mutex
		logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
		var over, atLeast atomic.Int64 // attempts that waited more than, and at least, budget.SlowAfter
		c := sandboxClient(t, srv, WithLogger(logger), WithOnWait(func(ev WaitEvent) {
			if ev.Wait > budget.SlowAfter {
				over.Add(1)
			}
			if ev.Wait >= budget.SlowAfter {
				atLeast.Add(1)
			}
		}))
		if _, err := c.Me(context.Background()); err != nil { // the answer shows the key holds 600 points, so writes bind
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 20 {
			wg.Go(func() {
				for i := range 5 {
					if _, err := c.Contacts.Create(context.Background(), ContactCreate{Name: fmt.Sprintf("Kontakt %d-%d", g, i)}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		mu.Lock()
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		mu.Unlock()
		maxBehind := 0.0
		for _, line := range lines {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log %q: %v", line, err)
			}
			behind, ok := rec["queued_behind"].(float64)
			if rec["msg"] != "bodo: waiting for the budget" || rec["level"] != "INFO" || rec["held_by"] != "write" ||
				rec["operation"] != "createContact" || rec["class"] != "write" || rec["waited"] != float64(budget.SlowAfter) ||
				rec["expected_remaining"] == nil || !ok {
				t.Errorf("log line %s", line)
			}
			maxBehind = max(maxBehind, behind)
		}
		if n := int64(len(lines)); n < over.Load() || n > atLeast.Load() || n == 0 {
			t.Errorf("%d log lines for %d calls that waited over 5 s (%d at least 5 s): one per call", n, over.Load(), atLeast.Load())
		}
		// How many wait behind depends on how the first burst of 60
		// writes fell among the goroutines (some finish all five in it),
		// but never more than the 19 others and never none.
		if maxBehind < 1 || maxBehind > 19 {
			t.Errorf("the first call held said %v calls wait behind it; 20 goroutines import", maxBehind)
		}
		if st := srv.Stats(sandbox.TestKey); st.Accepted != st.Requests {
			t.Errorf("%d of %d requests accepted", st.Accepted, st.Requests)
		}

		// One second's wait for the key level: nothing to say.
		mu.Lock()
		buf.Reset()
		mu.Unlock()
		var waited time.Duration
		quick := sandboxClient(t, sandbox.New(), WithLogger(logger), WithOnWait(func(ev WaitEvent) { waited = ev.Wait }))
		if _, err := quick.Me(context.Background()); err != nil { // the answer shows the key is a bucket that refills
			t.Fatal(err)
		}
		quick.state.Spend("key", -3) // a 2-point list waits 1 s at 5 points a second
		if _, err := quick.Contacts.List(context.Background(), &ListContactsParams{Limit: Int(1)}); err != nil {
			t.Fatal(err)
		}
		if waited < time.Second || waited > 2*time.Second {
			t.Errorf("the list waited %v, want about 1 s", waited)
		}
		mu.Lock()
		defer mu.Unlock()
		if buf.Len() > 0 {
			t.Errorf("a call that waited %v logged: %s", waited, buf.String())
		}
	})
}

// TestRateLimitPolicyString prints what the server says of each level as
// remaining of capacity, with the quota per window.
func TestRateLimitPolicyString(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := sandboxClient(t, sandbox.New())
		status, err := c.RateLimit(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range status.Policies {
			got[p.Name] = fmt.Sprint(p)
		}
		for name, want := range map[string]string{
			"key":        "key: 599 of 600 points left (300 per 1m0s), full again in 1s",
			"write":      "write: 60 of 60 requests left (60 per 1m0s)",
			"parallel":   "parallel: 5 of 6 concurrent-requests left",
			"delete-day": "delete-day: 300 of 300 requests left (300 per 24h0m0s)",
		} {
			if got[name] != want {
				t.Errorf("%s prints %q, want %q", name, got[name], want)
			}
		}
	})
}

// TestAStaleLevelIsAskedAbout: a call held 5 s by a level the server has
// not named for 30 s makes the client ask GET /v1/rate_limit, whose answer
// frees it; without the question it would wait for the model's refill (40 s).
func TestAStaleLevelIsAskedAbout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLatency(30 * time.Millisecond))
		c := sandboxClient(t, srv)
		ctx := context.Background()
		if _, err := c.Me(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(budget.StaleAfter)
		c.state.Spend("org", -1000) // the model believes the org drained; the server's org is full
		start := time.Now()
		if _, err := c.Contacts.Count(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > budget.SlowAfter+time.Second {
			t.Errorf("the count took %v; the status would have freed it after %v", took, budget.SlowAfter)
		}
		if n := srv.Stats(sandbox.TestKey).Requests; n != 3 {
			t.Errorf("%d requests, want Me, the status and the count", n)
		}
	})
}

// TestAnImportWithDeadlinesLearnsTheKeysBurst: 20 goroutines create 80
// contacts, each call with a 30 s deadline, on a fresh client. The answers
// name only the write level, so the model of the key level is the
// documented quota (300 points) until the server shows more; the first call
// it holds asks for the status, which shows the key's 600, instead of the
// 61st create failing at once on a 60 s wait that is not real.
func TestAnImportWithDeadlinesLearnsTheKeysBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLatency(30 * time.Millisecond))
		c := sandboxClient(t, srv)
		var wg sync.WaitGroup
		for g := range 20 {
			wg.Go(func() {
				for i := range 4 {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					_, err := c.Contacts.Create(ctx, ContactCreate{Name: fmt.Sprintf("Kontakt %d-%d", g, i)})
					cancel()
					if err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		// A 429 in the first burst, retried, shows up about once in ten
		// runs under -race (as in TestPacesBeforeTheFirst429).
		st := srv.Stats(sandbox.TestKey)
		if st.Writes != 80 || st.Requests-st.Accepted > 2 {
			t.Errorf("%d writes, %d of %d requests refused", st.Writes, st.Requests-st.Accepted, st.Requests)
		}
	})
}

// TestStatusRequestLeavesWithItsTimeLeft: the client's own status request
// waits at most statusAdmitWithin for the budget, so that it never leaves
// with a sliver of its statusPollTimeout. One that waited out a 20 s hold
// on the key level left with 10 s, and one cut off in flight may have been
// answered with a wait (OVERLOADED) that then never reaches the client.
func TestStatusRequestLeavesWithItsTimeLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var left []time.Duration
		refuse := problemResponder(http.StatusTooManyRequests, CodeRateLimited, http.Header{"Retry-After": {"20"}}, map[string]any{"policy": "key"})
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/v1/rate_limit" {
				d, _ := r.Context().Deadline()
				left = append(left, time.Until(d))
				return httpmock.NewStringResponse(http.StatusOK, `{"policies":[]}`), nil
			}
			return refuse(r)
		})
		c := newTestClient(t, rt, WithMaxRetries(0))
		if _, err := c.Contacts.Count(context.Background(), nil); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("the count: %v, want the key level's refusal", err)
		}
		start := time.Now()
		c.pollStatus()
		if took := time.Since(start); took > statusAdmitWithin {
			t.Errorf("the status request took %v, more than its %v for the budget", took, statusAdmitWithin)
		}
		for _, d := range left {
			if d < statusPollTimeout-statusAdmitWithin {
				t.Errorf("the status request left with %v of its %v", d, statusPollTimeout)
			}
		}
	})
}

// TestAPanickingStatusRequestIsLogged: a transport of the caller's that
// panics on the status request, which the client sends of its own when a
// call is held by a level whose word is stale, does not end the process
// (no caller could recover it): the panic is logged at ERROR.
func TestAPanickingStatusRequestIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLatency(30 * time.Millisecond))
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/v1/rate_limit" {
				panic("transport bug")
			}
			return srv.Transport().RoundTrip(r)
		})
		var buf bytes.Buffer
		var mu sync.Mutex
		c := newTestClient(t, rt, WithAPIKey(sandbox.TestKey), WithLogger(slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))))
		if _, err := c.Me(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(budget.StaleAfter)
		c.state.Spend("org", -1000) // the model believes the org drained
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = c.Contacts.Count(ctx, nil)
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(buf.String(), "the status request panicked") {
			t.Errorf("the panic is not logged: %s", buf.String())
		}
	})
}

// TestAStatusTellsTheKeyAsAWhole: a rate-limit status's parallel quota
// sets the slots in flight, as RateLimit-Policy's does, and its lockout
// (another process's) holds every call until it ends, sending none; the
// refusals it counted fill the lockout guard.
func TestAStatusTellsTheKeyAsAWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t)
		until := time.Now().Add(4 * time.Minute)
		mt.RegisterResponder("GET", "=~/v1/rate_limit", jsonResponder(200, map[string]any{"policies": []map[string]any{
			{"name": "key", "quota": 300, "window": 60, "unit": "points", "remaining": 500, "resetSeconds": 20, "capacity": 600},
			{"name": "parallel", "quota": 3, "unit": "concurrent-requests", "remaining": 2, "resetSeconds": 0}},
			"lockedUntil": until.UTC().Format(time.RFC3339), "rejectionsLast60s": 51}))
		var rec recorder
		mt.RegisterResponder("GET", "=~/v1/contacts/", rec.wrap(jsonResponder(200, sampleContact)))
		if _, err := c.RateLimit(context.Background()); err != nil {
			t.Fatal(err)
		}
		b := c.Budget()
		if b.InFlightCap > 3 || !b.PausedUntil.Equal(until.Truncate(time.Second)) || b.Refusals != budget.RefusalLimit {
			t.Errorf("in-flight cap %d, paused until %v, %d refusals; want at most 3, %v and %d",
				b.InFlightCap, b.PausedUntil, b.Refusals, until.Truncate(time.Second), budget.RefusalLimit)
		}
		for _, l := range b.Levels {
			if l.Name == "parallel" && l.Quota != 3 {
				t.Errorf("parallel's quota %d, want 3", l.Quota)
			}
		}
		_, err := c.Contacts.Get(context.Background(), "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP", WithMaxRetryWait(time.Minute))
		if rec.count() != 0 || err == nil {
			t.Errorf("%d calls sent during the lockout the status reported (err %v)", rec.count(), err)
		}
	})
}

// TestTheClientsOwnStatusIsNoCallersWait: the status request the client
// sends on its own for a call a stale level holds waits for a slot behind
// six slow calls; OnWait hears of the call's wait, not of the status
// request's, which no caller made.
func TestTheClientsOwnStatusIsNoCallersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLatency(30*time.Millisecond), sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
			if strings.HasSuffix(r.URL.Path, "/count") {
				return sandbox.Fault{Delay: 10 * time.Second}
			}
			return sandbox.Fault{}
		}))
		var mu sync.Mutex
		var heard []string
		c := sandboxClient(t, srv, WithOnWait(func(ev WaitEvent) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, ev.Operation)
		}))
		ctx := context.Background()
		if _, err := c.Me(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(budget.StaleAfter)
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() { _, _ = c.Contacts.Count(ctx, nil) })
		}
		synctest.Wait()
		c.state.Spend("org", -1000) // the model believes the org drained; the server's org is full
		if _, err := c.Contacts.Get(ctx, "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP"); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(heard, "getContact") || slices.Contains(heard, "getRateLimit") {
			t.Errorf("OnWait heard %v; want the get's wait and not the status request's", heard)
		}
	})
}

// TestABucketsFullMomentIsNoWaitTheServerAsked: the write level is a
// bucket (60, one a second). Another client of the key takes 59 writes and
// this one the last; the answer says "write";r=0;t=60, when the bucket is
// full again. A create that sits out at most 30 s (MaxRetryWait) is not
// failed as if the server had asked a minute: a bucket refilling at the
// quota's rate frees its write within a second, which a refusal would ask.
func TestABucketsFullMomentIsNoWaitTheServerAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		other, c := sandboxClient(t, srv), sandboxClient(t, srv)
		ctx := context.Background()
		for i := range 59 {
			if _, err := other.Contacts.Create(ctx, ContactCreate{Name: fmt.Sprint("o", i)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Contacts.Create(ctx, ContactCreate{Name: "last"}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := c.Contacts.Create(ctx, ContactCreate{Name: "next"}, WithMaxRetryWait(30*time.Second)); err != nil {
			t.Errorf("the next create, which the write bucket takes within a second, failed after %v: %v", time.Since(start), err)
		}
	})
}
