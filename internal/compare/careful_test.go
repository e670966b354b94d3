package compare

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// TestCarefulTransport checks the careful engineer's retry discipline
// against scripted answers: how often it tries, how long it waits, and the
// Idempotency-Key it sends.
func TestCarefulTransport(t *testing.T) {
	const (
		limited   = `{"code":"RATE_LIMITED","retryAfterMs":1500}`
		exhausted = `{"code":"QUOTA_EXHAUSTED"}`
		overload  = `{"code":"OVERLOADED"}`
	)
	type answer struct {
		status     int
		body       string
		retryAfter string
	}
	for _, tc := range []struct {
		name     string
		method   string
		answers  []answer
		attempts int
		minWait  time.Duration // the least time between the first attempt and the last
		status   int           // the status the caller sees
	}{
		{"retryAfterMs", "POST", []answer{{429, limited, "2"}, {201, `{}`, ""}}, 2, 1500 * time.Millisecond, 201},
		{"Retry-After", "PATCH", []answer{{503, overload, "3"}, {200, `{}`, ""}}, 2, 3 * time.Second, 200},
		{"no hint doubles", "GET", []answer{{503, overload, ""}, {503, overload, ""}, {200, `{}`, ""}}, 3, 3 * time.Second, 200},
		{"two retries at most", "GET", []answer{{429, limited, ""}, {429, limited, ""}, {429, limited, ""}, {200, `{}`, ""}}, 3, 3 * time.Second, 429},
		{"QUOTA_EXHAUSTED", "DELETE", []answer{{429, exhausted, ""}, {204, ``, ""}}, 1, 0, 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var times []time.Time
				var keys []string
				next := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
					mu.Lock()
					defer mu.Unlock()
					a := tc.answers[len(times)]
					times = append(times, time.Now())
					keys = append(keys, r.Header.Get("Idempotency-Key"))
					h := http.Header{}
					if a.retryAfter != "" {
						h.Set("Retry-After", a.retryAfter)
					}
					return &http.Response{StatusCode: a.status, Header: h, Body: io.NopCloser(strings.NewReader(a.body)), Request: r}, nil
				})
				ct := &carefulTransport{next: next, key: rate.NewLimiter(carefulKeyRate, carefulKeyBurst),
					writes: rate.NewLimiter(carefulWriteRate, carefulWriteBurst), slots: make(chan struct{}, carefulParallel)}
				req, _ := http.NewRequest(tc.method, "https://careful.test/v1/contacts/con_1", strings.NewReader(`{"name":"x"}`))
				resp, err := ct.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != tc.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
				}
				if len(times) != tc.attempts {
					t.Fatalf("%d attempts, want %d", len(times), tc.attempts)
				}
				if w := times[len(times)-1].Sub(times[0]); w < tc.minWait || w > tc.minWait+time.Duration(tc.attempts-1)*carefulJitter {
					t.Errorf("waited %v, want %v plus at most %v of jitter a retry", w, tc.minWait, carefulJitter)
				}
				for _, k := range keys {
					if tc.method == "POST" || tc.method == "PATCH" {
						if k == "" || k != keys[0] {
							t.Errorf("Idempotency-Keys %q: want one, the same on every attempt", keys)
							break
						}
					} else if k != "" {
						t.Errorf("%s sent Idempotency-Key %q", tc.method, k)
					}
				}
			})
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
