package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// testStats reads testdata/stats.json.
func testStats(t *testing.T) *stats {
	t.Helper()
	f, err := os.Open("testdata/stats.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := readStats(f)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestResultOfStats(t *testing.T) {
	st := testStats(t)
	r, err := st.resultOf(apiKey, nil, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 33 real seconds at scale 6; 930 points of 600 + 300 × 198 / 60.
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-3 }
	if !near(r.Secs, 198) || !near(r.Goodput, 930.0/1590) {
		t.Errorf("secs %v goodput %v, want 198 and %v", r.Secs, r.Goodput, 930.0/1590)
	}
	// The first 120 contract seconds from the first request (t=2) hold
	// 108 seconds of 5 points: 540 of 600 + 600.
	if !near(r.GoodputStart, 540.0/1200) {
		t.Errorf("goodput of the first 2 minutes %v, want %v", r.GoodputStart, 540.0/1200)
	}
	if r.Stalls != 1 || r.Refused != 2 || r.Duplicates != 1 || r.Early != 1 {
		t.Errorf("stalls %d refused %d duplicates %d early %d, want 1, 2 (the OVERLOADED not counted), 1, 1",
			r.Stalls, r.Refused, r.Duplicates, r.Early)
	}
	m := r.misses(false)
	for _, want := range []string{"goodput 0.585", "first 2 min 0.450", "2 refused (1.08 %)", "1 early (first: write POST", "1 stalls (at [30] s)", "7 in flight", "1 duplicated"} {
		if !strings.Contains(m, want) {
			t.Errorf("misses %q lack %q", m, want)
		}
	}
}

// TestAllowanceBesideAPeer: beside a peer on a key of the same principal,
// the key may use what the principal's quota for each minute begun leaves
// of what the peer took, when that is less than the key's own.
func TestAllowanceBesideAPeer(t *testing.T) {
	var st stats
	st.Config.Quotas.Key, st.Config.Quotas.KeyCapacity, st.Config.Quotas.Principal = 300, 600, 400
	if got := st.allowance(90, 0, 300); got != 2*400-300 {
		t.Errorf("allowance over 90 s beside a peer that took 300 %v, want what the principal's 2 × 400 leave", got)
	}
	st.Config.Quotas.Principal = 4000
	if got := st.allowance(60, 0, 10); got != 900 {
		t.Errorf("allowance over a minute beside a peer that took 10 of 4000 %v, want the key's 600 + 300", got)
	}
}

func TestAllowanceUnderForeignLoad(t *testing.T) {
	var st stats
	st.Config.Quotas.Key, st.Config.Quotas.KeyCapacity, st.Config.Quotas.Org = 600, 1200, 3000
	if got := st.allowance(60, 0, 0); got != 1800 {
		t.Errorf("allowance over a minute %v, want the key's 1200 + 600", got)
	}
	st.Config.ForeignLoad = 45
	if got := st.allowance(600, 45*600, 0); got != 10*3000-45*600 {
		t.Errorf("allowance over 10 minutes with 45 points/s foreign %v, want what the org's 10 × 3000 leave", got)
	}
	if got := st.allowance(120, 4400, 0); got != 2*3000-4400 {
		t.Errorf("allowance over 2 minutes with 4400 points foreign %v, want what the org's 2 × 3000 leave", got)
	}
	if got := st.allowance(120, 1000, 0); got != 1200+2*600 {
		t.Errorf("allowance over 2 minutes with 1000 points foreign %v, want the key's 1200 + 2 × 600", got)
	}
}

// TestWritesOfTheLog: a key's writes are its 2xx answers to POST, PATCH and
// DELETE, in contract seconds from its first request (here at scale 6: one
// real second is six); a dropped write counts at its replay.
func TestWritesOfTheLog(t *testing.T) {
	log := newWriteLog(apiKey, 6)
	log.read(strings.NewReader(strings.Join([]string{
		"bodo-staging 23:59:59.000000 req_1 bodo_test_a GET /v1/contacts 200",
		"bodo-staging 23:59:59.500000 req_2 bodo_test_b POST /v1/contacts 201",
		"bodo-staging 23:59:59.500000 req_3 bodo_test_a POST /v1/contacts 201",
		"bodo-staging 23:59:59.600000 req_4 bodo_test_a POST /v1/invoices/inv_1/pay dropped",
		"bodo-staging 23:59:59.700000 req_5 bodo_test_a POST /v1/invoices/inv_1/pay 200",
		"bodo-staging 00:00:19.000000 req_6 bodo_test_a DELETE /v1/contacts/con_1 204",
		"bodo-staging 00:00:20.000000 req_7 bodo_test_a PATCH /v1/contacts/con_2 429 RATE_LIMITED write",
		"bodo-staging 00:00:21.000000 req_8 bodo_test_a PATCH /v1/contacts/con_2 200",
		"not a request line",
	}, "\n")))
	<-log.done
	if got := log.before(120); got != 2 {
		t.Errorf("%d writes in the first 2 contract minutes, want 2 (the create and the pay's replay; the delete at 120 s is not)", got)
	}
	if got := log.before(200); got != 4 {
		t.Errorf("%d writes in 200 contract seconds, want 4", got)
	}
	var st stats
	st.Config.Quotas.Write = 60
	if got := st.writesAllowed(120); got != 120 {
		t.Errorf("the write level allows %v writes in 2 minutes, want 120", got)
	}
	if got := st.writesAllowed(121); got != 180 {
		t.Errorf("the write level allows %v writes in 2 minutes and a second, want 180", got)
	}
}

// TestAnAnnouncedWaitIsNoStall: the run of testdata/stats.json has no
// request in its contract seconds 30 to 41; a wait the server announced
// over all of them makes that no stall, one over the first only leaves
// eleven seconds of one. A second counts as waited when the middle of it
// is (the sandbox looks at one moment a second too).
func TestAnAnnouncedWaitIsNoStall(t *testing.T) {
	st := testStats(t)
	at := func(s float64) time.Time {
		return time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
	}
	for _, tc := range []struct {
		name   string
		waits  []span
		stalls []int
	}{
		{"none", nil, []int{30}},
		{"over the gap", []span{{at(5), at(7)}}, nil},
		{"over its first second", []span{{at(5), at(5.1)}}, []int{31}},
		{"before it", []span{{at(1), at(4.9)}}, []int{30}},
		{"between the middles of two seconds", []span{{at(4.95), at(5.05)}}, []int{30}},
	} {
		r, err := st.resultOf(apiKey, nil, -1, tc.waits)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.StallsAt, tc.stalls) {
			t.Errorf("%s: stalls at %v, want %v", tc.name, r.StallsAt, tc.stalls)
		}
	}
}

