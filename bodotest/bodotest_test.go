package bodotest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
)

// TestMain fails the package when an exchange of its tests (examples
// included) violated openapi.json.
func TestMain(m *testing.M) { speccheck.Main(m) }

// newClient is what a user's test writes, quiet.
func newClient(t *testing.T, srv *bodotest.Server, opts ...bodo.Option) *bodo.Client {
	t.Helper()
	client, err := bodo.NewClient(append([]bodo.Option{bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(bodotest.APIKey), bodo.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// importContacts creates n contacts from 20 goroutines, as the import of
// the first-hour report did, and returns how long it took.
func importContacts(t *testing.T, client *bodo.Client, n int) time.Duration {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, n)
	for range 20 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, err := client.Contacts.Create(t.Context(), bodo.ContactCreate{Name: fmt.Sprintf("Contact %d", i)}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return time.Since(start)
}

// quota is what client's RateLimit reports for the level.
func quota(t *testing.T, client *bodo.Client, level string) int {
	t.Helper()
	st, err := client.RateLimit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Policies {
		if p.Name == level {
			return p.Quota
		}
	}
	t.Fatalf("RateLimit has no %s level", level)
	return 0
}

func TestDefaultIsTheDocumentedLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		client := newClient(t, srv)
		// 300 creates: 60 at once from the write level, then one a second.
		if took := importContacts(t, client, 300); took < 235*time.Second || took > 250*time.Second {
			t.Errorf("300 creates took %v, want about 4 minutes", took)
		}
		if q := quota(t, client, "write"); q != 60 {
			t.Errorf("write quota %d", q)
		}
	})
}

func TestWithoutLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer(bodotest.WithoutLimits())
		defer srv.Close()
		client := newClient(t, srv)
		if took := importContacts(t, client, 300); took > time.Millisecond {
			t.Errorf("300 creates took %v", took)
		}
		if q := quota(t, client, "write"); q != 60_000_000 {
			t.Errorf("write quota %d", q)
		}
	})
}

// TestWithoutLimitsInRealTime is the user's test that does not use
// synctest: the import takes no noticeable time.
func TestWithoutLimitsInRealTime(t *testing.T) {
	srv := bodotest.NewServer(bodotest.WithoutLimits())
	defer srv.Close()
	if took := importContacts(t, newClient(t, srv), 300); took > 10*time.Second {
		t.Errorf("300 creates took %v", took)
	}
}

func TestWithLimitFactor(t *testing.T) {
	t.Run("the factor scales every level", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := bodotest.NewServer(bodotest.WithLimitFactor(2))
			defer srv.Close()
			// The write level holds 120 and refills two a second.
			raw := newClient(t, srv, bodo.WithoutBudget(), bodo.WithMaxRetries(0))
			for i := range 121 {
				_, err := raw.Contacts.Create(t.Context(), bodo.ContactCreate{Name: "Ada"})
				var apiErr *bodo.Error
				switch {
				case i < 120 && err != nil:
					t.Fatalf("create %d: %v", i+1, err)
				case i == 120 && (!errors.As(err, &apiErr) || apiErr.Policy != "write" || apiErr.RetryAfter != 500*time.Millisecond):
					t.Fatalf("create 121: %v", err)
				}
			}
			time.Sleep(time.Minute)
			// With the budget, 300 creates take at least the 90 s the server
			// asks for (120 at once, then two a second), and less than the 4
			// minutes of the documented limits.
			if took := importContacts(t, newClient(t, srv), 300); took < 90*time.Second || took > 150*time.Second {
				t.Errorf("300 creates took %v", took)
			}
		})
	})
	t.Run("the last of WithLimitFactor and WithoutLimits counts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The last of WithLimitFactor and WithoutLimits counts, and the
			// factor applies to the profile whatever the order.
			srv := bodotest.NewServer(bodotest.WithoutLimits(), bodotest.WithLimitFactor(3), bodotest.WithProfile(bodotest.SmallPlan))
			defer srv.Close()
			if q := quota(t, newClient(t, srv), "key"); q != 450 {
				t.Errorf("key quota %d, want 3 × 150", q)
			}
		})
	})
}

