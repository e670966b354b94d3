package bodo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// sandboxClient makes a client on the sandbox's in-process transport (for
// synctest bubbles) with the sandbox's test key.
func sandboxClient(t *testing.T, srv *sandbox.Server, opts ...Option) *Client {
	t.Helper()
	return newTestClient(t, srv.Transport(), append([]Option{WithAPIKey(sandbox.TestKey)}, opts...)...)
}

// TestServicesOverLoopback runs every service method once against the
// sandbox over real loopback HTTP.
func TestServicesOverLoopback(t *testing.T) {
	srv := httptest.NewServer(sandbox.New(sandbox.WithLimits(sandbox.Limits{ExportDuration: 100 * time.Millisecond})))
	defer srv.Close()
	c, err := NewClient(WithAPIKey(sandbox.TestKey), WithBaseURL(srv.URL), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	exerciseServices(t, c)
}

// TestServicesInProcess runs the same on virtual time through the sandbox's
// in-process transport.
func TestServicesInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exerciseServices(t, sandboxClient(t, sandbox.New()))
	})
}

func exerciseServices(t *testing.T, c *Client) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	me, err := c.Me(ctx)
	must(err)
	if !strings.HasPrefix(me.KeyID, "key_") || !strings.HasPrefix(me.Organization.ID, "org_") || me.Principal.Type == "" {
		t.Errorf("Me = %+v", me)
	}

	ada, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada", Email: String("ada@example.com"), Company: String("Engines"), Tags: []string{"a"}})
	must(err)
	if !strings.HasPrefix(ada.ID, "con_") || ada.Name != "Ada" || ada.Email.Value() != "ada@example.com" || !slices.Equal(ada.Tags, []string{"a"}) {
		t.Errorf("Create = %+v", ada)
	}
	for i := range 4 {
		_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Bulk " + string(rune('A'+i))})
		must(err)
	}
	got, err := c.Contacts.Get(ctx, ada.ID)
	must(err)
	if got.ID != ada.ID || got.Name != "Ada" {
		t.Errorf("Get = %+v", got)
	}
	page, err := c.Contacts.List(ctx, &ListContactsParams{Limit: Int(2)})
	must(err)
	if len(page.Data) != 2 || !page.NextCursor.IsSet() {
		t.Errorf("List(limit 2) = %d contacts, next %v", len(page.Data), page.NextCursor)
	}
	var names []string
	for ct, err := range c.Contacts.All(ctx, &ListContactsParams{Limit: Int(2)}) {
		must(err)
		names = append(names, ct.Name)
	}
	if len(names) != 5 || names[0] != "Ada" {
		t.Errorf("All = %v", names)
	}
	count, err := c.Contacts.Count(ctx, &CountContactsParams{Q: String("bulk")})
	must(err)
	if count.Count != 4 {
		t.Errorf("Count(q=bulk) = %d", count.Count)
	}
	upd, err := c.Contacts.Update(ctx, ada.ID, ContactUpdate{Phone: Value("+49 30 1234"), Company: Null[string]()})
	must(err)
	if upd.Phone.Value() != "+49 30 1234" || !upd.Company.IsNull() || upd.Email.Value() != "ada@example.com" {
		t.Errorf("Update = %+v", upd)
	}
	_, err = c.Contacts.Create(ctx, ContactCreate{Name: ""})
	var apiErr *Error
	if !errors.Is(err, ErrValidation) || !errors.As(err, &apiErr) || len(apiErr.Fields) == 0 || apiErr.Fields[0].Field != "name" {
		t.Errorf("Create(no name) = %v", err)
	}

	inv, err := c.Invoices.Create(ctx, InvoiceCreate{ContactID: ada.ID, Amount: 5000, Currency: "EUR", Status: Value(InvoiceStatusOpen)})
	must(err)
	if inv.Status != InvoiceStatusOpen || inv.Amount != 5000 {
		t.Errorf("Invoices.Create = %+v", inv)
	}
	paid, err := c.Invoices.Pay(ctx, inv.ID)
	must(err)
	if paid.Status != InvoiceStatusPaid {
		t.Errorf("Pay = %+v", paid)
	}
	if _, err := c.Invoices.Pay(ctx, inv.ID); !errors.Is(err, ErrInvalidState) {
		t.Errorf("paying twice = %v", err)
	}
	part, err := c.Invoices.Refund(ctx, inv.ID, InvoiceRefund{Amount: Int64(1000)})
	must(err)
	if part.AmountRefunded != 1000 {
		t.Errorf("partial Refund = %+v", part)
	}
	full, err := c.Invoices.Refund(ctx, inv.ID, InvoiceRefund{})
	must(err)
	if full.Status != InvoiceStatusRefunded || full.AmountRefunded != 5000 {
		t.Errorf("Refund = %+v", full)
	}
	gotInv, err := c.Invoices.Get(ctx, inv.ID)
	must(err)
	invs, err := c.Invoices.List(ctx, &ListInvoicesParams{Status: Value(InvoiceStatusRefunded)})
	must(err)
	if gotInv.ID != inv.ID || len(invs.Data) != 1 {
		t.Errorf("Invoices.Get/List = %+v, %d", gotInv, len(invs.Data))
	}
	n := 0
	for _, err := range c.Invoices.All(ctx, nil) {
		must(err)
		n++
	}
	if n != 1 {
		t.Errorf("Invoices.All = %d", n)
	}

	op, err := c.Exports.Create(ctx, ExportCreate{Resource: ExportResourceContacts, Format: ExportFormatCSV})
	must(err)
	if op.Status != OperationStatusRunning || !strings.HasPrefix(op.ID, "op_") {
		t.Errorf("Exports.Create = %+v", op)
	}
	again, err := c.Operations.Get(ctx, op.ID)
	must(err)
	if again.ID != op.ID {
		t.Errorf("Operations.Get = %+v", again)
	}
	done, err := c.Operations.Wait(ctx, op.ID)
	must(err)
	if done.Status != OperationStatusSucceeded || done.Result.Value().Records != 5 {
		t.Errorf("Wait = %+v", done)
	}

	must(c.Contacts.Delete(ctx, ada.ID))
	if _, err := c.Contacts.Get(ctx, ada.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete = %v", err)
	}

	var types []EventType
	for ev, err := range c.Events.All(ctx, &ListEventsParams{Limit: Int(3)}) {
		must(err)
		types = append(types, ev.Type)
	}
	if len(types) < 10 || types[0] != EventTypeContactCreated || !slices.Contains(types, EventTypeInvoicePaid) || !slices.Contains(types, EventTypeContactDeleted) {
		t.Errorf("Events.All = %v", types)
	}
	evPage, err := c.Events.List(ctx, &ListEventsParams{Limit: Int(1)})
	must(err)
	if len(evPage.Data) != 1 {
		t.Errorf("Events.List = %+v", evPage)
	}

	body := json.RawMessage(`{"name":"In a batch"}`)
	res, err := c.Batch(ctx, BatchRequest{Requests: []BatchRequestItem{
		{Method: BatchMethodPost, Path: "/v1/contacts", Body: Value(body)},
		{Method: BatchMethodGet, Path: "/v1/contacts/count"},
		{Method: BatchMethodGet, Path: "/v1/contacts/con_00000000000000000000000000"},
	}})
	must(err)
	if len(res.Responses) != 3 || res.Responses[0].Status != 201 || res.Responses[1].Status != 200 || res.Responses[2].Status != 404 {
		t.Errorf("Batch = %+v", res)
	}

	rl, err := c.RateLimit(ctx)
	must(err)
	var policyNames []string
	for _, p := range rl.Policies {
		policyNames = append(policyNames, p.Name)
	}
	for _, want := range []string{"key", "write", "parallel", "principal", "org", "delete", "delete-day", "egress"} {
		if !slices.Contains(policyNames, want) {
			t.Errorf("RateLimit lacks %s: %v", want, policyNames)
		}
	}

	spec, err := c.OpenAPI(ctx)
	must(err)
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(*spec, &doc); err != nil || doc.OpenAPI != "3.0.3" {
		t.Errorf("OpenAPI = %v, %q", err, doc.OpenAPI)
	}
}