// TestWaitLogReadsTheServersWaits: from the client's log of two processes,
// written in pieces that split lines and interleave, a waitLog keeps the
// server's waits on levels every call takes from or on the key as a whole,
// not a wait on writes, a refusal without a wait or a line without a
// policy, and keeps the rest for errors.
func TestWaitLogReadsTheServersWaits(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 28, 30, 859e6, time.UTC)
	logOf := func(refusals func(refusal func(msg, policy string, retryAfter time.Duration))) []byte {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		refusals(func(msg, policy string, retryAfter time.Duration) {
			attrs := []slog.Attr{slog.String("host", "127.0.0.1:1"), slog.String("operation", "deleteContact")}
			if policy != "-" {
				attrs = append(attrs, slog.String("policy", policy))
			}
			if retryAfter > 0 {
				attrs = append(attrs, slog.Duration("retry_after", retryAfter))
			}
			r := slog.NewRecord(at, slog.LevelWarn, msg, 0)
			r.AddAttrs(append(attrs, slog.Duration("wait", 2*time.Second))...)
			if err := log.Handler().Handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		})
		return buf.Bytes()
	}
	a := logOf(func(refusal func(msg, policy string, retryAfter time.Duration)) {
		refusal("bodo: refused, retrying", "org", 1292*time.Millisecond)
		refusal("bodo: refused, retrying", "write", time.Second)
		refusal("bodo: refused, retrying", "-", time.Second)
	})
	b := logOf(func(refusal func(msg, policy string, retryAfter time.Duration)) {
		refusal("bodo: refused, giving up", "", 3*time.Second)
		refusal("bodo: refused, retrying", "key", 0)
	})
	b = append(b, "redisbudget: the store is down"...) // a last line without its newline

	w := &waitLog{}
	wa, endA := w.writer()
	wb, endB := w.writer()
	for len(a) > 0 || len(b) > 0 {
		for _, s := range []struct {
			w    io.Writer
			rest *[]byte
		}{{wa, &a}, {wb, &b}} {
			n := min(37, len(*s.rest))
			if _, err := s.w.Write((*s.rest)[:n]); err != nil {
				t.Fatal(err)
			}
			*s.rest = (*s.rest)[n:]
		}
	}
	endA()
	endB()
	got := w.spans()
	slices.SortFunc(got, func(x, y span) int { return x.to.Compare(y.to) })
	want := []span{{at, at.Add(1292 * time.Millisecond)}, {at, at.Add(3 * time.Second)}}
	if !slices.EqualFunc(got, want, func(a, b span) bool { return a.from.Equal(b.from) && a.to.Equal(b.to) }) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if !strings.Contains(w.String(), "the store is down") || strings.Contains(w.String(), "refused") {
		t.Errorf("the rest of the log: %q", w.String())
	}
}
