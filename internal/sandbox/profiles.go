package sandbox

import (
	"math"
	"slices"
	"time"
)

// Profile is a server that differs from the documented one where
// bodo-api.md leaves room: other plans, other limiter shapes, noisier
// headers, policies of its own, overload, another key eating the org.
type Profile struct {
	Name    string   // short and lower case, e.g. "sliding-log"
	Summary string   // one line on what differs from "documented"
	Limits  Limits   // given to WithLimits
	Options []Option // applied after WithLimits
	Foreign float64  // WithForeignLoad's rate in points per second; 0 for none
	Greedy  bool     // the foreign load is WithGreedyForeignLoadEvery's
	Drain   bool     // with Greedy, the load is WithDrainingForeignLoadEvery's
	// ForeignEvery is how often a greedy foreign load takes; 0 for a second.
	ForeignEvery time.Duration
	Gateway      Gateway // WithGateway's limiter in front; a zero Rate for none
	// Peer: SecondKey, another key of the principal, runs the same
	// workload with a client of its own, as another process of a fleet
	// does, and the principal binds (AllowanceBeside).
	Peer bool
	// TargetGoodput and TargetRefused, when positive, are what a client
	// should reach on this profile in place of the targets (97 %
	// of AllowanceAt over an hour and 90 % over the first 2 minutes; 429s
	// at most 0.5 % of the requests): the least share of AllowanceAt in a
	// run of any length, and the largest share of requests answered 429,
	// the gateway's answers included.
	TargetGoodput, TargetRefused float64
}

// The seeds of the profiles that draw pseudo-random numbers.
const (
	noisySeed    = 20261101
	overloadSeed = 20261102
	lateSeed     = 20261103
)

// gateway is the limiter of the "gateway" profile: 1 request a second,
// 5 at once, which for the agents' mix (about 4 points a request) is 4
// points a second, below the key's 5.
var gateway = Gateway{Rate: 1, Burst: 5}

// bigPlan is the limits of the "big-plan" profile.
func bigPlan() Limits {
	return Limits{Window: time.Minute, KeyQuota: 600, KeyCapacity: 1200, WriteQuota: 120, PrincipalQuota: 2400,
		OrgQuota: 6000, DeleteQuota: 20, DeleteDayQuota: 1000, EgressQuota: 20000}
}

