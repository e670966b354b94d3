// Package budget is the client's model of one API key's rate limits; package
// bodo keeps the public surface. A call (call.go) is admitted with
// State.Admit (admit.go, hold.go), which waits until every gate lets it go
// (holdLocked, gates.go), and its attempt is settled with the answer
// through Ticket.Finish or Ticket.Unanswered (answer.go). The gates, in the
// order a call meets them, each in its file: the server's waits and the
// lockout, a wait asked of every call of the key (gate_pause.go); the
// refusal guard, RefusalLimit (gate_guard.go); the levels the call takes
// from (gate_levels.go; level.go, each with its own pace); the key's pace
// (gate_pace.go; pace.go); the slots in flight (gate_slots.go); and with a
// shared store the store (gate_store.go; store.go). Calls queue per gate,
// in arrival order among the calls that wait for the same thing
// (queue.go). A key's State (state.go) is shared by the clients of the
// process through For (states.go).
//
// # Rules
//
// The model follows these rules; each is one place in the code and one
// test of the same name.
//
//  1. The server's word binds until its moment. A level that RateLimit says
//     has r left takes no more than r (less what was sent since) before the
//     moment now+t; at that moment it holds at least one unit more than the
//     word left, whatever its shape (of a level that refills, its refill since
//     counts toward that unit, TestAMomentAddsWhatTheRefillSinceHasNot), and
//     the next answer says how much (level.refill). How the server counts is
//     its business: a level that showed it refills continuously (more left
//     than its quota; for the key level, which the contract documents as a
//     bucket, a full moment further than its window that adds up to the
//     documented capacity, TestATLongerThanTheWindowIsABucketsT; or one that
//     moves as points are taken, with r and t adding up to its size,
//     TestABucketShowsInAnyOrderOfItsAnswers) refills at its rate between
//     answers, a level of this key alone at its quota's rate, which no one
//     else slows (a t later than that rate makes it full shows a bigger
//     level, not a slower refill,
//     TestABucketOfThisKeyAloneRefillsAtItsQuotasRate), and a level of
//     this key alone never holds less than its quota less this key's own takes
//     in the last window, which every shape grants
//     (TestTheServersWordBindsUntilItsMoment). The answer to a call that took
//     nothing from a level (a server that names the narrowest of all levels)
//     may carry a word older than the model's: it only lowers it (level.heard,
//     TestAWordOnALevelACallTookNothingFromOnlyLowersIt).
//  2. Outcomes beat hints. Fields that are absurd (a quota of 0) or that
//     contradict themselves (nothing left yet full now: r=0;t=0) are
//     ignored; malformed fields are ignored (observeLocked,
//     applyPoliciesLocked). RateLimit-Policy is informative
//     (TestOutcomesBeatHints). The t of a level others take from says
//     when it would be full if no one took more, which they do: unless it
//     implies a refill slower than the quota's, such a level gives back
//     what this key's own takes free a window later, plus the refill its
//     answers show beyond that (level.frees, level.learnGain,
//     TestASharedLevelFreesWhatTheAnswersShow). Until that refill is
//     measured (over half a window), answers that show the level freeing
//     nothing beyond this key's own takes for a second or more give it no
//     refill until one shows it moving, or until it goes unheard for an
//     eighth of the window, as what is kept back of such a level does
//     (below); it then frees in steps, and a call that fits may pass one
//     that waits (level.noRefillUntil,
//     TestASharedLevelWhoseAnswersShowNoRefillGetsNone). A take admitted a window
//     before an answer may have left the server's window before the server
//     counted that answer, whose r then counts what it freed: it is freed
//     then and not again a window after its own answer (level.heard,
//     TestAFreeTheServersWordCountsIsNotFreedAgain).
//  3. A policy holds what it is seen to take from. A policy the contract
//     does not document binds the kind of call (an operation at a cost) that
//     a refusal named it for, or whose answers show it going down two more
//     times than not; being named is not enough, since a server may name the
//     narrowest of all the key's levels in every answer (level.witness,
//     TestAPolicyHoldsWhatItIsSeenToTakeFrom).
//  4. A refusal slows what it speaks of. A refusal that names a level holds
//     the calls that take from it for its wait and cuts that level's pace;
//     only what speaks of the key as a whole (OVERLOADED, parallel, a
//     lockout, a refusal naming no level) holds every call or cuts the key's
//     pace and its in-flight cap. The pace steps back up in steps of the
//     server's own wait (refusedLocked, pace.go,
//     TestARefusalSlowsWhatItSpeaksOf).
//  5. No request leaves after an answer that asks to wait, also not one that
//     was admitted before the answer was read: the last moment before a
//     request is written, it waits for refusals still being read and sits
//     out any wait announced since its admission, and when that wait ends,
//     any announced meanwhile (lastmoment.go, package bodo's unsent.go;
//     TestNoRequestLeavesAfterAnAnswerThatAsksToWait,
//     TestAWaitSatOutIsLookedAtAgain).
//  6. Without any hint, converge just below the limiter. A bare 429 (no
//     code, no wait) comes from a limiter in front that says nothing of its
//     limit: the key's pace then counts requests, at a rate fixed at the
//     first such refusal (pace.requestRate: what the calls cost then does not
//     change what the limiter lets through), drains a burst's time, climbs
//     fast to near the rate the limiter let through when it refused (the
//     share it was refused at bounds that from above only once the pace
//     counted requests: the first refusal is of an unpaced burst; after
//     hintlessFor without one, the rate it was last read at stands, or
//     what passed if more, as most likely the limiter is the same) and
//     probes slowly above (pace.go,
//     TestWithoutAnyHintConvergeJustBelowTheLimiter,
//     TestAHintlessShareStaysWithItsLimiter,
//     TestAHintlessLimiterIsReadAgainAfterAQuietSpell).
//  7. One model, local or shared. With a shared store the levels (as
//     the process models them: refilled continuously or only by their
//     moments and answers, a level of this key alone bounded by the log of
//     every process's takes), their paces (a spread, a refusal's cut), the
//     waits a refusal asked for, the lockout, exhausted quotas and the
//     key's cuts are kept in the store, so what one process hears binds
//     all; a call the store holds at a level holds only the process's calls
//     that take from it (rule 4); while the store is unreachable each
//     process keeps to its share of the key: of its slots, of its rate and
//     of what the server's last word left of every level that refills, as
//     the store refills every level not shown to free in steps; the part
//     starts from the last word on the level, the server's or the store's
//     (each admission says what the levels it took from hold, over all
//     processes), less this process's takes since: the refill since then
//     the others may have taken; an answer's word then only lowers the
//     part, since what it says is left holds the others' parts that they
//     have not taken yet. A store back without its counts starts
//     each level from what the model holds (store.go, gate_store.go;
//     TestAProcessThatLostTheStoreTakesItsPartOfTheKey,
//     TestAnOutagePartsWhatIsLeftThen, TestAnOutagePartsWhatTheStoreHeld,
//     TestAnOutageStartsFromTheLastWord,
//     TestAWordInAnOutageLowersAPartNeverRaisesIt; redisbudget's
//     TestAGrantSaysWhatTheLevelsHold,
//     TestAStoreBackEmptyStartsFromWhatTheProcessBelieves,
//     TestTakesWhileRedisWasAwayCountOnceInARedisBackEmpty,
//     TestOneModelLocalOrShared,
//     TestAWriteTheStoreHoldsHoldsNoRead,
//     TestAPacedLevelSpreadsTheCallsOfAllProcesses,
//     TestALevelThatFreesInStepsFreesWhatItsLogFrees,
//     TestWhatOneProcessShowsOfAStepsLevelBindsAll,
//     TestAProcessThatHasNotSeenTheStepsIsSpreadToo).
//  8. The documented limits are the prior. Before the server has spoken of a
//     level the model is the contract's (the key level a bucket holding its
//     capacity, 600 points, refilling 5 a second), and it stays so while
//     the server's words are that bucket's (r plus t's refill its capacity:
//     drained at once, r=0;t=120); the first word the bucket would not say,
//     a refusal on the level with a longer wait than that bucket would ask or
//     another plan (RateLimit-Policy, a status) ends it, and the server
//     decides from then on (level.endPrior, level.addsUp,
//     TestTheDocumentedLimitsAreThePrior).
//
// Where the rules are silent: a level that showed it frees in steps (a t
// after a take further than a bucket would need to be full again) is
// spread over its window, a tenth of it at once and then at its quota's
// rate, so that a burst never leaves it freeing nothing for a window while
// every caller waits on it; with little left until its oldest take leaves
// the window, a tenth of what is left, spread over that time; a level the
// model refills between answers (a learned policy) is spread at the pace
// its refill allows on top of that (level.spreads, level.lastingRate,
// TestALevelThatFreesInStepsIsSpread, TestASpreadLevelSpreadsWhatIsLeft,
// TestASpreadPolicyCountsItsRefill,
// TestASpreadLevelLetsATenthOfWhatIsLeftGoAtOnce; a retry answered as an idempotent
// replay, which the server counted on no write, gives its turn back,
// TestAReplayTakesNoTurnOfASpreadLevel), and so is a level others take from
// that the server named within its window, at what this key has of it per
// window; of such a level, what the others took at once between two of its
// answers (at most a 30th of its window apart, 2 s of a minute, within
// 0.1-5 s: the fall since an older answer is many takes and refills,
// TestTheFallsKeptBackAreThoseOfAPartOfTheWindow) is kept back for their
// next take, which a call sent on the last r would meet: the most they took so within the last window, since
// what they take comes back to them a window later and they take it again
// (level.reserve, TestALevelOthersTakeFromInChunksKeepsAChunkBack; the
// larger of two falls binds until it leaves the window,
// TestTheLargestRecentFallIsKeptBack), while calls that take from the
// level are answered or answers name it: with neither for an eighth of its
// window (status answers do not count), it keeps nothing back, since the
// calls it held sent nothing that could show the others' next take
// (TestAReserveLapsesWhileTheLevelGoesUnheard); then one call goes, and
// the others wait for its answer
// (TestAReserveHoldsWhileCallsTakeFromTheLevel); so does every call but
// one that would take of such a level on a guess, while the answers to
// calls that take from it name it: of what the refill brought since the
// server's last word on it (what this key took a window before, the
// refill its answers showed), or, while something is kept back, on a word
// older than the reserve measures (maxDropGap); the others take only what
// a recent word left until that call's answer says what is left, for at
// most an eighth of the window (level.guesses, TestAGuessGoesAlone,
// TestAGuessWaitsAtMostUntilTheReserveLapses,
// TestAGuessIsNoneWhereAnswersNameAnotherLevel); a remainder smaller than
// their take is kept back too, since others may take part of a chunk; a
// call bigger than a level the server
// announced waits for the level to be full and then goes (an odd header
// never wedges a key); a status request about a stale level that the level
// refuses makes the next one about it wait twice as long, up to
// maxStatusGap, until one finds more left than the model believed
// (level.statusRefusedLocked, TestARefusedStatusWaitsLongerForTheNext);
// while a level the status takes nothing from (writes, deletes) holds
// calls and no other call has left for idleStatusEvery, the key is idle
// and a status costs a point it would not use, so the client asks then and
// every idleStatusEvery while it stays idle: an empty level the server
// does not name in its answers may have refilled long before its word's
// moment (idleDueLocked, TestAnIdleKeyAsksAboutTheLevelThatHoldsIt); a
// wait the server asks is held at most MaxLockout for
// a lockout and MaxServerWait otherwise; an answer that is not the API's own
// binds only the call that got it with its wait (rule 6 still slows the
// key); a level this key shares with keys of the same principal or org in
// this process is split between them (identity.go); the slot of an attempt
// that was sent and got no answer (its caller gave up, the connection
// broke) stays taken until a call as long as the longest that ended
// lately would have ended, in the store too, since the server counts it in
// flight until it is done with it (lingerLocked,
// TestASlotStaysTakenWhileTheServerMayStillRunItsCall).
package budget
