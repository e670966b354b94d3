// Package budget is the client's model of one API key's rate limits;
// package bodo keeps the public surface.
//
// A call (call.go) is admitted with State.Admit (admit.go, hold.go), which
// waits until every gate lets it go (holdLocked, gates.go); its attempt is
// settled with the answer through Ticket.Finish or Ticket.Unanswered
// (answer.go; the RateLimit fields in observe.go, a refusal in
// refused.go). The gates, in the order a call meets them, each in its
// file:
//
//   - the lockout, which holds every call of the key, and the server's
//     waits, which hold every budgeted one (gate_pause.go);
//   - the refusal guard, RefusalLimit (gate_guard.go);
//   - the learned policies not tied to the call's kind, which may bind it
//     (gate_scope.go);
//   - the levels the call takes from, each with its own pace
//     (gate_levels.go; level.go, with what the answers show of a level in
//     level_learn.go and of its shape in level_shape.go, its refill
//     between them in level_refill.go, what it keeps back for others in
//     level_reserve.go, its spread in level_spread.go, its waits in
//     level_wait.go, the calls a learned policy binds in level_scope.go
//     and this key's takes in takelog.go);
//   - the key's pace (gate_pace.go, pace.go);
//   - the slots in flight (gate_slots.go);
//   - with a shared store, the store (gate_store.go; store.go, with an
//     attempt's request in store_acquire.go, its release in
//     store_release.go, the keeper of leases and what the store missed in
//     store_keeper.go, and the process's share while the store is down in
//     store_share.go).
//
// Calls queue per gate, in arrival order among the calls that wait for the
// same thing (queue.go). A key's State (state.go) is shared by the clients
// of the process through For (states.go). An idle one leaves the map only
// when forgetting it loses nothing: no call, wait or refusal the guard
// counts (TestALevelsWaitKeepsAnIdleKey,
// TestAStatusesRefusalsKeepAnIdleKeyForTheGuardsWindow), and the map gives
// its memory back (TestTheMapOfForGivesBackItsMemoryWhenKeysLeave). A call
// or a word that reaches a state as it leaves goes to the key's state in
// the map (State.lock;
// TestACallOnAStateRetiredWhileItWaitedForTheLockGoesOnTheKeysNewState,
// TestWhatAStateRetiredWhileItWaitedForTheLockIsToldGoesToTheKeysNewState).
//
// The model follows the eight rules below. Each names the code that keeps
// it and the tests that show it, named after what they show;
// TestTheRulePageNamesWhatExists checks that the tests, files, methods and
// unexported names the page gives exist.
//
// # Rule 1: the server's word binds until its moment
//
// A level that RateLimit says has r left takes no more than r, less what
// was sent since, before the moment now+t. At that moment it holds at least
// one unit more than the word left, whatever its shape; of a level that
// refills, the refill since counts toward that unit
// (TestAMomentAddsWhatTheRefillSinceHasNot), and the refill after the
// moment adds to it (TestTheRefillAfterAMomentAddsToItsUnit). The next
// answer says how much
// (level.refill; TestTheServersWordBindsUntilItsMoment). How the server
// counts is its business:
//
//   - A level that showed it refills continuously refills at its rate
//     between answers. It shows it by having more left than its quota; for
//     the key level, which the contract documents as a bucket, by a full
//     moment further than its window that adds up to the documented
//     capacity, not one within it (TestATLongerThanTheWindowIsABucketsT,
//     TestATWithinTheWindowShowsNoBucketsDepth); or, a level of this key
//     alone, by a full moment that moves later as points are taken, with r
//     and t adding up to its size (TestABucketShowsInAnyOrderOfItsAnswers,
//     TestOnlyALevelOfThisKeyAloneShowsABucketsMoments).
//   - Such a level of this key alone refills at its quota's rate, which no
//     one else slows: a t later than that rate makes it full shows a bigger
//     level, not a slower refill
//     (TestABucketOfThisKeyAloneRefillsAtItsQuotasRate).
//   - A level of this key alone, whatever its shape, never holds less than
//     its quota less this key's own takes in the last window, which every
//     shape grants (level.logAvailable;
//     TestTheServersWordBindsUntilItsMoment), unless an answer shows less:
//     what others took counts as taken then. The server counted the answered
//     call at some moment of its round trip, so the answer is read against
//     the log as it stood when the call was taken: a word that arrives after
//     the log freed a take the server still counted shows no one else's
//     (Call.freedSince; TestAWordAnsweredLateIsNoOtherKeysTake).
//   - A policy the contract does not document is refilled between answers
//     at its quota's rate, since others may take from it too
//     (TestASpreadPolicyCountsItsRefill). A refusal of a call that this
//     refill let go before the moment of the word, on more than the word
//     left (level.early; not one that went on a word, a take given back or
//     a refusal's promise: TestACallThatWentOnTheServersWordIsNotEarly),
//     shows that nothing freed before it: from then on, until it shows it
//     is a bucket, the level gains nothing between a word and its moment,
//     frees a unit then and refills from then until the next word. A
//     status answer's reset is such a moment too
//     (TestALaterWordOnALevelThatRefillsFromItsMomentsBinds). A t may say
//     when the level is full again: the moment is then when this key's
//     oldest take since the last t's moment leaves the window, if that comes
//     first (level.momentOf); a take sent before the last moment passed
//     does not move the next (TestATakeBeforeAPassedMomentDoesNotMoveTheNext).
//     The shared store is told so with each
//     word and each refusal's owe, the refusal's own word among them: no
//     process refills it before the moment (level.learnEarly, level.defers;
//     TestALevelRefusedBeforeItsMomentRefillsOnlyFromThen,
//     TestTheRefusalThatShowsTheStepsTellsTheStore,
//     TestARefusalWithoutAWordTellsTheStoreTheSteps). A level of the API
//     keeps its refill: the contract says others take from the levels it
//     shares, which explains such a refusal
//     (TestALevelOfTheAPIKeepsItsRefillAfterAnEarlyRefusal).
//   - The answer to a call that took nothing from a level (a server that
//     names the narrowest of all levels) may carry a word older than the
//     model's: it only lowers it (level.observe;
//     TestAWordOnALevelACallTookNothingFromOnlyLowersIt).
//   - A word that comes within a refusal's wait, in a RateLimit field or a
//     status answer, leaves the wait's owe standing unless the level showed
//     it refills continuously: when the wait ends the level holds a unit
//     more than the word said, not what it would have refilled since the
//     word; the shared store is told so of a RateLimit field (a status
//     answer's words stay with the process that asked) (level.keepOwe;
//     TestAWordWithinARefusalsWaitKeepsItsOwe,
//     TestAWordWithinARefusalsWaitTellsTheStoreItsOwe,
//     TestABucketRefillsThroughAWordWithinARefusalsWait,
//     TestAWordWithinARefusalsWaitKeepsNoOweOfABucketOrOnceTheWaitEnded).
//   - A refusal's wait is the server's word too: when it ends, the level
//     holds the refused call's need, not that and the wait's refill
//     (TestARefusalsWaitEndsWithTheRefusedCallsNeed). So does a level
//     others take from, which between answers frees for this key only what
//     it took a window before (level.promised;
//     TestARefusalsWaitEndsWithTheRefusedCallsNeedOnALogOthersTakeFrom),
//     or, when what this key took frees it after the wait and before the
//     reserve below lapses, once that has left (level.promisedAt): what
//     frees at the server's moment may be what the others took a window
//     before, which they take again as it frees
//     (TestARefusalsRetryOnALogOthersTakeFromWaitsForWhatThisKeyTook).
//     What such a level keeps back for the others holds then as before, so
//     the refused call goes at the latest when that lapses
//     (TestARefusalsRetryGoesOnceTheReserveLapses).
//
// # Rule 2: outcomes beat hints
//
// Fields that are absurd (a quota of 0), that contradict themselves
// (nothing left yet full now: r=0;t=0) or that are malformed are ignored,
// and RateLimit-Policy is informative (observeLocked, applyPoliciesLocked;
// TestOutcomesBeatHints). Of a level others take from, what the answers
// show beats its t:
//
//   - Its t says when it would be full if no one took more, which others
//     do. Unless t implies a refill slower than the quota's, the level
//     gives back what this key's own takes free a window later, plus the
//     refill its answers show beyond that (level.frees, level.learnGain;
//     TestASharedLevelFreesWhatTheAnswersShow). A call that finds it empty
//     goes when this key's oldest take leaves the window
//     (TestACallWaitsForThisKeysTakeToLeaveALevelOthersTakeFrom).
//   - Until that refill is measured, over half a window, answers that show
//     the level freeing nothing beyond this key's own takes for a second or
//     more give it no refill until one shows it moving, or until no answer
//     names it for an eighth of its window. It then frees in steps, and a
//     call that fits may pass one that waits (level.noRefillUntil;
//     TestASharedLevelWhoseAnswersShowNoRefillGetsNone).
//   - A take admitted a window before an answer may have left the server's
//     window before the server counted that answer, whose r then counts
//     what it freed: it is freed then, and not again a window after its own
//     answer (level.observe; TestAFreeTheServersWordCountsIsNotFreedAgain).
//
// # Rule 3: a policy holds what it is seen to take from
//
// A policy the contract does not document binds the kind of call (an
// operation at a cost) that a refusal named it for, or whose answers show
// it going down two more times than not; an answer shows it not going down
// only when r stayed where it was and the quota's rate cannot have
// refilled what the call needs of the level since, up to full, or when r
// is above the level's size less that need (a sliding log spread at its
// rate frees a take as each call takes one, a window comes back whole at
// its reset, and an older word may be answered last;
// TestAnUnmovedWordWhileTheLevelMayHaveRefilledUntiesNothing,
// TestAFullLevelUntiesAKindWhateverTheGap, TestAWindowsResetUntiesNothing,
// TestOlderWordsAnsweredLastUntieNothing,
// TestACallBiggerThanAPolicyStaysTied). Being
// named is not enough, since a server may name the narrowest of all the
// key's levels in every answer (level.witness;
// TestAPolicyHoldsWhatItIsSeenToTakeFrom). Nor is a fall
// that this key's other calls may have caused: those in flight when the
// call whose answer brought the last word on the policy was admitted, and
// those sent since. An answer shows its call's kind taking only when the
// policy fell by more than they could take, in points or requests as it
// counts; of another unit, only when none was in flight (State.othersLocked;
// TestAFallOtherCallsMayHaveTakenTiesNothing,
// TestAnOlderWordAnsweredLastTiesNothing,
// TestAFallInAnotherUnitTiesNothingWhileOthersAreInFlight).
//
// Until then such a policy may bind a kind of call the server has not
// shown it to. A kind that sent, within one window of the policy, as much
// as its quota (in its unit, requests or points) goes alone for the rest
// of that window: in arrival order, each call waits for the answer to the
// one before (also while that one asks the shared store), for at most
// maxAlone, so that a burst meets the policy with one call, not with all
// the kind has in flight, and a slow call holds its kind back no longer. A
// call sent past the quota that is accepted shows that the policy does not
// bind the kind, which goes free of it; one refused on the policy ties it;
// any other answer leaves the kind alone. A new window counts anew, only
// this process's calls count, and a policy keeps count of at most maxKinds
// kinds; a level of the API, a kind the policy is tied to and a policy no
// quota sized run nothing (level.runOf, scopeLocked;
// TestOnlyALearnedPolicyThatMayBindAKindRunsIt,
// TestAKindPastAnUnknownQuotaGoesAlone,
// TestARunLetsItsWaitersGoOneByOne, TestARunHoldsCallsWhileOneAsksTheStore,
// TestARunCountsOnlyWhatTheStoreAdmitted).
//
// # Rule 4: a refusal slows what it speaks of
//
// A refusal that names a level holds the calls that take from it for its
// wait and cuts that level's pace. Only what speaks of the key as a whole
// (OVERLOADED, parallel, a lockout, a refusal naming no level) holds every
// call or cuts the key's pace and its in-flight cap. The pace steps back up
// in steps of the server's own wait (refusedLocked, pace.go;
// TestARefusalSlowsWhatItSpeaksOf). The wait's end is the moment the
// server named for the refused call (rule 1): the first call after it
// passes the level's cut pace, and the cut paces what follows
// (level.keepsPromise; TestARefusedCallsRetryPassesItsLevelsPace).
//
// # Rule 5: no request leaves after an answer that asks to wait
//
// Also not one that was admitted before the answer was read: the last
// moment before a request is written, it waits for refusals still being
// read (at most readingWait, then as long as their headers asked) and sits
// out any wait announced since its admission, and when that wait ends, any
// announced meanwhile; one it does not sit out holds the request back
// before anything is written (lastmoment.go, package bodo's unsent.go;
// TestNoRequestLeavesAfterAnAnswerThatAsksToWait,
// TestAWaitSatOutIsLookedAtAgain,
// TestARefusalsHeadersBindWhileItsBodyIsRead,
// TestAQuotaExhaustedWhileARequestWaitsHoldsIt). A refusal whose body is
// never read (a middleware made it an error) holds the key's budgeted
// calls as long as its headers asked
// (TestARefusalNeverReadHoldsTheKeyForItsHeadersWait;
// TestARefusalAMiddlewareMadeAnErrorStillHoldsTheKey in package bodo).
//
// # Rule 6: without any hint, converge just below the limiter
//
// A bare 429 (no code, no wait) comes from a limiter in front that says
// nothing of its limit. Before it can, slow start hears its first flight in
// full. Once the call let out alone is answered, a flight goes: the first
// calls admitted after that answer, as many as the cap on calls in flight.
// The calls after it wait until every call of the flight is answered or
// given up on, for at most twice the first call's round trip after the
// flight's last call went (30 s at most). So the refusals of a limiter that
// let part of the flight through have cut the pace before any more calls
// go, as long as the flight is as fast as the first call
// (slowStartDueLocked; TestSlowStartsFlightIsAnsweredBeforeMoreGo,
// TestSlowStartsFlightCountsThroughTheStore); the call let out alone holds
// the others at most SlowStartHold while it has no answer
// (TestACallWithoutAnAnswerHoldsSlowStartAtMostSlowStartHold). The key's
// pace then
//
//   - counts requests, at a rate fixed at the first such refusal: what the
//     calls cost later does not change what the limiter lets through
//     (pace.requestRate), the first calls' cost among them
//     (TestAHintlessLimiterCountsRequestsOfWhatTheFirstCallsCost);
//   - drains a burst's time, climbs fast to near the rate the limiter let
//     through when it refused, and probes slowly above
//     (TestWithoutAnyHintConvergeJustBelowTheLimiter);
//   - reads that rate from the calls sent between two of its bare 429s
//     (the first within meterWindow and this one) that passed, each 429
//     showing it empty, plus the one it may have held then, and takes it as
//     it is, under the share it refused at: what was sent before the first
//     was its burst, also when answered after it (meter.from;
//     TestAHintlessLimiterIsReadFromWhenItWasEmpty); with no 429 before it
//     within meterWindow, what passed over the last meterWindow; nothing,
//     when nothing passed (TestALimiterThatLetNothingThroughIsNotRead);
//   - steps up, and counts toward forgetting the limiter, only the time in
//     which the pace held calls, at its gate or at the slots its cut share
//     leaves: calls slower than the pace show nothing of the limiter, and a
//     burst after an idle spell still meets the pace (pace.skipIdle;
//     TestAnIdlePaceKeepsItsHintlessLimiter, TestACapHeldByTheShareBindsThePace,
//     TestCallsSlowerThanAHintlessPaceLetItKeepItsLimiter,
//     TestCallsThatComeBeforeTheHintlessPaceIsFullStepItUp);
//   - takes the share it was refused at as a bound from above only once it
//     counted requests, since the first refusal is of an unpaced burst
//     (TestAHintlessShareStaysWithItsLimiter);
//   - after hintlessFor of that time without such a refusal, forgets the
//     limiter: the share steps up as after any cut, so that within a
//     minute it holds no call (TestAForgottenHintlessLimiterHoldsNoMore);
//     at the next such refusal it keeps the rate it was last read at, or
//     what passed if more, as most likely the limiter is the same
//     (TestAHintlessLimiterIsReadAgainAfterAQuietSpell).
//
// # Rule 7: one model, local or shared
//
// With a shared store, what one process hears binds all (store.go,
// gate_store.go, store_share.go, store_keeper.go; redisbudget's
// TestOneModelLocalOrShared):
//
//   - The store keeps the levels as the process models them (refilled
//     continuously or only by their moments and answers; a level of this
//     key alone bounded by the log of every process's takes), their paces
//     (a spread, a refusal's cut), the waits a refusal asked for, the
//     lockout, exhausted quotas and the key's cuts
//     (TestARefusalsWaitCutAndBlockGoToTheStore,
//     TestAnExhaustedQuotaTellsTheStore; redisbudget's
//     TestAPacedLevelSpreadsTheCallsOfAllProcesses,
//     TestALevelThatFreesInStepsFreesWhatItsLogFrees,
//     TestWhatOneProcessShowsOfAStepsLevelBindsAll,
//     TestAProcessThatHasNotSeenTheStepsIsSpreadToo).
//   - A call the store holds at a level holds only the process's calls
//     that take from it, as rule 4 says, and queues those that wait for the
//     same behind it (TestTheStoresHoldQueuesTheCallsThatWaitForTheSame;
//     redisbudget's TestAWriteTheStoreHoldsHoldsNoRead). What the store
//     could not have meant of a level (not a number, a debt deeper than its
//     size, a level the process does not know) is passed over
//     (TestWhatAStoreCouldNotHaveMeantOfALevelIsPassedOver).
//   - Each admission says what the levels it took from hold over all
//     processes (redisbudget's TestAGrantSaysWhatTheLevelsHold).
//   - While the store is unreachable, each process keeps to its share of
//     the key: of its slots
//     (TestAProcessThatLostTheStoreKeepsToItsShareOfTheSlots), of its rate,
//     and of what the server's last word left of every level that refills,
//     as the store refills every level not shown to free in steps
//     (TestAProcessThatLostTheStoreTakesItsPartOfTheKey,
//     TestAnOutagePartsWhatIsLeftThen, TestAnOutagePartsWhatTheStoreHeld).
//     The part starts from the last word on the level, the server's or the
//     store's, less this process's takes since: the refill since then the
//     others may have taken (TestAnOutageStartsFromTheLastWord). An
//     answer's word then only lowers the part, since what it says is left
//     holds the others' parts, which they have not taken yet
//     (TestAWordInAnOutageLowersAPartNeverRaisesIt). It goes on its share
//     once calls as long as the longest it saw end lately would have ended,
//     so that those the store admitted on the others' shares are done, and
//     no later, nor later than leaseTTL, the longest a slot lingers
//     (drainLocked; TestAProcessThatLostTheStoreWaitsForTheCallsItSaw,
//     TestTheDrainForgetsACallThatEndedMinutesAgo);
//     the keeper looks at once and then every probeEvery, so that a passing
//     failure ends before the drain does
//     (TestAPassingFailureOfTheStoreEndsBeforeTheDrain).
//   - Every request to the store says what the process holds in flight
//     outside leases: its calls admitted without one and, while it keeps
//     to its share, the rest of the share; the store leaves those slots to
//     it, and counts its calls without a lease for it too (store_reserve.go;
//     TestAProcessOnItsShareReservesItFromTheOthers,
//     TestAReleaseSaysTheReservation,
//     TestALingeringLeaseOnTheShareKeepsItsSlotInTheStore,
//     TestALingerEndedReservesNoMoreThanTheShare, redisbudget's
//     TestAReservationHoldsItsSlotsFromTheOthers). No call goes on the share
//     before a request that carried it has come back
//     (TestTheStoreHearsTheShareBeforeACallGoesOnIt,
//     TestAQueuedReleaseDoesNotCountAsSent, TestAShareOnItsWayIsNotSent),
//     and, where the store may not have held the share until then (an
//     outage began, or the keeper ended in one and the store dropped it),
//     not before a drain from when one that carried all of it came back
//     (TestAShareSentAfterTheDrainDrainsFromThen,
//     TestOnlyARequestCarryingTheShareEndsTheRedrain,
//     TestAFailureDuringTheKeepersLookIsSentAtOnce,
//     TestTheKeepersOwnFailureSendsTheShareAtOnce,
//     TestACallAfterTheKeeperEndedSendsTheShareAgain,
//     TestAFailureInTheRejoinWindowAfterTheShareWasDroppedDrains); a
//     process with no call lets the store drop its share
//     (TestTheKeeperEndsDuringALongOutage). So a process that
//     lost the store alone and the others that still reach it keep within
//     the parallel quota together, also once it is back (redisbudget's
//     TestProcessesThatLoseTheStoreOneByOneKeepToTheParallelQuota,
//     TestAProcessBackFromItsShareCountsItsOwnCallsStillInFlight).
//   - A store back without its counts starts each level from what the
//     model holds (redisbudget's
//     TestAStoreBackEmptyStartsFromWhatTheProcessBelieves,
//     TestTakesWhileRedisWasAwayCountOnceInARedisBackEmpty).
//
// # Rule 8: the documented limits are the prior
//
// Before the server has spoken of a level, the model is the contract's:
// the key level a bucket holding its capacity, 600 points, refilling 5 a
// second. It stays so while the server's words are that bucket's (r plus
// t's refill is its capacity: drained at once, r=0;t=120). The first word
// the bucket would not say, a refusal on the level with a longer wait than
// that bucket would ask, or another plan (RateLimit-Policy, a status) ends
// it, and the server decides from then on (level.endPrior, level.addsUp;
// TestTheDocumentedLimitsAreThePrior,
// TestAnAnnouncedPlanOtherThanTheContractsEndsThePrior).
//
// # Where the rules are silent
//
// Levels that free in steps, and levels others take from:
//
//   - A level that showed it frees in steps (a t after a take further than
//     a bucket would need to be full again) is spread over its window: a
//     tenth of it at once, then at its quota's rate, so that a burst never
//     leaves it freeing nothing for a window while every caller waits on it
//     (level.spreads; TestALevelThatFreesInStepsIsSpread). With little left
//     until its oldest take leaves the window, a tenth of what is left goes
//     at once and the rest is spread over that time
//     (TestASpreadLevelSpreadsWhatIsLeft,
//     TestASpreadLevelLetsATenthOfWhatIsLeftGoAtOnce). A level the model
//     refills between answers (a learned policy) is spread at the pace its
//     refill allows on top of that (level.lastingRate;
//     TestASpreadPolicyCountsItsRefill). A retry answered as an idempotent
//     replay, which the server counted on no write, gives its turn back
//     (TestAReplayTakesNoTurnOfASpreadLevel), and so does a call refused
//     with a wait for every call of the key, such as an OVERLOADED
//     (TestARefusalTakesNoTurnOfASpreadLevel; with a shared store, in the
//     store, TestARefusalGivesItsTurnBackInTheStoreToo): the spread runs at
//     the level's rate, so a turn kept by a call that took nothing is a
//     take the level allowed and no call gets. Any other refusal keeps its
//     turn: one by the level says it had no room at it, and one whose wait
//     does not hold the key would be retried at once, again and again.
//   - A level others take from that the server named within its window is
//     spread too, at what this key has of it per window (what it took
//     within the window and what is left), a tenth of that at once: what
//     frees for this key is what it took a window before, so a burst would
//     come back as a burst, with nothing between
//     (TestALevelOthersTakeFromIsSpreadAtWhatThisKeyHasOfIt).
//   - Of such a level, what the others took at once between two of its
//     answers is kept back for their next take, which a call sent on the
//     last r would meet (level.reserve;
//     TestALevelOthersTakeFromInChunksKeepsAChunkBack). Only answers at
//     most a 30th of the window apart count (2 s of a minute, within
//     0.1-5 s): the fall since an older answer is many takes and refills
//     (TestTheFallsKeptBackAreThoseOfAPartOfTheWindow). What is kept back
//     is the largest such fall within the last window, since what the
//     others take comes back to them a window later and they take it again
//     (TestTheLargestRecentFallIsKeptBack). A remainder smaller than their
//     take is kept back too, since others may take part of a chunk. A
//     level whose t implies a refill slower than the quota's (a bucket
//     they drain, which t counts as if no one took more) keeps it back as
//     well: a key of another process that read the same r would take it
//     too, and of a bucket what is kept back costs nothing while it is not
//     full (level.othersTake;
//     TestABucketOthersDrainKeepsBackWhatTheyTookAtOnce).
//   - The reserve holds while calls that take from the level are answered
//     or answers name it. With neither for an eighth of its window (status
//     answers do not count) it keeps nothing back, since the calls it held
//     sent nothing that could show the others' next take
//     (TestAReserveLapsesWhileNoAnswerNamesTheLevel); then one call goes, and
//     the others wait for its answer
//     (TestAReserveHoldsWhileCallsTakeFromTheLevel).
//   - While the answers to calls that take from such a level name it, a
//     call that would take from it on a guess goes alone: on what the
//     refill brought since the server's last word (what this key took a
//     window before, the refill its answers showed), or, while something is
//     kept back, on a word older than the reserve measures (maxDropGap).
//     The others take only what a recent word left until that call's answer
//     says what is left, for at most an eighth of the window (level.guesses;
//     TestAGuessGoesAlone, TestAGuessWaitsAtMostUntilTheReserveLapses,
//     TestAGuessIsNoneWhereAnswersNameAnotherLevel).
//
// Status requests:
//
//   - A status request about a stale level that the level refuses makes
//     the next one about it wait twice as long, up to maxStatusGap, until
//     one finds more left than the model believed (level.statusRefusedLocked;
//     TestARefusedStatusWaitsLongerForTheNext).
//   - While a level the status takes nothing from (writes, deletes) holds
//     calls and no other call has left for idleStatusEvery, the key is idle
//     and a status costs a point it would not use: the client asks then, and
//     every idleStatusEvery while it stays idle, since an empty level the
//     server does not name in its answers may have refilled long before its
//     word's moment (statusDueLocked;
//     TestAnIdleKeyAsksAboutTheLevelThatHoldsIt).
//     A level that takes longer to refill a unit is asked about that much
//     later and apart: the delete level, 10 a minute, every 6 s
//     (TestAnIdleKeyAsksAboutASlowLevelOnceAUnitCouldRefill).
//   - A status speaks of the key as a whole too: its parallel quota sets the
//     slots in flight, a lockout it reports holds every call (at most
//     MaxLockout), and the refusals it counted fill the lockout guard
//     (State.ObserveKeyStatus; TestAStatusSetsTheSlotsInFlight,
//     TestAStatusLockoutHoldsEveryCall; TestAStatusTellsTheKeyAsAWhole in
//     package bodo).
//
// Odd answers and lost ones:
//
//   - A call bigger than a level the server announced waits for the level
//     to be full and then goes: an odd header never wedges a key. One
//     bigger than a documented level can ever hold fails at once, unsent,
//     and so does one a known exhausted quota would refuse
//     (TestACallThatCanNeverFitADocumentedLevelFailsAtOnce,
//     TestAnExhaustedQuotaFailsItsCallsAtOnce).
//   - A policy that only a refusal named, which no answer sized, holds the
//     calls it binds for the refusal's wait and by its pace, not by what
//     the model counts of it, in arrival order (level.sized;
//     TestAPolicyHoldsWhatItIsSeenToTakeFrom,
//     TestNoCallPassesTheFirstWaiterOfALevelOnlyARefusalNamed).
//   - A call sits out a wait the server asks for at most its MaxHold (the
//     client's WithMaxRetryWait), and fails at once with a longer one: a
//     refusal's, or the moment of a word that leaves it too little until
//     then when even a bucket refilling at the quota's rate from what the
//     word left would hold it longer ("delete-day";r=0;t=86000; a t that
//     names when a bucket is full again asks no one call to wait that long)
//     (State.serverWaitLocked, level.leastWait;
//     TestAWordsMomentPastTheCallsMaxHoldFailsIt,
//     TestAWordsMomentFailsACallByWhatItTakesOfTheLevel,
//     TestABucketsFullMomentIsNoWaitTheServerAsked in package bodo).
//   - A wait the server asks is held at most MaxLockout for a lockout and
//     MaxServerWait otherwise. A header's w and t count for at most maxHold,
//     and then a call goes to ask again (maxSeconds;
//     TestAHeadersSecondsCountForAtMostMaxHold; one too long for a
//     Duration is forever, TestAWaitTooLongToCountIsForever); a level's log
//     of this key's takes keeps at most maxLogEntries entries, so a window
//     of a day at any rate of calls takes bounded memory
//     (TestATakeLogHoldsAtMostMaxLogEntries). A learned policy or partition
//     left idle is dropped and learned again when the server names it
//     (TestAnIdlePolicyStillAnnouncedIsLearnedAgain,
//     TestAnIdlePartitionHoldsItsTargetAgainWhenNamed).
//   - An answer that is not the API's own binds only the call that got it
//     with its wait (rule 6 still slows the key).
//   - A level this key shares with keys of the same principal or org in
//     this process is split between them (identity.go); a key that leaves
//     gives its part back, and one retired as its identity came joins no
//     group (TestAKeyRetiredWhileItsIdentityCameJoinsNoGroup).
//   - The slot of an attempt that was sent and got no answer (its caller
//     gave up, the connection broke) stays taken until a call as long as
//     the longest that ended lately would have ended, in the store too,
//     since the server counts it in flight until it is done with it
//     (lingerLocked; TestASlotStaysTakenWhileTheServerMayStillRunItsCall).
//     It counts for the refusal guard as a refusal, also when its caller
//     gave up on it: the server may have refused it, and counts that
//     toward a lockout (Ticket.Unanswered;
//     TestRefusalsAndAttemptsLostInFlightFillTheGuard).
package budget