// Profiles returns the named server profiles, a fresh slice on every call.
// The levels of each are chosen so that, for the workload of
// internal/agents (about 4 points a call, 40 % writes, 4 % deletes, 1.4
// records read and 10 % searches), the key level binds (the org for
// "foreign-90", the principal for "two-keys", the gateway in front for
// "gateway"): every other level
// allows at least 1.3 times what the profile's Allowance implies for the mix
// over runs of 2 to 60 minutes, the lengths of the agents' table.
//
//	documented     the limits of bodo-api.md (DefaultLimits)
//	small-plan     key 150 points/min, capacity 300; write 30/min, principal 600, org 1500,
//	               delete 5/min, delete-day 150, egress 5,000 records/h
//	big-plan       key 600 points/min, capacity 1200; write 120/min, principal 2400, org 6000,
//	               delete 20/min, delete-day 1000, egress 20,000 records/h
//	sliding-log    documented quotas; key, write, principal, org and delete are sliding logs
//	fixed-window   documented quotas; key, write, principal, org and delete are fixed windows
//	sliding-log-far
//	               sliding-log's levels, with a round trip of 400 ms ± 300 ms drawn for each
//	               request (WithJitteredLatency): the server counts a call somewhere in its
//	               round trip, and answers come back out of order, as on the internet
//	noisy-headers  documented limits, WithNoisyHeaders, and two announced policies that are not
//	               enforced: "bodo-burst" (20 points/s) and "bodo-money" (100 pay or refund calls/min)
//	search-policy  documented limits and the enforced "bodo-search": 30 requests per 60 s, a
//	               sliding log, over listContacts and countContacts when q is given
//	overloaded     documented limits; 5 % of requests answer 503 OVERLOADED with retryAfterMs
//	               of 300 ms to 3 s in the body and no Retry-After, which bodo-api.md asks for
//	               on every retryable 429 and 503: a server that breaks the contract there, as
//	               the vendor's staging server does with -retry-after ms-only
//	foreign-90     the big plan's key, write, principal, delete and egress levels with the
//	               documented org (3000/min); ForeignKey takes 90 % of the org (45 points/s),
//	               leaving 5 points/s
//	foreign-90-log the same with the org a sliding log, as a server that counts each key's
//	               takes in one log would have it: the org frees for a key what it took a
//	               minute before
//	foreign-90-greedy
//	               the org of foreign-90-log; ForeignKey takes 45 points at once, once a
//	               second, whenever they fit (WithGreedyForeignLoad), as a busy key would:
//	               it takes what frees for this key too, unless this key takes it first
//	foreign-90-ticks
//	               foreign-90-greedy with ForeignKey taking 27 points every 0.6 s, as
//	               staging's foreign load does
//	foreign-90-drain
//	               the big plan's levels with the org a sliding log whose t names when it
//	               is full again (SlidingLogUntilFull); ForeignKey takes up to 27 points
//	               every 0.6 s, as much of them as the org holds
//	               (WithDrainingForeignLoadEvery): staging's org and grain, with a
//	               busy key that takes what it can
//	foreign-90-late
//	               foreign-90-drain with each of ForeignKey's takes landing up to 6 ms
//	               after its tick (WithLateForeignLoad), as staging's timer does: a take
//	               that lands less late than the take a minute before it finds the org
//	               before that take's points have left it
//	narrowest-all  documented limits and the enforced "search": 20 requests per 60 s, a sliding
//	               log, over listContacts and countContacts when q is given; the RateLimit of
//	               every answer but a refusal names the narrowest of all the key's levels,
//	               "search" included, whether or not the call takes from it (WithNarrowestOfAll)
//	contradicted-headers
//	               documented limits, enforced as usual; every successful answer carries
//	               RateLimit-Policy "key";q=0;w=60 and RateLimit "key";r=0;t=0, refusals the
//	               true fields (WithContradictedHeaders)
//	two-keys       documented limits with the principal at 400 points/min: SecondKey runs the
//	               same agents with a client of its own (Peer), a key of the same principal in
//	               another process; each key could take 300 of it, so the principal binds
//	two-keys-log   two-keys with the principal a sliding log whose t names when it is full
//	               again (SlidingLogUntilFull), as the staging server's principal is
//	gateway        documented limits behind a leaky bucket of 1 request/s holding 5, which
//	               answers 429 text/plain without any hint (WithGateway); a client's targets are
//	               90 % of what the gateway lets through and 5 % of requests refused (rule 6 of
//	               issue 19); the gateway binds, not the key, so AllowanceAt is its allowance
func Profiles() []Profile {
	def := DefaultLimits()
	withShape := func(sh Shape) Limits {
		l := DefaultLimits()
		l.Shape = sh
		return l
	}
	foreign := bigPlan()
	foreign.OrgQuota = def.OrgQuota
	foreignLog := foreign
	foreignLog.Shapes = map[string]Shape{policyOrg: SlidingLog}
	foreignFull := foreign
	foreignFull.Shapes = map[string]Shape{policyOrg: SlidingLogUntilFull}
	twoKeys := def
	twoKeys.PrincipalQuota = 400
	twoKeysLog := twoKeys
	twoKeysLog.Shapes = map[string]Shape{policyPrincipal: SlidingLogUntilFull}
	return []Profile{
		{Name: "documented", Summary: "the limits of bodo-api.md", Limits: def},
		{Name: "small-plan", Summary: "a smaller plan: key 150 points/min, capacity 300, the other quotas halved",
			Limits: Limits{Window: time.Minute, KeyQuota: 150, KeyCapacity: 300, WriteQuota: 30, PrincipalQuota: 600,
				OrgQuota: 1500, DeleteQuota: 5, DeleteDayQuota: 150, EgressQuota: 5000}},
		{Name: "big-plan", Summary: "a bigger plan: key 600 points/min, capacity 1200, other levels doubled or more",
			Limits: bigPlan()},
		{Name: "sliding-log", Summary: "every per-minute level is a sliding log", Limits: withShape(SlidingLog)},
		{Name: "fixed-window", Summary: "every per-minute level is a fixed window", Limits: withShape(FixedWindow)},
		{Name: "sliding-log-far", Summary: "sliding-log, with round trips of 100-700 ms, drawn for each request: answers come back out of order",
			Limits: withShape(SlidingLog), Options: []Option{WithJitteredLatency(400*time.Millisecond, 300*time.Millisecond)}},
		{Name: "noisy-headers", Summary: "legal but varying rate-limit headers and announced policies that are not enforced",
			Limits: def, Options: []Option{
				WithNoisyHeaders(noisySeed),
				WithExtraPolicies(
					ExtraPolicy{Name: "bodo-burst", Quota: 20, Window: time.Second, Unit: unitPoints},
					ExtraPolicy{Name: "bodo-money", Quota: 100, Window: time.Minute, Operations: []string{"payInvoice", "refundInvoice"}},
				),
			}},
		{Name: "search-policy", Summary: `an enforced "bodo-search" policy: 30 searches per 60 s`,
			Limits: def, Options: []Option{WithExtraPolicies(ExtraPolicy{
				Name: "bodo-search", Quota: 30, Window: time.Minute, Unit: unitRequests, Shape: SlidingLog, Enforced: true,
				Operations: []string{"listContacts", "countContacts"}, Query: "q",
			})}},
		{Name: "overloaded", Summary: "5 % of requests are 503 OVERLOADED with the wait only in the body",
			Limits: def, Options: []Option{randomOverload(0.05, 300*time.Millisecond, 3*time.Second, overloadSeed)}},
		{Name: "foreign-90", Summary: "another key of the org takes 90 % of the org's quota",
			Limits: foreign, Foreign: 0.9 * float64(def.OrgQuota) / def.Window.Seconds()},
		{Name: "foreign-90-log", Summary: "another key of the org takes 90 % of the org's quota, which is a sliding log",
			Limits: foreignLog, Foreign: 0.9 * float64(def.OrgQuota) / def.Window.Seconds()},
		{Name: "foreign-90-greedy", Summary: "another key of the org takes 45 points a second at once whenever they fit in the org, a sliding log",
			Limits: foreignLog, Foreign: 0.9 * float64(def.OrgQuota) / def.Window.Seconds(), Greedy: true},
		{Name: "foreign-90-ticks", Summary: "another key of the org takes 27 points every 0.6 s whenever they fit in the org, a sliding log",
			Limits: foreignLog, Foreign: 0.9 * float64(def.OrgQuota) / def.Window.Seconds(), Greedy: true, ForeignEvery: 600 * time.Millisecond},
		{Name: "foreign-90-drain", Summary: "another key of the org takes up to 27 points every 0.6 s, what the org holds of them, a sliding log that names when it is full again",
			Limits: foreignFull, Foreign: 0.9 * float64(def.OrgQuota) / def.Window.Seconds(), Greedy: true, Drain: true, ForeignEvery: 600 * time.Millisecond},
		{Name: "foreign-90-late", Summary: "foreign-90-drain with each take of the other key landing up to 6 ms after its tick",
			Limits: foreignFull, Foreign: 0.9 * float64(def.OrgQuota) / def.Window.Seconds(), Greedy: true, Drain: true, ForeignEvery: 600 * time.Millisecond,
			Options: []Option{WithLateForeignLoad(6*time.Millisecond, lateSeed)}},
		{Name: "narrowest-all", Summary: `an enforced "search" policy (20 searches per 60 s), and RateLimit names the narrowest of all the key's levels`,
			Limits: def, Options: []Option{WithNarrowestOfAll(), WithExtraPolicies(ExtraPolicy{
				Name: "search", Quota: 20, Window: time.Minute, Unit: unitRequests, Shape: SlidingLog, Enforced: true,
				Operations: []string{"listContacts", "countContacts"}, Query: "q",
			})}},
		{Name: "contradicted-headers", Summary: `successes say "key";q=0 and "key";r=0;t=0, refusals the truth`,
			Limits: def, Options: []Option{WithContradictedHeaders()}},
		{Name: "two-keys", Summary: "another key of the principal runs the same agents with a client of its own; the principal (400 points/min) binds",
			Limits: twoKeys, Peer: true},
		{Name: "two-keys-log", Summary: "two-keys, with the principal a sliding log whose t names when it is full again",
			Limits: twoKeysLog, Peer: true},
		{Name: "gateway", Summary: "a leaky bucket in front (1 request/s, 5 at once) refuses with a bare 429 and no hint",
			Limits: def, Gateway: gateway, TargetGoodput: 0.90, TargetRefused: 0.05},
	}
}