func TestBadOptionsAnswer500(t *testing.T) {
	for _, tc := range []struct {
		opt  bodotest.Option
		want string
	}{
		{bodotest.WithLimitFactor(0), "WithLimitFactor(0)"},
		{bodotest.WithLimitFactor(-2), "WithLimitFactor(-2)"},
		{bodotest.WithLimitFactor(2e6), "WithLimitFactor(2e+06)"},
		{bodotest.WithProfile("huge-plan"), `WithProfile("huge-plan")`},
	} {
		srv := bodotest.NewServer(tc.opt, bodotest.WithoutLimits())
		_, err := newClient(t, srv).Me(t.Context())
		var apiErr *bodo.Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusInternalServerError || !strings.Contains(apiErr.Detail, tc.want) {
			t.Errorf("%s: the call returned %v", tc.want, err)
		}
		if err := srv.Start(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Start returned %v", tc.want, err)
		}
		srv.Close()
	}
	// A nil option is no option.
	srv := bodotest.NewServer(nil)
	defer srv.Close()
	if _, err := newClient(t, srv).Me(t.Context()); err != nil {
		t.Error(err)
	}
}

func TestWithProfile(t *testing.T) {
	profiles := bodotest.Profiles()
	want := []bodotest.Profile{bodotest.Documented, bodotest.SmallPlan, bodotest.BigPlan, bodotest.SlidingLog,
		bodotest.FixedWindow, bodotest.SlidingLogFar, bodotest.NoisyHeaders, bodotest.SearchPolicy, bodotest.Overloaded, bodotest.Foreign90,
		bodotest.Foreign90Log, bodotest.Foreign90Greedy, bodotest.Foreign90Ticks,
		bodotest.Foreign90Drain, bodotest.Foreign90Late, bodotest.NarrowestAll, bodotest.ContradictedHeaders, bodotest.TwoKeys, bodotest.TwoKeysLog, bodotest.Gateway}
	if !slices.Equal(profiles, want) {
		t.Errorf("Profiles() = %q, want the constants %q", profiles, want)
	}
	for _, p := range profiles {
		sp, ok := sandbox.ProfileByName(string(p))
		if !ok || p.Summary() != sp.Summary || p.Summary() == "" {
			t.Errorf("%s: summary %q", p, p.Summary())
		}
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := bodotest.NewServer(bodotest.WithProfile(p))
				defer srv.Close()
				client := newClient(t, srv, bodo.WithMaxRetries(10))
				if _, err := client.Contacts.Create(t.Context(), bodo.ContactCreate{Name: "Ada"}); err != nil {
					t.Fatal(err)
				}
				if got, want := quota(t, client, "key"), sp.Limits.KeyQuota; got != want && want != 0 {
					t.Errorf("key quota %d, want %d", got, want)
				}
			})
		})
	}
	if s := bodotest.Profile("").Summary(); s != bodotest.Documented.Summary() {
		t.Errorf("the empty profile's summary is %q", s)
	}
	if s := bodotest.Profile("nope").Summary(); s != "" {
		t.Errorf("an unknown profile's summary is %q", s)
	}
}

func TestWithFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		srv := bodotest.NewServer(bodotest.WithFaults(func(r *http.Request) bodotest.Fault {
			switch n := calls.Add(1); {
			case n == 1:
				return bodotest.Fault{Overloaded: http.StatusServiceUnavailable, RetryAfter: 3 * time.Second, HintInBodyOnly: true}
			case n == 2:
				return bodotest.Fault{DropAfterCommit: true}
			case r.Method == http.MethodGet:
				return bodotest.Fault{Delay: 5 * time.Second}
			}
			return bodotest.Fault{}
		}))
		defer srv.Close()
		var retries []time.Duration
		client := newClient(t, srv, bodo.WithOnRetry(func(e bodo.RetryEvent) { retries = append(retries, e.Wait) }))
		start := time.Now()
		ada, err := client.Contacts.Create(t.Context(), bodo.ContactCreate{Name: "Ada"})
		if err != nil {
			t.Fatal(err)
		}
		// Overloaded for 3 s; then created, but the answer lost; then the
		// replay of the stored answer.
		if len(retries) != 2 || retries[0] < 3*time.Second || time.Since(start) < 3*time.Second {
			t.Errorf("retries after %v after %v", retries, time.Since(start))
		}
		start = time.Now()
		n, err := client.Contacts.Count(t.Context(), nil)
		if err != nil || n.Count != 1 {
			t.Errorf("count %+v, %v", n, err)
		}
		if took := time.Since(start); took != 5*time.Second {
			t.Errorf("a delayed GET took %v", took)
		}
		if got, err := client.Contacts.Get(t.Context(), ada.ID); err != nil || got.Name != "Ada" {
			t.Errorf("get %+v, %v", got, err)
		}
	})
}

