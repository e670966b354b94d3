package sandbox

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"testing"
)

// TestTheTransportPlaysTheLastMoment: the in-process transport tells a
// ClientTrace of GetConn, GotConn and WroteHeaders, as net/http's does, and
// serves no request whose connection GotConn closed or whose context ended
// there.
func TestTheTransportPlaysTheLastMoment(t *testing.T) {
	var served atomic.Int32
	tr := HandlerTransport(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	for _, tc := range []struct {
		name    string
		gotConn func(httptrace.GotConnInfo, context.CancelFunc)
		want    error
	}{
		{"written", func(httptrace.GotConnInfo, context.CancelFunc) {}, nil},
		{"closed", func(info httptrace.GotConnInfo, _ context.CancelFunc) { _ = info.Conn.Close() }, errClosedBeforeWrite},
		{"cancelled", func(_ httptrace.GotConnInfo, cancel context.CancelFunc) { cancel() }, context.Canceled},
	} {
		served.Store(0)
		ctx, cancel := context.WithCancel(t.Context())
		var got, wrote bool
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GetConn:      func(string) { got = true },
			GotConn:      func(info httptrace.GotConnInfo) { tc.gotConn(info, cancel) },
			WroteHeaders: func() { wrote = true },
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox.test/v1/me", nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		cancel()
		n := served.Load()
		switch {
		case !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		case !got || wrote != (tc.want == nil) || n != map[bool]int32{true: 1, false: 0}[tc.want == nil]:
			t.Errorf("%s: GetConn %v, WroteHeaders %v, served %d", tc.name, got, wrote, n)
		}
	}
}