// ProfileByName returns the profile of Profiles named name.
func ProfileByName(name string) (Profile, bool) {
	ps := Profiles()
	if i := slices.IndexFunc(ps, func(p Profile) bool { return p.Name == name }); i >= 0 {
		return ps[i], true
	}
	return Profile{}, false
}

// New returns a sandbox playing the profile: WithLimits(p.Limits), then
// p.Options, then, when p.Foreign is positive, WithForeignLoad(p.Foreign)
// (WithGreedyForeignLoadEvery or, with Drain, WithDrainingForeignLoadEvery
// when Greedy), then WithGateway(p.Gateway) when its Rate is positive, then
// extra.
func (p Profile) New(extra ...Option) *Server {
	opts := make([]Option, 0, 2+len(p.Options)+len(extra))
	opts = append(opts, WithLimits(p.Limits))
	opts = append(opts, p.Options...)
	switch {
	case p.Foreign > 0 && p.Greedy && p.Drain:
		opts = append(opts, WithDrainingForeignLoadEvery(p.Foreign, p.ForeignEvery))
	case p.Foreign > 0 && p.Greedy:
		opts = append(opts, WithGreedyForeignLoadEvery(p.Foreign, p.ForeignEvery))
	case p.Foreign > 0:
		opts = append(opts, WithForeignLoad(p.Foreign))
	}
	if p.Gateway.Rate > 0 {
		opts = append(opts, WithGateway(p.Gateway))
	}
	return New(append(opts, extra...)...)
}

