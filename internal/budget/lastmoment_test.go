package budget

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestNoRequestLeavesAfterAnAnswerThatAsksToWait: a call admitted before
// another's refusal was read learns, at the last moment before its request
// is written, of the wait that refusal asked for, also when the wait was in
// the body still being read; a refusal on a level binds only the calls that
// take from it.
func TestNoRequestLeavesAfterAnAnswerThatAsksToWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		refused := admitNow(t, s, call(ops.ListContacts, ""))
		early := admitNow(t, s, call(ops.GetContact, ""))
		if d, _ := early.Bound(context.Background()); d != 0 {
			t.Fatalf("bound by %v before any refusal", d)
		}

		refused.Reading(0)
		got := make(chan time.Duration)
		go func() { d, _ := early.Bound(context.Background()); got <- d }()
		time.Sleep(100 * time.Millisecond) // the refusal's body takes this long to read
		refused.Finish(refusal(http.StatusServiceUnavailable, codeOverloaded, "", 350*time.Millisecond))
		if d := <-got; d != 350*time.Millisecond {
			t.Errorf("a request written while an OVERLOADED body was read is bound by %v, want its 350ms", d)
		}
		early.Finish(answer("", ""))

		s = New()
		learn(t, s)
		write := admitNow(t, s, call(ops.CreateContact, ""))
		read := admitNow(t, s, call(ops.GetContact, ""))
		admitNow(t, s, call(ops.UpdateContact, "")).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, Write, 4*time.Second))
		if d, why := write.Bound(context.Background()); d != 4*time.Second || why != Write {
			t.Errorf("a write admitted before a refusal on write is bound by %v, want 4s", d)
		}
		if d, _ := read.Bound(context.Background()); d != 0 {
			t.Errorf("a read is bound by %v after a refusal on write", d)
		}
	})
}

// TestAQuotaExhaustedWhileARequestWaitsHoldsIt: a call admitted before
// another's QUOTA_EXHAUSTED was read, which that quota's block would
// refuse, learns of it at its last moment; one the block does not concern
// does not.
func TestAQuotaExhaustedWhileARequestWaitsHoldsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		refused := admitNow(t, s, call(ops.GetContact, ""))
		same, other := admitNow(t, s, call(ops.GetContact, "")), admitNow(t, s, call(ops.ListContacts, ""))
		refused.Finish(exhausted("monthly"))
		if d, why := same.Bound(context.Background()); d != time.Hour || why != "monthly" {
			t.Errorf("a get admitted before its quota was exhausted is bound by %v (%q), want an hour (monthly)", d, why)
		}
		if d, _ := other.Bound(context.Background()); d != 0 {
			t.Errorf("a list is bound by %v by the get's exhausted quota", d)
		}
		same.Unanswered(false, false)
		other.Finish(answer("", ""))
	})
}

// TestReadingIsBounded: a refusal whose body never ends holds the key's
// other requests at their last moment for readingWait at most.
func TestReadingIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		stuck := admitNow(t, s, call(ops.ListContacts, ""))
		other := admitNow(t, s, call(ops.GetContact, ""))
		stuck.Reading(0)
		start := time.Now()
		if d, _ := other.Bound(context.Background()); d != 0 || time.Since(start) != readingWait {
			t.Errorf("bound by %v after %v, want none after %v", d, time.Since(start), readingWait)
		}
		stuck.Unanswered(true, false)
		other.Finish(answer("", ""))
	})
}

// TestARefusalsHeadersBindWhileItsBodyIsRead: a refusal whose headers asked
// to wait (Retry-After) and whose body takes longer than readingWait binds
// a request at its last moment for the rest of that wait, though its body
// has not said which level it speaks of.
func TestARefusalsHeadersBindWhileItsBodyIsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		slow := admitNow(t, s, call(ops.CreateContact, ""))
		read := admitNow(t, s, call(ops.GetContact, ""))
		slow.Reading(3 * time.Second)
		if d, why := read.Bound(context.Background()); d != 3*time.Second-readingWait || why != ReasonServer {
			t.Errorf("a request at its last moment while a refusal asking 3s is read for %v is bound by %v, want %v", readingWait, d, 3*time.Second-readingWait)
		}
		slow.Finish(refusal(http.StatusTooManyRequests, codeRateLimited, Write, 3*time.Second))
		if d, _ := read.Bound(context.Background()); d != 0 {
			t.Errorf("a read is bound by %v once the refusal said it was on write", d)
		}
		read.Finish(answer("", ""))
	})
}
