package bodotest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
)

// TestRefusalFaults: each refusal fault reaches the caller as the typed
// error of the refusal it plays, with the policy, the wait and the headers
// of the server's own refusal.
func TestRefusalFaults(t *testing.T) {
	cases := []struct {
		name       string
		fault      bodotest.Fault
		is         error
		policy     string
		retryAfter time.Duration // the *Error's
		header     string        // Retry-After; "" for none
		rateLimit  string        // the RateLimit field
		resetsIn   time.Duration // from now to ResetsAt; 0 for none
	}{
		{"rate limited by key", bodotest.Fault{RateLimited: "key", RetryAfter: 2 * time.Second},
			bodo.ErrRateLimited, "key", 2 * time.Second, "2", `"key";r=0;t=120`, 0},
		{"rate limited by write, wait in the body", bodotest.Fault{RateLimited: "write", RetryAfter: 1500 * time.Millisecond, HintInBodyOnly: true},
			bodo.ErrRateLimited, "write", 1500 * time.Millisecond, "", `"write";r=0;t=60`, 0},
		{"rate limited by parallel, default wait", bodotest.Fault{RateLimited: "parallel"},
			bodo.ErrRateLimited, "parallel", time.Second, "1", `"parallel";r=0;t=1`, 0},
		{"locked out", bodotest.Fault{RateLimited: "lockout"},
			bodo.ErrRateLimited, "lockout", 5 * time.Minute, "300", `"key";r=0;t=300`, 0},
		{"egress exhausted", bodotest.Fault{QuotaExhausted: "egress"},
			bodo.ErrQuotaExhausted, "egress", time.Hour, "3600", `"egress";r=0;t=3600`, time.Hour},
		{"delete-day exhausted in 90 minutes", bodotest.Fault{QuotaExhausted: "delete-day", RetryAfter: 90 * time.Minute},
			bodo.ErrQuotaExhausted, "delete-day", 90 * time.Minute, "5400", `"delete-day";r=0;t=5400`, 90 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := bodotest.NewServer(bodotest.WithFaults(func(r *http.Request) bodotest.Fault {
					if r.URL.Path == "/v1/contacts" {
						return tc.fault
					}
					return bodotest.Fault{}
				}))
				defer srv.Close()
				client := newClient(t, srv, bodo.WithMaxRetries(0))
				_, err := client.Contacts.List(t.Context(), nil)
				var e *bodo.Error
				if !errors.Is(err, tc.is) || !errors.As(err, &e) {
					t.Fatalf("%v: want %v", err, tc.is)
				}
				if e.Status != http.StatusTooManyRequests || e.Policy != tc.policy || e.RetryAfter != tc.retryAfter || e.Local {
					t.Errorf("status %d, policy %q, RetryAfter %v, local %v; want 429 by %s after %v",
						e.Status, e.Policy, e.RetryAfter, e.Local, tc.policy, tc.retryAfter)
				}
				h := e.Response.Header
				if h.Get("Retry-After") != tc.header || h.Get("RateLimit") != tc.rateLimit {
					t.Errorf("Retry-After %q, RateLimit %q; want %q and %q", h.Get("Retry-After"), h.Get("RateLimit"), tc.header, tc.rateLimit)
				}
				if in := e.ResetsAt.Sub(time.Now()); tc.resetsIn == 0 && !e.ResetsAt.IsZero() ||
					tc.resetsIn != 0 && (in > tc.resetsIn || in < tc.resetsIn-time.Second) {
					t.Errorf("resets at %v, in %v; want in %v", e.ResetsAt, in, tc.resetsIn)
				}
			})
		})
	}
}

// TestRateLimitedFaultIsRetried: a RATE_LIMITED fault on the first attempt
// is waited out and retried, as a real refusal is, and does not count
// towards a lockout.
func TestRateLimitedFaultIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lists atomic.Int64
		srv := bodotest.NewServer(bodotest.WithFaults(func(r *http.Request) bodotest.Fault {
			if r.URL.Path == "/v1/contacts" && lists.Add(1) == 1 {
				return bodotest.Fault{RateLimited: "key", RetryAfter: 3 * time.Second}
			}
			return bodotest.Fault{}
		}))
		defer srv.Close()
		client := newClient(t, srv)
		start := time.Now()
		if _, err := client.Contacts.List(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		// The budget, told of a refusal by a key level it believed full,
		// may hold the retry up to the level's window.
		if took := time.Since(start); lists.Load() != 2 || took < 3*time.Second || took > time.Minute+time.Second {
			t.Errorf("%d attempts in %v, want 2, the second after the 3 s wait", lists.Load(), took)
		}
		st, err := client.RateLimit(t.Context())
		if err != nil || st.RejectionsLast60s != 0 || st.LockedUntil.IsSet() {
			t.Errorf("status %+v, %v: the fault counted towards a lockout", st, err)
		}
	})
}

// TestBadRefusalFault: a fault naming no policy of the server is answered
// 500 INTERNAL naming it.
func TestBadRefusalFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, f := range []bodotest.Fault{{RateLimited: "egress"}, {QuotaExhausted: "key"}, {RateLimited: "key", QuotaExhausted: "egress"}} {
			srv := bodotest.NewServer(bodotest.WithFaults(func(*http.Request) bodotest.Fault { return f }))
			client := newClient(t, srv, bodo.WithMaxRetries(0))
			_, err := client.Contacts.List(t.Context(), nil)
			if !errors.Is(err, bodo.ErrInternal) || !strings.Contains(err.Error(), "Fault") {
				t.Errorf("%+v: %v, want a 500 naming the fault", f, err)
			}
			srv.Close()
		}
	})
}

// invoiceAndPay is the user's code of the package doc's example: it bills
// a new contact and pays the invoice.
func invoiceAndPay(ctx context.Context, client *bodo.Client, name string, amount int64) (*bodo.Invoice, error) {
	c, err := client.Contacts.Create(ctx, bodo.ContactCreate{Name: name})
	if err != nil {
		return nil, err
	}
	inv, err := client.Invoices.Create(ctx, bodo.InvoiceCreate{ContactID: c.ID, Amount: amount, Currency: "EUR",
		Status: bodo.Value(bodo.InvoiceStatusOpen)})
	if err != nil {
		return nil, err
	}
	return client.Invoices.Pay(ctx, inv.ID)
}

// TestInvoiceAndPay is the package doc's example as written there.
func TestInvoiceAndPay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL),
			bodo.WithHTTPClient(srv.Client()), bodo.WithAPIKey(bodotest.APIKey))
		if err != nil {
			t.Fatal(err)
		}
		inv, err := invoiceAndPay(t.Context(), client, "Ada", 1200) // your code
		if err != nil || inv.Status != bodo.InvoiceStatusPaid {
			t.Fatalf("invoiceAndPay: %+v, %v", inv, err)
		}
	})
}