// Allowance is the points one key (TestKey) may have accepted over a run
// of length d that starts with the server, as the profile's key level
// allows: for a token bucket its capacity plus its quota over d; for a
// fixed window the quota times the windows that start within d; for a
// sliding log or sliding-window counter the quota times ceil(d/window)
// (windows counted as if the server started on a whole second, as it does
// in a synctest bubble). When Foreign is positive it is the lesser of that
// and what the org leaves: for a token-bucket org its capacity plus its
// refill less the foreign load over d, for a window-shaped org the quota
// less the foreign load of a window, times the windows.
func (p Profile) Allowance(d time.Duration) int {
	lim := p.Limits.withDefaults()
	key := lim.keyAllowance(d)
	if p.Foreign > 0 {
		org := float64(lim.OrgQuota)
		if lim.shapeOf(policyOrg) == TokenBucket {
			org += (org/lim.Window.Seconds() - p.Foreign) * d.Seconds()
		} else {
			org = max(org-p.Foreign*lim.Window.Seconds(), 0) * float64(windowsWithin(d, lim.Window))
		}
		key = min(key, max(org, 0))
	}
	return int(math.Floor(key + 1e-6))
}

// AllowanceLeft is what one key may have accepted over a run of d against
// a greedy foreign load (Greedy), which takes what the key leaves and
// leaves what the key takes, so that Allowance, which counts it at its full
// rate, only estimates the run: the lesser of what the key level allows
// over d and what the org let through over d less foreignTaken, the points
// the foreign key took (Server.ForeignTaken).
func (p Profile) AllowanceLeft(d time.Duration, foreignTaken float64) int {
	lim := p.Limits.withDefaults()
	key := lim.keyAllowance(d)
	org := levelAllowance(lim.shapeOf(policyOrg), float64(lim.OrgQuota), float64(lim.OrgQuota), lim.Window, d) - foreignTaken
	return int(math.Floor(max(min(key, org), 0) + 1e-6))
}

// AllowanceBeside is what one key may have accepted over a run of d
// beside a Peer: the lesser of what its key level allows over d and what
// the principal let through over d less peerTaken, the points SecondKey
// had accepted.
func (p Profile) AllowanceBeside(d time.Duration, peerTaken int) int {
	lim := p.Limits.withDefaults()
	q := float64(lim.PrincipalQuota)
	principal := levelAllowance(lim.shapeOf(policyPrincipal), q, q, lim.Window, d) - float64(peerTaken)
	return int(math.Floor(max(min(lim.keyAllowance(d), principal), 0) + 1e-6))
}

// AllowanceAt is the points one key may have accepted over a run of d that
// starts with the server, when its accepted requests cost pointsPerRequest
// on average: Allowance(d), and behind a Gateway the lesser of that and the
// gateway's Allowance(d) in requests at pointsPerRequest each. The gateway
// counts requests and the levels points; a run's own mean cost of an
// accepted request converts the one into the other, so that the share of
// AllowanceAt a client gets is the share of the gateway's requests that
// reached the server and were accepted.
func (p Profile) AllowanceAt(d time.Duration, pointsPerRequest float64) int {
	a := p.Allowance(d)
	if p.Gateway.Rate <= 0 {
		return a
	}
	return min(a, int(math.Floor(float64(p.Gateway.Allowance(d))*pointsPerRequest+1e-6)))
}

// keyAllowance is what the key level of l lets through over a run of d
// that starts with it.
func (l Limits) keyAllowance(d time.Duration) float64 {
	return levelAllowance(l.shapeOf(policyKey), float64(l.KeyQuota), float64(l.KeyCapacity), l.Window, d)
}

// levelAllowance is what a level of the shape lets through over a run of
// d that starts with it.
func levelAllowance(sh Shape, quota, capacity float64, window, d time.Duration) float64 {
	if sh == TokenBucket || sh == "" {
		return capacity + quota*d.Seconds()/window.Seconds()
	}
	return quota * float64(windowsWithin(d, window))
}

// windowsWithin is how many windows of length w start within d of the
// first one's start.
func windowsWithin(d, w time.Duration) int64 { return ceilDiv(d, w) }
