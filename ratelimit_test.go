package bodo

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

func demandMap(d []demand) map[string]float64 {
	m := map[string]float64{}
	for _, x := range d {
		m[x.level] = x.amount
	}
	return m
}

// TestDemandOfEveryClass checks the cost accounting of every class against
// bodo-api.md: points to key, principal and org; writes, deletes, money and
// long runs to write; deletes to delete and delete-day; reads to egress.
func TestDemandOfEveryClass(t *testing.T) {
	pts := func(n float64, extra map[string]float64) map[string]float64 {
		m := map[string]float64{"key": n, "principal": n, "org": n}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		op    *ops.Operation
		query string
		want  map[string]float64
	}{
		{ops.ListContacts, "", pts(2, map[string]float64{"egress": 20})},
		{ops.ListContacts, "limit=5&q=ada", pts(7, map[string]float64{"egress": 5})},
		{ops.ListContacts, "limit=500", pts(2, map[string]float64{"egress": 100})},
		{ops.CountContacts, "q=x", pts(7, map[string]float64{"egress": 1})},
		{ops.GetContact, "", pts(1, map[string]float64{"egress": 1})},
		{ops.CreateContact, "", pts(5, map[string]float64{"write": 1})},
		{ops.UpdateContact, "", pts(5, map[string]float64{"write": 1})},
		{ops.DeleteContact, "", pts(10, map[string]float64{"write": 1, "delete": 1, "delete-day": 1})},
		{ops.ListInvoices, "limit=3", pts(2, map[string]float64{"egress": 3})},
		{ops.PayInvoice, "", pts(10, map[string]float64{"write": 1})},
		{ops.RefundInvoice, "", pts(10, map[string]float64{"write": 1})},
		{ops.CreateExport, "", pts(10, map[string]float64{"write": 1})},
		{ops.GetOperation, "", pts(1, map[string]float64{"egress": 1})},
		{ops.ListEvents, "limit=50", pts(1, map[string]float64{"egress": 50})},
		{ops.GetMe, "", pts(1, nil)},
		{ops.GetRateLimit, "", pts(1, nil)},
		{ops.GetOpenAPI, "", pts(1, nil)},
	}
	for _, tc := range cases {
		q, _ := url.ParseQuery(tc.query)
		if got := demandMap(demandOf(tc.op, q)); !mapsEqual(got, tc.want) {
			t.Errorf("%s?%s: %v, want %v", tc.op.ID, tc.query, got, tc.want)
		}
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestBatchDemandIsTheSumOfItsParts reads the parts from the body.
func TestBatchDemandIsTheSumOfItsParts(t *testing.T) {
	c, _ := mockClient(t)
	body := json.RawMessage(`{"name":"x"}`)
	req := BatchRequest{Requests: []BatchRequestItem{
		{Method: BatchRequestItemMethodGET, Path: "/v1/contacts?q=ada&limit=10"},
		{Method: BatchRequestItemMethodPOST, Path: "/v1/contacts", Body: &body},
		{Method: BatchRequestItemMethodDELETE, Path: "/v1/contacts/con_1"},
		{Method: BatchRequestItemMethodGET, Path: "/v1/contacts/count"},
	}}
	cl, err := c.newCall(ops.Batch, func(server string) (*http.Request, error) {
		raw, _ := json.Marshal(req)
		return http.NewRequest(http.MethodPost, server+"v1/batch", bytesReader(raw))
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"key": 24, "principal": 24, "org": 24, "egress": 11, "write": 2, "delete": 1, "delete-day": 1}
	if got := demandMap(cl.demand); cl.cost != 24 || !mapsEqual(got, want) {
		t.Errorf("cost %d, demand %v; want 24, %v", cl.cost, got, want)
	}
	var sent BatchRequest
	if err := json.Unmarshal(cl.body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Requests[1].IdempotencyKey == nil || sent.Requests[0].IdempotencyKey != nil || sent.Requests[2].IdempotencyKey != nil {
		t.Errorf("only the POST part gets a key: %+v", sent.Requests)
	}
}

// TestFollowsRateLimitHeaders: the policy field sets quota, window and unit,
// an unknown policy becomes a level, RateLimit lowers what is left but a
// higher r raises nothing, and malformed fields change nothing.
func TestFollowsRateLimitHeaders(t *testing.T) {
	s := stateFor(uniqueBaseURL(), testKey)
	now := time.Now()
	key := s.levels["key"]
	s.observeLocked(http.Header{"Ratelimit-Policy": {`"key";q=300;w=60;qu="points", "burst";q=50;w=10;qu="points", "parallel";q=4;qu="concurrent-requests"`}}, now, nil)
	if key.size() != 600 || key.quota != 300 {
		t.Errorf("documented capacity lost: %v", key.size())
	}
	burst := s.levels["burst"]
	if burst == nil || burst.quota != 50 || burst.window != 10*time.Second || burst.unit != "points" || s.parallel != 4 || s.capLimit != 4 {
		t.Fatalf("burst %+v, parallel %d, cap %v", burst, s.parallel, s.capLimit)
	}
	s.observeLocked(http.Header{"Ratelimit": {`"key";r=12;t=118`}}, now, nil)
	if key.tokens != 12 {
		t.Errorf("tokens = %v after r=12", key.tokens)
	}
	if r := key.rate(now); r < 4.9 || r > 5 {
		t.Errorf("rate = %v, want about 5/s", r)
	}
	s.observeLocked(http.Header{"Ratelimit": {`"key";r=500;t=20`}}, now, nil)
	if key.tokens != 12 {
		t.Errorf("a higher r raised the tokens to %v", key.tokens)
	}
	before := key.tokens
	for _, h := range []http.Header{
		{"Ratelimit": {`"key";r=-1`}}, {"Ratelimit": {`key r=1`}}, {"Ratelimit-Policy": {`"key";q=x`}}, {},
	} {
		s.observeLocked(h, now, nil)
	}
	if key.tokens != before || key.quota != 300 {
		t.Errorf("a malformed field changed the model: %v %v", key.tokens, key.quota)
	}
	s.observeLocked(http.Header{"Ratelimit-Policy": {`"key";q=30;w=60`}}, now, nil)
	if key.size() != 500 {
		t.Errorf("with a new quota the capacity is the quota or the most seen left (500), got %v", key.size())
	}
	s.observeLocked(http.Header{"Ratelimit": {`"org";r=100;t=100`}}, now, nil)
	if r := s.levels["org"].rate(now); r < 13.9 || r > 14 {
		t.Errorf("org rate = %v, want (1500-100)/100 = 14/s", r)
	}
	s.observeLocked(http.Header{"Ratelimit": {`"org";r=0;t=5`}}, now, nil)
	if r := s.levels["org"].rate(now); r != 25 {
		t.Errorf("org rate = %v, never above the quota's 25/s", r)
	}
}

func TestAIMDSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stateFor(uniqueBaseURL(), testKey)
		now := time.Now()
		s.cutLocked(now, rateLimitCut)
		if s.capLimit != 3 || s.pace != 0.5 {
			t.Fatalf("after a cut: cap %v pace %v", s.capLimit, s.pace)
		}
		s.cutLocked(now.Add(500*time.Millisecond), rateLimitCut)
		if s.capLimit != 3 || s.cuts != 1 {
			t.Errorf("a second refusal within a second cut again: cap %v", s.capLimit)
		}
		s.cutLocked(now.Add(time.Second), rateLimitCut)
		if s.capLimit != 1 || s.pace != 0.25 {
			t.Errorf("after two cuts: cap %v pace %v", s.capLimit, s.pace)
		}
		for range 5 {
			s.cutLocked(s.lastCut.Add(time.Second), rateLimitCut)
		}
		if s.capLimit != 1 || s.pace != minPace {
			t.Errorf("floors: cap %v pace %v", s.capLimit, s.pace)
		}
		last := s.lastCut
		s.adaptLocked(last.Add(quietInterval - time.Millisecond))
		if s.capLimit != 1 {
			t.Errorf("raised before a quiet interval")
		}
		s.adaptLocked(last.Add(quietInterval))
		if s.capLimit != 2 || math.Abs(s.pace-(minPace+paceStep)) > 1e-9 {
			t.Errorf("one quiet interval: cap %v pace %v", s.capLimit, s.pace)
		}
		s.adaptLocked(last.Add(20 * quietInterval))
		if s.capLimit != 6 || s.pace != 1 {
			t.Errorf("back to the model: cap %v pace %v", s.capLimit, s.pace)
		}
		s.cutLocked(last.Add(21*quietInterval), overloadCut)
		if s.capLimit != 4 || s.pace != 0.8 {
			t.Errorf("an OVERLOADED cut: cap %v pace %v", s.capLimit, s.pace)
		}
	})
}

// budgetClient is a client whose key level holds n points and refills
// slowly, to make calls queue.
func budgetClient(t *testing.T, srv *sandbox.Server, opts ...Option) *Client {
	t.Helper()
	return sandboxClient(t, srv, opts...)
}

// TestFIFO: calls that queue for the budget go in the order they came.
func TestFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		c := budgetClient(t, srv)
		c.state.levels["key"].tokens = 0
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Contacts.List(context.Background(), &ListContactsParams{Limit: Ptr(1)}); err != nil {
					t.Error(err)
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			}()
			synctest.Wait()
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		if !slices.IsSorted(order) {
			t.Errorf("served in the order %v", order)
		}
		if b := c.Budget(); b.Waits != 10 || b.Waited < 10*time.Second {
			t.Errorf("waits %d over %v", b.Waits, b.Waited)
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
		c.state.levels["key"].tokens = -10 // 4 s until a 10-point call... of 10 + 10
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := c.Contacts.Delete(ctx, "con_1")
		var apiErr *Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &apiErr) || !apiErr.Local || apiErr.Policy != "key" || apiErr.RetryAfter != 4*time.Second {
			t.Fatalf("err = %v", err)
		}
		if time.Since(start) != 0 || srv.Stats(sandbox.TestKey).Requests != 0 {
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
		if err != nil || len(waits) != 1 || waits[0].Reason != "key" || waits[0].Operation != "getMe" {
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
			parts = append(parts, BatchRequestItem{Method: BatchRequestItemMethodDELETE, Path: "/v1/contacts/con_00000000000000000000000000"})
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
// minutes never see a 429 (after the first answers taught the client the
// server's limits) and use nearly all the key allows.
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
					_, err := c.Contacts.Count(ctx, &CountContactsParams{Q: Ptr("a")})
					var apiErr *Error
					if errors.As(err, &apiErr) && apiErr.Local {
						_ = sleep(ctx, max(apiErr.RetryAfter, time.Second))
					}
				}
			})
		}
		wg.Wait()
		st := srv.Stats(sandbox.TestKey)
		allowance := 600 + 300*5
		if len(st.Refusals) != 0 || st.MaxInFlight > 6 {
			t.Errorf("refusals %v, max in flight %d", st.Refusals, st.MaxInFlight)
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
		c.state.levels["key"].tokens = -1000
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
