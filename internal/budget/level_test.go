package budget

import (
	"math"
	"testing"
	"time"
)

// TestAWaitTooLongToCountIsForever: seconds past what a Duration holds
// (a refill of a level that barely refills, an absurd header) are a wait
// of forever, never one that overflows to a negative one that lets a call
// go at once.
func TestAWaitTooLongToCountIsForever(t *testing.T) {
	for _, secs := range []float64{forever.Seconds(), 1e300, math.Inf(1)} {
		if d := durationOf(secs); d != forever {
			t.Errorf("durationOf(%g) = %v, want forever", secs, d)
		}
	}
}

// TestACallOnADocumentedLevelNeedsAllItTakes: of the API's own level at
// its documented quota, a call must find all it takes, also beyond what
// the level holds when full as far as the server has shown (the key
// bucket's capacity); only of a size learned from a header does a bigger
// call wait for a full level and then go.
func TestACallOnADocumentedLevelNeedsAllItTakes(t *testing.T) {
	l := newLevel(Key)
	l.known, l.quota, l.docQuota, l.capacity, l.window = true, 300, 300, 600, time.Minute
	if n := l.need(500); n != 500 {
		t.Errorf("a call of 500 points on the documented key level of 300 a minute needs %g, want 500", n)
	}
	l.quota = 100 // another plan: the size is the server's word
	if n := l.need(500); n != 100 {
		t.Errorf("a call of 500 points on a key level of 100 a minute needs %g, want 100", n)
	}
}

// TestALevelWithRoomAsksNoWaitWhateverItsRate: the least wait the server's
// word allows is none when the word left what the call needs, also of a
// level with no rate to refill by; short of it, the refill at the quota's
// rate brings the rest.
func TestALevelWithRoomAsksNoWaitWhateverItsRate(t *testing.T) {
	l := newLevel("p")
	l.seenMax, l.tokens = 10, 5 // a policy only RateLimit sized: no quota, no window
	if d := l.leastWait(3); d != 0 {
		t.Errorf("a call of 3 on a level with 5 left: least wait %v, want 0", d)
	}
	l.quota, l.window, l.tokens = 60, time.Minute, 0
	if d := l.leastWait(3); d != 3*time.Second {
		t.Errorf("a call of 3 on an empty level of 60 a minute: least wait %v, want 3s", d)
	}
}

// TestAFullInIsZeroForALevelThatNeverFills: FullIn of a level that
// nothing the model knows refills (a size only RateLimit gave, no quota to
// refill by) is 0, not forever.
func TestAFullInIsZeroForALevelThatNeverFills(t *testing.T) {
	now := time.Now()
	l := newLevel("p")
	l.seenMax, l.tokens = 10, 5
	l.reported = reported{remaining: 5, at: now}
	if d := l.fullIn(now); d != 0 {
		t.Errorf("FullIn of a level that holds 5 of 10 and never refills: %v, want 0", d)
	}
}

// TestWhatLeavesTheWindowWithinAWaitFreesNothingAfterIt: of this key's
// takes, only those that leave the window after a moment (a refusal's wait)
// count toward what frees after it.
func TestWhatLeavesTheWindowWithinAWaitFreesNothingAfterIt(t *testing.T) {
	now := time.Now()
	l := newLevel(Org)
	l.quota, l.window = 100, time.Minute
	l.log.add(now.Add(-50*time.Second), now.Add(-50*time.Second), 5, l.window) // leaves in 10 s
	l.log.add(now.Add(-20*time.Second), now.Add(-20*time.Second), 5, l.window) // leaves in 40 s
	if d := l.logFreesAfter(5, now.Add(30*time.Second), now); d != 40*time.Second {
		t.Errorf("5 freed after a 30 s wait: in %v, want 40s", d)
	}
	if d := l.logFreesAfter(6, now.Add(30*time.Second), now); d != forever {
		t.Errorf("6 freed after a 30 s wait of a log that frees 5 after it: in %v, want forever", d)
	}
}

// TestATakeLogLogsNoTakeOfNothingOrLess: a take of nothing or less (an
// answer that left more than the log counts) adds no entry and never
// lowers what the log counts taken, so the log never grants more than
// the quota.
func TestATakeLogLogsNoTakeOfNothingOrLess(t *testing.T) {
	now := time.Now()
	var g takeLog
	g.add(now, now, 0, time.Minute)
	g.add(now, now, -5, time.Minute)
	if len(g.entries) != 0 || g.sum != 0 {
		t.Errorf("takes of 0 and -5 logged %d entries summing to %g, want none", len(g.entries), g.sum)
	}
}
