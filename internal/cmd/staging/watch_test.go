package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// errStatus stands for an error that names an unexpected status.
var errStatus = errors.New("status")

// TestOrgRemaining reads the org from the body and from RateLimit, -1
// where RateLimit names another level, and tells a refusal from an
// answer without the org.
func TestOrgRemaining(t *testing.T) {
	for _, tc := range []struct {
		name, header, body string
		status             int
		wantBody, wantHead int
		wantErr            error
	}{
		{"both", `"org";r=22;t=10`, `{"policies":[{"name":"key","remaining":9},{"name":"org","remaining":49}]}`, 200, 49, 22, nil},
		{"parameters in another order", `"key";t=1;r=3, "org";t=10;r=22`, `{"policies":[{"name":"org","remaining":49}]}`, 200, 49, 22, nil},
		{"another level named", `"key";r=3;t=1`, `{"policies":[{"name":"org","remaining":49}]}`, 200, 49, -1, nil},
		{"refused", "", `{"code":"RATE_LIMITED"}`, 429, 0, 0, errRefused},
		{"unauthorized", "", `{"code":"UNAUTHORIZED"}`, 401, 0, 0, errStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+apiKey {
					t.Errorf("Authorization %q", r.Header.Get("Authorization"))
				}
				w.Header().Set("RateLimit", tc.header)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			body, head, err := orgRemaining(context.Background(), srv.Client(), srv.URL)
			if tc.wantErr == errStatus {
				if err == nil || !strings.Contains(err.Error(), "401") {
					t.Errorf("got %v, want an error naming the status", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || body != tc.wantBody || head != tc.wantHead {
				t.Errorf("got %d, %d, %v; want %d, %d, %v", body, head, err, tc.wantBody, tc.wantHead, tc.wantErr)
			}
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"policies":[{"name":"key","remaining":9}]}`))
	}))
	defer srv.Close()
	if _, _, err := orgRemaining(context.Background(), srv.Client(), srv.URL); err == nil {
		t.Error("no error for a body without the org")
	}
}

// TestIsDip: a fall of a whole take that the next answer takes back is a
// dip, also one to nothing; one that stays, or a small one, is not.
func TestIsDip(t *testing.T) {
	for _, tc := range []struct {
		before, low, after int
		want               bool
	}{
		{49, 22, 49, true},
		{49, 22, 48, true},
		{49, 22, 22, false},
		{49, 45, 49, false},
		{22, 0, 26, true}, // what was free, taken, and a take a window old freed
	} {
		if got := isDip(tc.before, tc.low, tc.after); got != tc.want {
			t.Errorf("isDip(%d, %d, %d) = %v, want %v", tc.before, tc.low, tc.after, got, tc.want)
		}
	}
}
