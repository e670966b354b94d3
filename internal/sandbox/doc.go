// Package sandbox is an in-memory implementation of the whole bodo API
// (bodo-api.md, version 2026-11-01) as an http.Handler: the server the SDK's
// tests, the quickstart and the benchmarks run against.
//
// Costs and classes come from the generated table in internal/ops. The
// sandbox's clock is the time package itself and it starts no goroutines,
// tickers or timers: bucket refills, window resets, export completion,
// lockout ends and foreign load are computed lazily from time.Now when a
// request arrives, so it runs on virtual time inside testing/synctest (use
// Server.Transport there; it needs no sockets).
//
// The sandbox has one organisation with two principals: A, a user holding
// TestKey and SecondKey, and B, a service account holding ForeignKey. All
// keys see the same data.
//
// # Decisions where bodo-api.md is silent
//
// Charging. A call that passes every level is charged in full, whatever it
// answers afterwards (400, 404, 409, 422 included); write-class calls count
// one write even when they fail. Nothing is charged for 401, an unknown
// route (404), a method a known path does not take (405 with Allow), an
// unknown Bodo-Version (400), an OVERLOADED fault or any
// 429. A request whose Idempotency-Key is already known costs 1 point and
// no write whether it replays, is IDEMPOTENCY_KEY_REUSED or
// IDEMPOTENCY_KEY_IN_USE. A batch that is not a valid batch (or any
// unreadable body over 1 MiB) costs 1 point. In a batch, a part without a
// route costs 1 point and answers 404; a part whose idempotencyKey is known
// costs 1 point. A call needing more than a level can ever hold (a batch of
// more than 10 deletes, say) is answered 400 BAD_REQUEST and costs nothing.
//
// Refusals. When several levels refuse, a QUOTA_EXHAUSTED one wins;
// otherwise the level with the longest wait is named. retryAfterMs is the
// exact wait rounded up to a millisecond, Retry-After the same rounded up to
// a second (at least 1). A parallel refusal asks for a random 100–999 ms.
// QUOTA_EXHAUSTED carries retryAfterMs and Retry-After up to resetsAt as
// well. The refusal that passes LockoutRefusals is still answered with its
// own policy; the lockout starts with it. Lockout answers count in
// rejectionsLast60s but not towards the next lockout, and refusals from
// before a lockout's end never count again.
//
// Headers. RateLimit-Policy lists all eight levels, windows rounded up to
// whole seconds, then the announced extra policies (WithExtraPolicies).
// RateLimit names the level with the smallest remaining share of its full
// level (the key level's capacity; for org, this key's share of the org)
// among key, principal, org and, when the call counts against them, write,
// delete, delete-day, egress and the enforced extra policies; parallel is
// named only when no slot is left. By default every level is a token bucket
// and t is the seconds until it is full again; delete-day and egress are
// fixed windows and t is the seconds until the window resets when anything
// of it is used. Other shapes report as Shape says. A refusal's RateLimit
// names the refusing level; a lockout reports "key";r=0 with t the seconds
// the lockout has left. A 401 reports a fresh key. WithNoisyHeaders varies
// both fields within what the Structured Fields and the draft allow;
// WithNarrowestOfAll names the narrowest of all the key's levels, whatever
// the call takes from; WithContradictedHeaders makes every success say
// "key";q=0 and "key";r=0;t=0. WithGateway puts a leaky bucket in front
// that refuses with a bare 429 and none of these fields.
//
// Levels. The org level's remaining (also in GET /v1/rate_limit) is the
// lesser of the org level and the key's share of it; a refusal by either
// names policy "org". Egress counts records returned by lists (events
// included), 1 for a get or a count and none for a 304, me, rate_limit,
// openapi.json or an export; the read that crosses the quota is answered
// in full and the next reads are refused. Foreign load takes only from the
// org level, is bound by none of B's other levels and does not show in
// Stats.
//
// Profiles. Profiles lists servers that differ from the documented one where
// bodo-api.md leaves room (plans, limiter shapes, headers, extra policies,
// overload, foreign load), and a few that break it as a faulty server or one
// in front of the API might (overloaded leaves out Retry-After,
// contradicted-headers and gateway say what is not so); Profile.New serves one and Profile.Allowance says
// what one key may get from it. Server.WouldAccept tells, without changing
// anything, whether a call would be admitted now, and KeyStats.EarlyRequests
// counts requests that came before an announced wait was over.
//
// Resources. Malformed ids are 404 like unknown ones. Creates answer 201
// with Location and ETag; DELETE answers 204. An invoice is created as
// draft unless status says open (the openapi.json default). A partial
// refund leaves the invoice paid with amountRefunded grown; it becomes
// refunded when all is refunded; a refund beyond the rest is 422. Event data
// is the resource after the change ({"id"} for contact.deleted). Exports
// always succeed; result.records is the number of contacts or invoices when
// the export started; export.succeeded is emitted by the first request after
// the export finished, with createdAt the finishing time. Lists are in
// creation order. An answer is stored under its Idempotency-Key for every
// admitted call, problems included, and before a DropAfterCommit fault drops
// the connection.
//
// Languages. Problems are German (Content-Language: de) unless the
// request's Accept-Language prefers English (see languageOf); then title,
// detail and the field messages are English (en). A batch's parts answer in
// the batch request's language; a replay in the first answer's. The detail
// of VALIDATION_FAILED counts the invalid fields and ends without a full
// stop, as clients print the fields after it.
//
// Stats. KeyStats.InFlight and MaxInFlight count every request inside the
// handler, refused ones included; the parallel level counts admitted calls.
package sandbox
