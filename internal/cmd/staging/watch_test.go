package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

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
		{"another level named", `"key";r=3;t=1`, `{"policies":[{"name":"org","remaining":49}]}`, 200, 49, -1, nil},
		{"refused", "", `{"code":"RATE_LIMITED"}`, 429, 0, 0, errRefused},
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
			body, head, err := orgRemaining(context.Background(), srv.URL)
			if !errors.Is(err, tc.wantErr) || body != tc.wantBody || head != tc.wantHead {
				t.Errorf("got %d, %d, %v; want %d, %d, %v", body, head, err, tc.wantBody, tc.wantHead, tc.wantErr)
			}
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"policies":[{"name":"key","remaining":9}]}`))
	}))
	defer srv.Close()
	if _, _, err := orgRemaining(context.Background(), srv.URL); err == nil {
		t.Error("no error for a body without the org")
	}
}
