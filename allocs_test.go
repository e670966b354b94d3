package bodo

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"testing"
)

// maxAllocsPerGet is what a Contacts.Get of an https URL without
// middleware, over a RoundTripper that answers at once, may allocate: the
// attempt's trace costs its three hooks and the context that holds a
// request back on HTTP/2 (see sendTrace), and nothing more.
const maxAllocsPerGet = 40

// TestAllocsPerGet: a Contacts.Get without middleware allocates at most
// maxAllocsPerGet times (testing.AllocsPerRun), the attempt's trace kept
// under httptrace's key in the call.
func TestAllocsPerGet(t *testing.T) {
	if traceKey == nil {
		t.Fatal("httptrace's key was not learned: every attempt adds a context for its trace")
	}
	c := hostileClient(t, uniqueBaseURL(), contactAnswer(nil))
	ctx := context.Background()
	get := func() {
		if _, err := c.Contacts.Get(ctx, hostileContactID); err != nil {
			t.Fatal(err)
		}
	}
	get()
	if n := testing.AllocsPerRun(200, get); n > maxAllocsPerGet {
		t.Errorf("%.0f allocations per Contacts.Get, want at most %d", n, maxAllocsPerGet)
	}
}

// TestCallersClientTraceStillRuns: a ClientTrace the caller put in the
// context hears the attempt as well as the client's own hooks do.
func TestCallersClientTraceStillRuns(t *testing.T) {
	api, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, contactJSON)
	})
	c, _ := socketClient(t, api.URL)
	var got, wrote atomic.Bool
	ctx := httptrace.WithClientTrace(hostileCtx(t), &httptrace.ClientTrace{
		GetConn:      func(string) { got.Store(true) },
		WroteHeaders: func() { wrote.Store(true) },
	})
	if _, err := c.Contacts.Get(ctx, "con_1"); err != nil {
		t.Fatal(err)
	}
	if !got.Load() || !wrote.Load() {
		t.Errorf("the caller's trace heard GetConn %v, WroteHeaders %v; want both", got.Load(), wrote.Load())
	}
}
