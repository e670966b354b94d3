package agents

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/gen/oapi"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

func newRaw(t *testing.T, rt http.RoundTripper) Raw {
	t.Helper()
	c, err := oapi.NewClientWithResponses("https://raw.test", oapi.WithHTTPClient(&http.Client{Transport: rt}),
		oapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+sandbox.TestKey)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return Raw{Client: c}
}

// TestRawCalls runs every call of the API through Raw once.
func TestRawCalls(t *testing.T) {
	srv := sandbox.New()
	api := newRaw(t, srv.Transport())
	ctx := context.Background()
	ct, err := api.CreateContact(ctx, bodo.ContactCreate{Name: "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := api.GetContact(ctx, ct.ID); err != nil || got.Name != "Ada" {
		t.Fatalf("get: %v, %v", got, err)
	}
	if _, err := api.UpdateContact(ctx, ct.ID, bodo.ContactUpdate{Phone: bodo.Value("+49 30 1")}); err != nil {
		t.Fatal(err)
	}
	if l, err := api.ListContacts(ctx, &bodo.ListContactsParams{Limit: bodo.Int(5), Q: bodo.String("ada")}); err != nil || len(l.Data) != 1 {
		t.Fatalf("list: %v, %v", l, err)
	}
	if n, err := api.CountContacts(ctx, nil); err != nil || n.Count != 1 {
		t.Fatalf("count: %v, %v", n, err)
	}
	inv, err := api.CreateInvoice(ctx, bodo.InvoiceCreate{ContactID: ct.ID, Amount: 100, Currency: "EUR", Status: bodo.Value(bodo.InvoiceStatusOpen)})
	if err != nil {
		t.Fatal(err)
	}
	if paid, err := api.PayInvoice(ctx, inv.ID); err != nil || paid.Status != bodo.InvoiceStatusPaid {
		t.Fatalf("pay: %v, %v", paid, err)
	}
	_, err = api.PayInvoice(ctx, inv.ID)
	var se *StatusError
	if !errors.Is(err, bodo.ErrInvalidState) || !errors.As(err, &se) || se.Status != http.StatusConflict || se.Code != bodo.CodeInvalidState {
		t.Fatalf("paying twice: %v", err)
	}
	if err := api.DeleteContact(ctx, ct.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := api.GetContact(ctx, ct.ID); !errors.Is(err, bodo.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if names, extra := srv.DuplicateContactNames(); names != 0 || extra != 0 {
		t.Fatalf("%d duplicated names", names)
	}
}

// TestRawRefusal checks that a 429 becomes a *StatusError with the
// problem's retryAfterMs, that the agent pauses after it, and that it counts
// as a 429 and a call that gave up.
func TestRawRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLimits(sandbox.Limits{KeyCapacity: 2, KeyQuota: 60}))
		stats := NewStats()
		api := newRaw(t, stats.Transport(srv.Transport()))
		ctx := context.Background()
		if _, err := api.CountContacts(ctx, nil); err != nil {
			t.Fatal(err)
		}
		_, err := api.CountContacts(ctx, nil)
		var se *StatusError
		if !errors.As(err, &se) || se.Status != http.StatusTooManyRequests || se.Code != bodo.CodeRateLimited ||
			!se.Temporary() || se.RetryAfter < time.Second || !errors.Is(err, bodo.ErrRateLimited) {
			t.Fatalf("got %v", err)
		}
		if d, ok := Pause(err); !ok || d != se.RetryAfter {
			t.Fatalf("pause %v, %v after %v", d, ok, err)
		}
		stats.call("count", 0, err)
		c := stats.Snapshot()
		if c.Count429() != 1 || c.GaveUp != 1 || c.Errors[bodo.CodeRateLimited] != 1 {
			t.Fatalf("counts: 429s %d, gave up %d, errors %v", c.Count429(), c.GaveUp, c.Errors)
		}
		time.Sleep(se.RetryAfter)
		if _, err := api.GetContact(ctx, "con_00000000000000000000000000"); !errors.Is(err, bodo.ErrNotFound) {
			t.Fatalf("get of an unknown contact: %v", err)
		} else if _, ok := Pause(err); ok {
			t.Fatalf("a pause after %v", err)
		}
	})
}

// TestRunAPIRaw runs the workload through Raw for two virtual minutes.
func TestRunAPIRaw(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLatency(30 * time.Millisecond))
		stats := NewStats()
		api := newRaw(t, stats.Transport(srv.Transport()))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		RunAPI(ctx, 1, api, stats, seed)
		c := stats.Snapshot()
		st := srv.Stats(sandbox.TestKey)
		if c.Calls == 0 || st.PointsAccepted == 0 {
			t.Fatalf("%d calls, %d points", c.Calls, st.PointsAccepted)
		}
		for kind := range c.Errors {
			if kind != bodo.CodeRateLimited {
				t.Errorf("errors: %v", c.Errors)
			}
		}
		time.Sleep(time.Minute)
	})
}