func TestLanguages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		for _, tc := range []struct {
			opts                        []bodo.Option
			title, detail, field, state string
		}{
			{nil, "Ungültige Felder", "2 Felder sind ungültig", "muss größer als 0 sein", "Ungültiger Zustand"},
			{[]bodo.Option{bodo.WithHeader("Accept-Language", "en")}, "Invalid fields", "2 fields are invalid",
				"must be greater than 0", "Invalid state"},
		} {
			client := newClient(t, srv, tc.opts...)
			_, err := client.Invoices.Create(t.Context(), bodo.InvoiceCreate{ContactID: "con_00000000000000000000000000", Currency: "EUR"})
			var apiErr *bodo.Error
			if !errors.As(err, &apiErr) || apiErr.Title != tc.title || apiErr.Detail != tc.detail || len(apiErr.Fields) != 2 ||
				apiErr.Fields[1].Message != tc.field || apiErr.Response.Header.Get("Content-Language") == "" {
				t.Fatalf("%v: %+v", err, apiErr)
			}
			if strings.Contains(err.Error(), ".;") {
				t.Errorf("doubled punctuation: %v", err)
			}
			ada, err := client.Contacts.Create(t.Context(), bodo.ContactCreate{Name: "Ada"})
			if err != nil {
				t.Fatal(err)
			}
			inv, err := client.Invoices.Create(t.Context(), bodo.InvoiceCreate{ContactID: ada.ID, Amount: 100, Currency: "EUR"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.Invoices.Pay(t.Context(), inv.ID); !errors.As(err, &apiErr) || apiErr.Title != tc.state {
				t.Errorf("pay a draft: %v", err)
			}
		}
	})
}

func TestKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		for key, want := range map[string]string{bodotest.APIKey: sandbox.TestKey, bodotest.SecondKey: sandbox.SecondKey,
			bodotest.ForeignKey: sandbox.ForeignKey} {
			if key != want {
				t.Errorf("key %s, the sandbox's %s", key, want)
			}
		}
		names := map[string]string{}
		for _, key := range []string{bodotest.APIKey, bodotest.SecondKey, bodotest.ForeignKey} {
			me, err := newClient(t, srv, bodo.WithAPIKey(key)).Me(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			names[key] = me.Principal.Name
		}
		if names[bodotest.APIKey] != names[bodotest.SecondKey] || names[bodotest.APIKey] == names[bodotest.ForeignKey] {
			t.Errorf("principals %v", names)
		}
		_, err := newClient(t, srv, bodo.WithAPIKey("bodo_test_unknown0000000000000000")).Me(t.Context())
		if !errors.Is(err, bodo.ErrUnauthenticated) {
			t.Errorf("an unknown key: %v", err)
		}
	})
}

func TestServersAreSeparate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := bodotest.NewServer(), bodotest.NewServer()
		defer a.Close()
		defer b.Close()
		if a.URL == b.URL || !strings.HasPrefix(a.URL, "https://") || a.Client() != a.Client() {
			t.Errorf("URLs %s and %s", a.URL, b.URL)
		}
		if _, err := newClient(t, a).Contacts.Create(t.Context(), bodo.ContactCreate{Name: "Ada"}); err != nil {
			t.Fatal(err)
		}
		if n, err := newClient(t, b).Contacts.Count(t.Context(), nil); err != nil || n.Count != 0 {
			t.Errorf("the other server counts %+v, %v", n, err)
		}
	})
}

func TestCloseInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		client := newClient(t, srv, bodo.WithMaxRetries(0))
		if _, err := client.Me(t.Context()); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		srv.Close()
		if _, err := client.Me(t.Context()); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("a call after Close: %v", err)
		}
		if err := srv.Start(); err == nil {
			t.Error("Start after Close succeeded")
		}
		var none *bodotest.Server
		none.Close()
	})
}

