package budget

import (
	"math"
	"testing"
	"time"
)

// TestAWaitTooLongToCountIsForever: seconds past what a Duration holds
// (a refill of a level that barely refills, an absurd header) are a wait
// of forever, never one that overflows to a negative one that lets a call
// go at once; so is a wait that is not a number.
func TestAWaitTooLongToCountIsForever(t *testing.T) {
	for _, secs := range []float64{forever.Seconds(), 1e300, math.Inf(1), math.NaN()} {
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

// TestAFullInIsZeroForALevelThatNeverFillsWhileARefusalHoldsIt: of a level
// that never fills, FullIn stays 0 while a refusal's wait holds it.
func TestAFullInIsZeroForALevelThatNeverFillsWhileARefusalHoldsIt(t *testing.T) {
	now := time.Now()
	l := newLevel("p")
	l.seenMax, l.tokens = 10, 5
	l.reported = reported{remaining: 5, at: now}
	l.holdUntil = now.Add(30 * time.Second)
	if d := l.fullIn(now); d != 0 {
		t.Errorf("FullIn of a level that holds 5 of 10, never refills and is held 30 s: %v, want 0", d)
	}
}

// TestWhatIsLeftOfALevelKeysShareIsWhatThisKeysPartLeftMakesOfIt: of a
// level keys of this process split, the whole level holds no more than
// this key's part left makes of it, whatever the server's word left.
func TestWhatIsLeftOfALevelKeysShareIsWhatThisKeysPartLeftMakesOfIt(t *testing.T) {
	now := time.Now()
	l := newLevel(Principal)
	l.tokens = 100
	l.parts = parts{split: 0.5, outage: 1, of: 0.5, tokens: 10}
	if v := l.wholeLeft(now); v != 20 {
		t.Errorf("a key's half of a level left 10 of the word's 100: the whole holds %g, want 20", v)
	}
}

// TestANextFreeIsTheMomentOfTheServersWord: a level whose log frees
// nothing frees next at the moment of the server's word.
func TestANextFreeIsTheMomentOfTheServersWord(t *testing.T) {
	now := time.Now()
	l := newLevel("p")
	l.quota, l.window = 10, time.Minute
	l.moment = moment{at: now.Add(10 * time.Second)}
	if d := l.nextFree(now); d != 10*time.Second {
		t.Errorf("an empty log and a moment 10 s on: next free in %v, want 10s", d)
	}
}

// policyTakenFrom50sAgo is a learned policy of 10 a minute
// with one take of this key sent and answered 50 s before now.
func policyTakenFrom50sAgo(now time.Time) *level {
	l := newLevel("p")
	l.quota, l.window = 10, time.Minute
	l.log.add(now.Add(-50*time.Second), now.Add(-50*time.Second), 1, l.window)
	return l
}

// TestOnlyALevelThatRefillsFromItsMomentsMovesItsMomentToItsOldestTake:
// the moment of a word is now+t, unless the level refills only from its
// moments: then it is when this key's oldest take leaves the window, if
// that comes first; and once the level learns so, the moment it waits for
// moves so too.
func TestOnlyALevelThatRefillsFromItsMomentsMovesItsMomentToItsOldestTake(t *testing.T) {
	now := time.Now()
	l := policyTakenFrom50sAgo(now)
	if at, logged := l.momentOf(30*time.Second, now); !at.Equal(now.Add(30*time.Second)) || logged {
		t.Errorf("t=30 on a level that refills between answers: moment in %v (logged %v), want 30s", at.Sub(now), logged)
	}
	l.moment = moment{at: now.Add(50 * time.Second)}
	if !l.learnEarly(now) {
		t.Fatal("a learned policy refused early did not learn it refills from its moments")
	}
	if !l.moment.at.Equal(now.Add(10*time.Second)) || !l.moment.logged {
		t.Errorf("the take that leaves the window in 10 s, before the moment 50 s on: moment in %v (logged %v), want 10s", l.moment.at.Sub(now), l.moment.logged)
	}
}

// TestATakeBeforeAPassedMomentDoesNotMoveTheNext: of a level that refills
// only from its moments, a take sent before the last t's moment passed
// does not bring the next moment forward: that moment may have freed it.
func TestATakeBeforeAPassedMomentDoesNotMoveTheNext(t *testing.T) {
	now := time.Now()
	l := policyTakenFrom50sAgo(now)
	l.resets = true
	l.at, l.moment = now.Add(-20*time.Second), moment{at: now.Add(-10 * time.Second)}
	l.refill(now)
	if at, _ := l.momentOf(30*time.Second, now); !at.Equal(now.Add(30 * time.Second)) {
		t.Errorf("t=30 after a moment passed since this key's only take: moment in %v, want 30s", at.Sub(now))
	}
}

// TestALevelOfTheAPIKeepsItsRefillAfterAnEarlyRefusal: a level of the API,
// or a bucket, refused a call its refill let go early does not learn to
// refill only from its moments.
func TestALevelOfTheAPIKeepsItsRefillAfterAnEarlyRefusal(t *testing.T) {
	now := time.Now()
	api, bucket := newLevel(Org), newLevel("p")
	api.known, bucket.bucket = true, true
	for _, l := range []*level{api, bucket} {
		if l.learnEarly(now) || l.resets {
			t.Errorf("%s learned it refills only from its moments", l.name)
		}
	}
}

// TestTheRefillAfterAMomentAddsToItsUnit: a level that refills gains at
// its moment a unit less the refill since the word, and then the refill
// after the moment: the refill after it does not count toward the unit.
func TestTheRefillAfterAMomentAddsToItsUnit(t *testing.T) {
	now := time.Now()
	l := newLevel("p")
	l.bucket, l.quota, l.window = true, 10, 1000*time.Second // 0.01 a second
	l.at, l.moment = now, moment{at: now.Add(10 * time.Second)}
	l.refill(now.Add(20 * time.Second))
	if math.Abs(l.tokens-1.1) > 1e-9 {
		t.Errorf("20 s after a word that left 0, its moment 10 s on: %g left, want 1.1", l.tokens)
	}
}

// TestARefillCountsFromTheFirstTimeTheLevelIsBroughtForward: a level
// never brought forward gains nothing the first time it is.
func TestARefillCountsFromTheFirstTimeTheLevelIsBroughtForward(t *testing.T) {
	now := time.Now()
	l := newLevel("p")
	l.bucket, l.quota, l.window = true, 60, time.Minute
	l.refill(now)
	if l.tokens != 0 || !l.at.Equal(now) {
		t.Errorf("a bucket first brought forward: %g left, refilled to %v, want 0 and now", l.tokens, l.at)
	}
}

// TestAMomentOfALevelThatFreedThisKeysTakeSinceAddsNothing: a level that
// frees what this key took gains nothing at its moment once a take of the
// key left the window since the word: that was what the moment named.
func TestAMomentOfALevelThatFreedThisKeysTakeSinceAddsNothing(t *testing.T) {
	now := time.Now()
	l := newLevel(Org)
	l.known, l.shared, l.quota, l.window = true, true, 100, time.Minute
	l.log.freed = 5
	if u := l.momentUnit(now); u != 0 {
		t.Errorf("5 of this key's freed since the word: the moment adds %g, want 0", u)
	}
}

// TestTheFirstWordOnAPolicyWithoutAQuotaShowsNothing: an answer that
// names a policy no RateLimit-Policy sized and no word named before has
// nothing to compare r with: it shows neither a take nor none.
func TestTheFirstWordOnAPolicyWithoutAQuotaShowsNothing(t *testing.T) {
	l := newLevel("p")
	if l.witness("kind", 1, 50, 0, time.Now()) || len(l.scope.evidence) != 0 {
		t.Errorf("the first word on a policy without a quota counted as evidence: %v", l.scope.evidence)
	}
}

// TestOnlyALearnedPolicyThatMayBindAKindRunsIt: a kind runs alone only on a
// learned policy with a quota and a window, not tied to the kind, whose
// partition, if any, is the call's target's.
func TestOnlyALearnedPolicyThatMayBindAKindRunsIt(t *testing.T) {
	learned := func() *level {
		l := newLevel("p")
		l.quota, l.window = 10, time.Minute
		return l
	}
	if learned().runOf("kind", "GET /x") == nil {
		t.Fatal("a learned policy runs no kind")
	}
	api, unsized, tied, other := learned(), learned(), learned(), learned()
	api.known = true
	unsized.quota = 0
	tied.tie("kind")
	other.partition, other.target = "pk", "GET /y"
	for what, l := range map[string]*level{"a level of the API": api, "a policy without a quota": unsized, "a policy tied to the kind": tied, "another target's partition": other} {
		if l.runOf("kind", "GET /x") != nil {
			t.Errorf("%s runs the kind", what)
		}
	}
}

// TestOnlyALevelOfThisKeyAloneShowsABucketsMoments: answers whose full
// moment moves later as a bucket's would show a bucket of this key alone,
// not of a level others take from, whose moment their takes move too.
func TestOnlyALevelOfThisKeyAloneShowsABucketsMoments(t *testing.T) {
	for _, shared := range []bool{false, true} {
		now := time.Now()
		l := newLevel("p")
		l.quota, l.window, l.shared = 100, 100*time.Second, shared // 1 a second
		for i := range 3 {
			l.learnShape(float64(50-10*i), int64(50+10*i), now.Add(time.Duration(i)*time.Second))
		}
		if l.bucket == shared {
			t.Errorf("shared %v: a bucket %v", shared, l.bucket)
		}
	}
}

// TestATWithinTheWindowShowsNoBucketsDepth: of the key level, only a t
// further than its window that adds up to the documented capacity shows
// the bucket; one within it may be a sliding log's or a window's.
func TestATWithinTheWindowShowsNoBucketsDepth(t *testing.T) {
	for _, word := range [][2]int64{{350, 50}, {0, 120}} {
		now := time.Now()
		l := newLevel(Key)
		l.known, l.quota, l.docQuota, l.capacity, l.window = true, 300, 300, 600, time.Minute
		l.learnDepth(float64(word[0]), word[1], now)
		l.learnDepth(float64(word[0]-10), word[1]+2, now.Add(3*time.Second))
		if want := word[1] > 61; l.bucket != want {
			t.Errorf("r=%d;t=%d then r=%d;t=%d: a bucket %v, want %v", word[0], word[1], word[0]-10, word[1]+2, l.bucket, want)
		}
	}
}

// TestAFullLevelMeasuresNoRefill: of a level others take from, an answer
// that finds it full starts the measure of its refill anew: what it would
// have gained beyond full is lost to the measure, which would bind a
// refill slower than the level's.
func TestAFullLevelMeasuresNoRefill(t *testing.T) {
	now := time.Now()
	l := newLevel(Org)
	l.known, l.shared, l.quota, l.window = true, true, 120, time.Minute // 2 a second
	l.learnGain(60, 0, now)
	now = now.Add(40 * time.Second)
	l.learnGain(120, 0, now)
	if r := l.rate(now); r != 2 {
		t.Errorf("half full, then full 40 s later: a refill of %g a second, want 2", r)
	}
}

// TestAWordWithinARefusalsWaitKeepsNoOweOfABucketOrOnceTheWaitEnded: a
// bucket refills through a refusal's wait, so a word within it keeps no
// owe; nor does a word after the wait.
func TestAWordWithinARefusalsWaitKeepsNoOweOfABucketOrOnceTheWaitEnded(t *testing.T) {
	now := time.Now()
	l := newLevel("p")
	l.bucket, l.quota, l.window, l.tokens = true, 60, time.Minute, 10
	l.holdUntil = now.Add(30 * time.Second)
	if owe, ok := l.keepOwe(10, now); ok || l.tokens != 10 {
		t.Errorf("a word of 10 on a bucket 30 s into a refusal's wait: owe %g kept, %g left", owe, l.tokens)
	}
	l.bucket = false
	if owe, ok := l.keepOwe(10, now.Add(time.Minute)); ok {
		t.Errorf("a word after a refusal's wait kept an owe of %g", owe)
	}
}

// TestALevelOfThisKeyAloneMeasuresNoOthers: the answers on a level no one
// else takes from mark nothing of what others take, and set no moment at
// which its refill would change by itself (a waiter would look again for
// nothing).
func TestALevelOfThisKeyAloneMeasuresNoOthers(t *testing.T) {
	now := time.Now()
	l := newLevel("p")
	l.bucket, l.quota, l.window = true, 60, time.Minute
	l.learnGain(50, 0, now)
	now = now.Add(2 * time.Second)
	l.learnGain(50, 0, now)
	if !l.others.markAt.IsZero() || !l.rateChange(now).IsZero() {
		t.Errorf("a bucket of this key alone marked what others take at %v; its refill changes by itself at %v", l.others.markAt, l.rateChange(now))
	}
}

// TestNoCallPassesTheFirstWaiterOfALevelOnlyARefusalNamed: a level no
// answer sized holds its calls by a refusal's wait and its pace, not by
// what it counts of them (they need nothing of it): the calls behind the
// first go after it, in arrival order.
func TestNoCallPassesTheFirstWaiterOfALevelOnlyARefusalNamed(t *testing.T) {
	l := newLevel("p")
	first := &waiter{c: &Call{takes: []take{{l: l, amount: 1}}}}
	if l.backfills(first, 1, time.Now()) {
		t.Error("a call of 1 passed the first waiter of a level only a refusal named")
	}
}
