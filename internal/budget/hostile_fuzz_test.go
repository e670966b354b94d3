package budget

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzHostileAnswers feeds a key many answers a hostile server could send:
// a RateLimit-Policy line repeated up to 256 times, a RateLimit line with
// a new partition (pk) on every answer, then a refusal with any code,
// policy and wait. However long the fields and however many answers, the
// key learns at most the caps of policies and partitions, no wait is held
// past its bound (a lockout MaxLockout, any other MaxServerWait), and the
// model stays sane (checkModel).
func FuzzHostileAnswers(f *testing.F) {
	f.Add(`"p";q=10;w=60`, `"p";r=1;t=5`, uint8(255), uint16(1000), 429, codeRateLimited, Lockout, int64(86400000))
	f.Add(`"key";q=300;w=60, "tenant";q=5;w=60`, `"tenant";r=0;t=60`, uint8(3), uint16(5000), 503, "", "", int64(1<<62))
	f.Add(strings.Repeat(`"x";q=1;w=1, `, 800)+`"y";q=1;w=1`, `"y";r=0`, uint8(1), uint16(10), 429, codeRateLimited, "y", int64(-1))
	f.Add(`"a";q=9223372036854775807;w=9223372036854775807`, `"a";r=999999999999999;t=999999999999999`, uint8(16), uint16(300), 429, codeQuotaExhausted, "a", int64(9223372036854775807))
	f.Add(`"b";q=1;w=1`, `"b";r=0;t=0;pk=:AAAA:, "b";r=0;pk=:AQ==:`, uint8(0), uint16(65535), 503, codeOverloaded, "", int64(3600001))
	f.Fuzz(func(t *testing.T, policy, limit string, repeat uint8, answers uint16, status int, code, refusedBy string, waitMs int64) {
		s := New()
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		policyLines := make([]string, int(repeat)+1)
		for i := range policyLines {
			policyLines[i] = policy
		}
		calls := fuzzCalls()
		s.mu.Lock()
		defer s.mu.Unlock()
		for i := range int(answers) % 2000 {
			c := calls[i%len(calls)]
			c.Target = fmt.Sprintf("GET /v1/contacts/con_%d", i)
			pk := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%d", i))
			h := http.Header{
				"Ratelimit-Policy": policyLines,
				"Ratelimit":        {limit + fmt.Sprintf(`, "p";r=1;t=5;pk=:%s:`, pk)},
			}
			s.observeLocked(c, h, now, &release{}, true)
		}
		if n := s.bounds.policies; n > MaxLearnedPolicies || s.bounds.partitions > MaxPartitions || len(s.levels) > 7+MaxLearnedPolicies+MaxPartitions || len(s.order) != len(s.levels) {
			t.Fatalf("%d levels (%d ordered): %d policies, %d partitions", len(s.levels), len(s.order), s.bounds.policies, s.bounds.partitions)
		}
		checkModel(t, s, now, "after the answers")

		wait := time.Duration(min(max(waitMs, 0), int64(24*time.Hour/time.Millisecond))) * time.Millisecond
		p := &Problem{Code: code, Policy: refusedBy, RetryAfter: wait, Hinted: waitMs >= 0}
		s.refusedLocked(calls[0], nil, now, status, p, now, &release{})
		if d := s.lockedUntil.Sub(now); d > MaxLockout {
			t.Fatalf("a lockout held for %v", d)
		}
		if d := s.heldUntil.Sub(now); d > MaxServerWait {
			t.Fatalf("the key held for %v", d)
		}
		for _, l := range s.order {
			if d := l.holdUntil.Sub(now); d > MaxServerWait {
				t.Fatalf("level %q held for %v", l.name, d)
			}
		}
		if code == "" && (!s.heldUntil.IsZero() || !s.lockedUntil.IsZero()) {
			t.Fatalf("an answer that is not the API's held the key until %v", later(s.heldUntil, s.lockedUntil))
		}
		checkModel(t, s, now, "after the refusal")
		s.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, _ = s.Admit(ctx, &Call{Op: "getMe", Budgeted: true, MaxHold: time.Second})
		s.mu.Lock()
	})
}