func TestStart(t *testing.T) {
	srv := bodotest.NewServer(bodotest.WithoutLimits())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Errorf("URL %s", srv.URL)
	}
	if err := srv.Start(); err == nil {
		t.Error("Start twice succeeded")
	}
	client := newClient(t, srv)
	if _, err := client.Contacts.Create(t.Context(), bodo.ContactCreate{Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	// The URL serves any HTTP client, not only Client.
	resp, err := http.Get(srv.URL + "/v1/me")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Language") != "de" {
		t.Errorf("GET without a key: %d %s", resp.StatusCode, body)
	}
	srv.Close()
	srv.Close()
	if _, err := http.Get(srv.URL + "/v1/me"); err == nil {
		t.Error("the listener is still open after Close")
	}
	if _, err := client.Me(t.Context()); err == nil {
		t.Error("Client still works after Close")
	}
}

// TestServeHTTP mounts a Server on a server of the test's own.
func TestServeHTTP(t *testing.T) {
	srv := bodotest.NewServer()
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	client, err := bodo.NewClient(bodo.WithBaseURL(hs.URL), bodo.WithAPIKey(bodotest.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Me(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestABatchSentAgainWithItsKeyIsReplayed: a batch sent twice with the
// caller's own Idempotency-Key is the same request twice, its write parts'
// keys included, so the server replays it and creates the contact once.
func TestABatchSentAgainWithItsKeyIsReplayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer(bodotest.WithoutLimits())
		defer srv.Close()
		c := newClient(t, srv)
		part, err := bodo.BatchPart(bodo.BatchMethodPost, "/v1/contacts", bodo.ContactCreate{Name: "Ada"})
		if err != nil {
			t.Fatal(err)
		}
		req := bodo.BatchRequest{Requests: []bodo.BatchRequestItem{part}}
		for i := range 2 {
			if _, err := c.Batch(t.Context(), req, bodo.WithIdempotencyKey("batch-1")); err != nil {
				t.Fatalf("batch %d with the key batch-1: %v", i, err)
			}
		}
		count, err := c.Contacts.Count(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if count.Count != 1 {
			t.Errorf("%d contacts after the same batch twice, want 1", count.Count)
		}
	})
}

// TestCloseWaitsForTheRequestsBeingServed: as httptest.Server.Close does,
// Close returns only once the handlers of requests it found being served
// have returned, in-process and after Start.
func TestCloseWaitsForTheRequestsBeingServed(t *testing.T) {
	for _, start := range []bool{false, true} {
		entered, release := make(chan struct{}), make(chan struct{})
		srv := bodotest.NewServer(bodotest.WithoutLimits(), bodotest.WithFaults(func(r *http.Request) bodotest.Fault {
			if strings.HasSuffix(r.URL.Path, "/v1/me") {
				close(entered)
				<-release // the handler is busy
			}
			return bodotest.Fault{}
		}))
		if start {
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
		}
		client := newClient(t, srv)
		go func() { _, _ = client.Me(context.Background()) }()
		<-entered
		closed := make(chan struct{})
		go func() { srv.Close(); close(closed) }()
		select {
		case <-closed:
			t.Errorf("Start %v: Close returned while a handler was still running", start)
		case <-time.After(300 * time.Millisecond):
		}
		close(release)
		<-closed
	}
}

// TestReplaysOfOneKeyCostAWriteOnce: six creates with one key of the
// caller's are one write and five replays, which the server charges a
// point each and no write; the client's write level stays where the
// server's is.
func TestReplaysOfOneKeyCostAWriteOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		c := newClient(t, srv)
		for range 6 {
			if _, err := c.Contacts.Create(t.Context(), bodo.ContactCreate{Name: "Ada"}, bodo.WithIdempotencyKey("import-1")); err != nil {
				t.Fatal(err)
			}
		}
		server, client := -1, -1.0
		for _, l := range c.Budget().Levels { // before the status answer sets it right
			if l.Name == "write" {
				client = l.Remaining
			}
		}
		st, err := c.RateLimit(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Policies {
			if p.Name == "write" {
				server = p.Remaining
			}
		}
		if server != 59 || client < 58.5 {
			t.Errorf("after one write and five replays: the server's write level holds %d, the client's %v; want 59 both", server, client)
		}
	})
}