func TestRequestsCarryVersionAgentAndKey(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[],"nextCursor":null}`))
	}))
	defer srv.Close()
	c, err := NewClient(WithAPIKey(testKey), WithBaseURL(srv.URL+"/base"), WithLogger(quiet), WithHeader("X-Trace", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Contacts.List(context.Background(), nil, WithHeader("X-Call", "c1")); err != nil {
		t.Fatal(err)
	}
	if seen.Get("Bodo-Version") != APIVersion || seen.Get("User-Agent") != "bodo-go/"+Version ||
		seen.Get("Authorization") != "Bearer "+testKey || seen.Get("X-Trace") != "t1" || seen.Get("X-Call") != "c1" {
		t.Errorf("headers: %v", seen)
	}
	if seen.Get("Idempotency-Key") != "" {
		t.Error("a GET carries an Idempotency-Key")
	}
}

func TestNewClientConfiguration(t *testing.T) {
	t.Setenv("BODO_API_KEY", "")
	t.Setenv("BODO_BASE_URL", "")
	if _, err := NewClient(); err == nil || !strings.Contains(err.Error(), "BODO_API_KEY") {
		t.Errorf("no key: %v", err)
	}
	for _, bad := range []string{"ftp://api.bodo-app.com", "https://", "http://api.bodo-app.com", "https://u:p@api.bodo-app.com", "https://api.bodo-app.com/?x=1", "https://api.bodo-app.com?", "://nope"} {
		if _, err := NewClient(WithAPIKey(testKey), WithBaseURL(bad)); err == nil {
			t.Errorf("base URL %q accepted", bad)
		}
	}
	for _, good := range []string{"https://api.bodo-app.com", "http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:9"} {
		if _, err := NewClient(WithAPIKey(testKey), WithBaseURL(good)); err != nil {
			t.Errorf("base URL %q: %v", good, err)
		}
	}
	if _, err := NewClient(WithAPIKey(testKey), WithBaseURL("http://api.internal"), WithInsecureHTTP()); err != nil {
		t.Errorf("WithInsecureHTTP: %v", err)
	}
	if _, err := NewClient(WithAPIKey(testKey), WithMaxRetries(-1)); err == nil {
		t.Error("negative MaxRetries accepted")
	}
	t.Setenv("BODO_API_KEY", testKey)
	t.Setenv("BODO_BASE_URL", "https://sandbox.example.com")
	c, err := NewClient()
	if err != nil || c.server != "https://sandbox.example.com/" || c.apiKey() != testKey || c.defaults.maxRetries != DefaultMaxRetries {
		t.Errorf("from the environment: %v %+v", err, c)
	}
	if _, err := c.Contacts.Get(context.Background(), "con_1", WithIdempotencyKey("")); err == nil {
		t.Error("an empty idempotency key is accepted")
	}
	// An empty option is a variable that was not set: an error, not the
	// environment's key or the production API.
	if _, err := NewClient(WithAPIKey("")); err == nil || !strings.Contains(err.Error(), "WithAPIKey") {
		t.Errorf("WithAPIKey(\"\"): %v", err)
	}
	if _, err := NewClient(WithBaseURL("")); err == nil || !strings.Contains(err.Error(), "WithBaseURL") {
		t.Errorf("WithBaseURL(\"\"): %v", err)
	}
	var nilStore *nilStoreType
	for _, store := range []budgetstore.Store{nil, nilStore} {
		if _, err := NewClient(WithSharedBudget(store)); err == nil || !strings.Contains(err.Error(), "WithSharedBudget") {
			t.Errorf("WithSharedBudget(%#v): %v", store, err)
		}
	}
}

// nilStoreType is a Store whose nil pointer a caller might pass.
type nilStoreType struct{ budgetstore.Store }

// TestDroppedAfterCommitIsRetriedWithItsKey: the connection drops after the
// server committed the create; the retry carries the same key, the server
// replays, and exactly one contact exists.
func TestDroppedAfterCommitIsRetriedWithItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dropped := false
		srv := sandbox.New(sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
			if r.Method == http.MethodPost && !dropped {
				dropped = true
				return sandbox.Fault{DropAfterCommit: true}
			}
			return sandbox.Fault{}
		}))
		c := sandboxClient(t, srv)
		ct, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Once"})
		if err != nil {
			t.Fatal(err)
		}
		if ct.Name != "Once" || srv.ContactsNamed("Once") != 1 || srv.Stats(sandbox.TestKey).Writes != 1 {
			t.Errorf("contacts named Once: %d, writes %d", srv.ContactsNamed("Once"), srv.Stats(sandbox.TestKey).Writes)
		}
		if srv.Stats(sandbox.TestKey).Requests != 2 {
			t.Errorf("%d requests, want 2", srv.Stats(sandbox.TestKey).Requests)
		}
	})
}

// TestDroppedAfterCommitWithoutKeyIsNotRetried: without a key the client
// cannot tell whether the write happened, so it does not repeat it.
func TestDroppedAfterCommitWithoutKeyIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
			return sandbox.Fault{DropAfterCommit: r.Method == http.MethodPost}
		}))
		c := sandboxClient(t, srv)
		_, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Maybe"}, WithoutIdempotencyKey())
		if !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "not retried") {
			t.Fatalf("err = %v", err)
		}
		if srv.ContactsNamed("Maybe") != 1 || srv.Stats(sandbox.TestKey).Requests != 1 {
			t.Errorf("contacts %d, requests %d", srv.ContactsNamed("Maybe"), srv.Stats(sandbox.TestKey).Requests)
		}
	})
}

// TestOverloadedIsRetried: OVERLOADED 503 and 429 are retried after their
// Retry-After plus spacing.
func TestOverloadedIsRetried(t *testing.T) {
	for _, status := range []int{429, 503} {
		synctest.Test(t, func(t *testing.T) {
			n := 0
			srv := sandbox.New(sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
				if n++; n <= 2 {
					return sandbox.Fault{Overloaded: status, RetryAfter: 2 * time.Second}
				}
				return sandbox.Fault{}
			}))
			c := sandboxClient(t, srv)
			start := time.Now()
			if _, err := c.Me(context.Background()); err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el < 2*(2*time.Second+time.Second) {
				t.Errorf("status %d: done after %v, sooner than two waits of 2 s plus 1 s spacing", status, el)
			}
			if got := srv.Stats(sandbox.TestKey).Refusals[CodeOverloaded]; got != 2 {
				t.Errorf("status %d: %d OVERLOADED", status, got)
			}
		})
	}
}

// TestLockoutNeverTriggered hammers a sandbox with tiny limits from 64
// goroutines for 10 virtual minutes: the server never locks the key and no
// 60 s window holds more than 25 refusals.
func TestLockoutNeverTriggered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := sandbox.DefaultLimits()
		lim.KeyQuota, lim.KeyCapacity, lim.Parallel = 30, 30, 2
		srv := sandbox.New(sandbox.WithLimits(lim), sandbox.WithLatency(50*time.Millisecond))
		var refusals []time.Time
		var mu = make(chan struct{}, 1)
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := srv.Transport().RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				mu <- struct{}{}
				refusals = append(refusals, time.Now())
				<-mu
			}
			return resp, err
		})
		c := newTestClient(t, rt, WithAPIKey(sandbox.TestKey), WithMaxRetries(5))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		done := make(chan struct{})
		for g := range 64 {
			go func() {
				defer func() { done <- struct{}{} }()
				for ctx.Err() == nil {
					var err error
					if g%2 == 0 {
						_, err = c.Contacts.Get(ctx, "con_00000000000000000000000000")
					} else {
						_, err = c.Contacts.List(ctx, &ListContactsParams{Limit: Int(1)})
					}
					var apiErr *Error
					if errors.As(err, &apiErr) && apiErr.Local {
						_ = sleep(ctx, apiErr.RetryAfter)
					}
				}
			}()
		}
		for range 64 {
			<-done
		}
		// The sandbox finishes the requests whose callers gave up when the run
		// ended; a goroutine still asleep in it would outlive the bubble.
		time.Sleep(time.Second)
		st := srv.Stats(sandbox.TestKey)
		if st.Lockouts != 0 {
			t.Errorf("%d lockouts", st.Lockouts)
		}
		worst := 0
		for i := range refusals {
			j := i
			for j < len(refusals) && refusals[j].Sub(refusals[i]) < time.Minute {
				j++
			}
			worst = max(worst, j-i)
		}
		if worst > budget.RefusalLimit {
			t.Errorf("%d refusals in one 60 s window", worst)
		}
		if st.Accepted < 150 {
			t.Errorf("only %d calls accepted in 10 minutes", st.Accepted)
		}
		t.Logf("requests %d, accepted %d, refusals %d, worst 60 s window %d", st.Requests, st.Accepted, len(refusals), worst)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAReplayedProblemIsNoWrite: the server replays the first answer to a
// key, a problem too (here 422 VALIDATION_FAILED), and a replay costs 1
// point and is no write (bodo-api.md): 60 replays of a failed create leave
// the write level as the first left it, and the next write goes at once.
func TestAReplayedProblemIsNoWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		c := sandboxClient(t, srv)
		ctx := context.Background()
		for i := 0; i < 61; i++ { // the first answer, then 60 replays of it
			_, err := c.Contacts.Create(ctx, ContactCreate{Name: ""}, WithIdempotencyKey("reused-for-the-same-request"))
			if !errors.Is(err, ErrValidation) {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		var model float64
		for _, l := range c.Budget().Levels {
			if l.Name == "write" {
				model = l.Remaining
			}
		}
		start := time.Now()
		if _, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"}); err != nil {
			t.Fatal(err)
		}
		waited := time.Since(start)
		// The server counted one write (the first answer, a failed write),
		// none for the replays: 59 of 60 left.
		if model < 58 || waited > 0 {
			t.Errorf("after the first answer and 60 replays of it the server's write level has 59 of 60 left, the client's model %.1f; the next write waited %v (want 0)", model, waited)
		}
	})
}

// TestWaitEndsOnAStatusItDoesNotKnow: an operation whose status the client
// does not know (a later version of the API's "canceled") is no longer
// running: Wait returns it after one poll, with an *Error saying so.
func TestWaitEndsOnAStatusItDoesNotKnow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		polls := 0
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			polls++
			body := `{"id":"op_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","kind":"export","status":"canceled","createdAt":"2026-11-30T10:00:00Z","finishedAt":"2026-11-30T10:00:05Z","result":null,"error":null}`
			return answerWith(r, http.StatusOK, "application/json", []byte(body), nil), nil
		})
		c := hostileClient(t, uniqueBaseURL(), rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		op, err := c.Operations.Wait(ctx, "op_01JBD8Y3K5M7Q2W9X4Z6T1V0NP")
		var e *Error
		if polls != 1 || op == nil || op.Status != "canceled" || !errors.As(err, &e) || e.Title != "Unknown operation status" {
			t.Errorf("Wait polled %d times and returned %v, %v; want the operation after one poll, with an *Error", polls, op, err)
		}
	})
}

// TestACallsHeaderReplacesTheClients: a call's WithHeader("Accept-Language",
// "en") over a client's "de" sends "en", not both, and gets the English
// problem bodotest answers.
func TestACallsHeaderReplacesTheClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		var sent []string
		spy := func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
			sent = req.Header.Values("Accept-Language")
			return next(req)
		}
		c, err := NewClient(WithBaseURL(srv.URL), WithHTTPClient(srv.Client()), WithAPIKey(bodotest.APIKey),
			WithLogger(quiet), WithHeader("Accept-Language", "de"), WithMiddleware(spy))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Contacts.Get(t.Context(), "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP", WithHeader("Accept-Language", "en"))
		var e *Error
		if !errors.As(err, &e) || e.Response == nil {
			t.Fatalf("err = %v", err)
		}
		if len(sent) != 1 || sent[0] != "en" || e.Response.Header.Get("Content-Language") != "en" {
			t.Errorf("per-call WithHeader(Accept-Language, en) over the client's de: sent %q, answered Content-Language %q, title %q",
				sent, e.Response.Header.Get("Content-Language"), e.Title)
		}
	})
}

// TestAClientNotMadeByNewClientFailsWithAnError: a zero or nil Client
// prints without a panic, has an empty Budget, and its calls fail with an
// error that says so.
func TestAClientNotMadeByNewClientFailsWithAnError(t *testing.T) {
	var nilClient *Client
	for _, c := range []*Client{new(Client), nilClient} {
		for _, printed := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%#v", c), c.LogValue().String()} {
			if !strings.Contains(printed, "not made by NewClient") {
				t.Errorf("printed as %q", printed)
			}
		}
		if b := c.Budget(); len(b.Levels) != 0 || c.KeyID() != "" {
			t.Errorf("Budget of a client not made by NewClient: %+v", b)
		}
		if _, err := c.RateLimit(context.Background()); err == nil || !strings.Contains(err.Error(), "NewClient") {
			t.Errorf("RateLimit: %v", err)
		}
		if _, err := c.Batch(context.Background(), BatchRequest{}); err == nil || !strings.Contains(err.Error(), "NewClient") {
			t.Errorf("Batch: %v", err)
		}
	}
}
