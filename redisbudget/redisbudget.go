// Package redisbudget shares a bodo-go client's budget through Redis, so
// that agents in many processes and on many machines that use one API key
// keep to one budget:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	client, err := bodo.NewClient(bodo.WithSharedBudget(redisbudget.New(rdb)))
//
// Each level (what it holds, its pace, and for a level of the key alone
// the log of every process's takes), the calls in flight (as leases that
// expire when a process dies), the lockout guard's refusals, the adaptive
// cap and pace, exhausted quotas and lockouts live in Redis and change only
// inside Lua scripts that use Redis TIME as their clock. Keys are namespaced per host
// and a hash of the API key, never the key itself. When Redis cannot be
// reached each process falls back to its share of the key (by the number
// of processes Redis counted) and rejoins when Redis is back; what Redis
// did not get meanwhile is sent then.
//
// Redis must keep these keys. Each expires a day after its last use, so
// when memory runs short a maxmemory-policy of volatile-* or allkeys-* may
// evict them (the LRU and LFU policies take colder keys first, the random
// ones any). Redis then forgets calls in flight while no process sees an
// outage, and admits more until the next renewals count them again.
// noeviction, Redis's default, or a Redis of the budget's own keeps them.
package redisbudget

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix starts every key the budget writes.
const DefaultPrefix = "bodo:budget:"

// Budget is a budgetstore.Store on Redis. Make it with New.
type Budget struct {
	rdb      redis.Scripter
	prefix   string
	leaseTTL time.Duration
}

var _ budgetstore.Store = (*Budget)(nil)

// Option configures a Budget.
type Option func(*Budget)

// WithPrefix sets the prefix of the budget's keys (default DefaultPrefix).
func WithPrefix(prefix string) Option { return func(b *Budget) { b.prefix = prefix } }

// WithLeaseTTL sets how long a call's slot in flight is held without news
// from its process before Redis frees it, overriding the client's default
// (30 s): the time within which a crashed process's slots come back. The
// client renews the leases of calls still running every third of it (and
// at least every 500 ms), so a call may last longer. A d under minLeaseTTL
// counts as minLeaseTTL: a shorter lease could lapse between renewals
// while its call runs. A d over maxLeaseTTL counts as maxLeaseTTL, as does
// a longer lease the client asks for.
func WithLeaseTTL(d time.Duration) Option {
	return func(b *Budget) {
		if d > 0 {
			d = max(d, minLeaseTTL)
		}
		b.leaseTTL = d
	}
}

// minLeaseTTL is the shortest lease WithLeaseTTL sets; maxLeaseTTL is the
// longest lease, a day, as long as the lease's amounts live in Redis
// unused (keep in the scripts): a lease that outlived them would leave
// what it took counted in flight for good.
const (
	minLeaseTTL = time.Second
	maxLeaseTTL = 24 * time.Hour
)

// leaseTTLOf is the lease time of a call: the client's (asked), unless
// WithLeaseTTL set one, at most maxLeaseTTL.
func (b *Budget) leaseTTLOf(asked time.Duration) time.Duration {
	if b.leaseTTL > 0 {
		asked = b.leaseTTL
	}
	return min(asked, maxLeaseTTL)
}

// New returns a budget stored through rdb: a *redis.Client, a
// *redis.ClusterClient or a *redis.Ring.
func New(rdb redis.Scripter, opts ...Option) *Budget {
	b := &Budget{rdb: rdb, prefix: DefaultPrefix}
	for _, o := range opts {
		o(b)
	}
	return b
}

func (b *Budget) keys(key string) []string { return []string{b.prefix + "{" + key + "}"} }

// run runs script on the key's slot and returns its reply, or ctx's error
// as soon as ctx ends: go-redis waits for a reply until its ReadTimeout,
// retries included (5 s with the defaults against a Redis that stopped,
// for good with none), unless the client was made with
// ContextTimeoutEnabled, and no call may wait on Redis past the deadline
// the budget gives. A script cut off so may still have run: the budget
// takes that for a failed request, as it takes a timeout.
func (b *Budget) run(ctx context.Context, script *redis.Script, key string, args []any) *redis.Cmd {
	done := make(chan *redis.Cmd, 1)
	go func() { done <- script.Run(ctx, b.rdb, b.keys(key), args...) }()
	select {
	case cmd := <-done:
		return cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(context.Cause(ctx))
		return cmd
	}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func levelArgs(args []any, levels []budgetstore.Level) []any {
	args = append(args, len(levels))
	for _, l := range levels {
		args = append(args, l.Name, num(l.Amount), num(l.Rate), num(l.Size), num(l.Pace), num(l.Burst),
			num(l.Quota), ms(l.Window), ms(l.Reset), ms(l.Hold), num(l.Taken), ms(l.Ago), flag(l.Steps))
	}
	return args
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Acquire implements budgetstore.Store.
func (b *Budget) Acquire(ctx context.Context, key string, req budgetstore.Acquire) (budgetstore.Grant, error) {
	unbudgeted := 0
	if req.Unbudgeted {
		unbudgeted = 1
	}
	ttl := b.leaseTTLOf(req.LeaseTTL)
	args := []any{req.Lease, ms(ttl), num(req.Cost), num(req.KeyRate), req.MaxInFlight,
		req.RefusalLimit, ms(req.RefusalWindow), unbudgeted, req.Process, ms(req.ProcessTTL)}
	args = reservationArgs(args, req.Reservation)
	args = levelArgs(args, req.Levels)
	res, err := b.run(ctx, acquireScript, key, args).Slice()
	if err != nil {
		return budgetstore.Grant{}, fmt.Errorf("redisbudget: acquire: %w", err)
	}
	if len(res) != 10 {
		return budgetstore.Grant{}, fmt.Errorf("redisbudget: acquire: unexpected answer %v", res)
	}
	admitted, _ := res[0].(int64)
	wait, _ := res[1].(int64)
	reason, _ := res[2].(string)
	g := budgetstore.Grant{Admitted: admitted == 1, Wait: millis(min(wait, int64(time.Hour/time.Millisecond))), Reason: reason,
		LeaseTTL: millis(res[5]), Members: members(res[6], res[7])}
	refusal, _ := res[8].(int64)
	g.Refusal = refusal == 1
	g.Levels = heldLevels(res[9])
	if reason == "quota" {
		g.Policy, _ = res[3].(string)
		left, _ := res[4].(int64)
		g.Until = time.Now().Add(millis(left))
	}
	return g, nil
}

// heldLevels reads the held list of a script's answer: a level's name, then
// what it holds, for each level taken from.
func heldLevels(v any) []budgetstore.Level {
	list, _ := v.([]any)
	var out []budgetstore.Level
	for i := 0; i+1 < len(list); i += 2 {
		name, _ := list[i].(string)
		s, _ := list[i+1].(string)
		if f, err := strconv.ParseFloat(s, 64); err == nil && name != "" {
			out = append(out, budgetstore.Level{Name: name, Amount: f})
		}
	}
	return out
}

// millis reads a number of milliseconds of a script's answer.
func millis(v any) time.Duration {
	n, _ := v.(int64)
	return time.Duration(min(max(n, 0), maxMillis)) * time.Millisecond
}

// maxMillis bounds what millis reads: no wait, lease or reset the store
// keeps is longer than a day, and a damaged key says nothing longer.
const maxMillis = int64(24 * time.Hour / time.Millisecond)

func members(n, rank any) budgetstore.Members {
	m := budgetstore.Members{}
	if v, ok := n.(int64); ok {
		m.Processes = int(v)
	}
	if v, ok := rank.(int64); ok {
		m.Rank = int(v)
	}
	return m
}

// Renew implements budgetstore.Store.
func (b *Budget) Renew(ctx context.Context, key string, req budgetstore.Renew) (budgetstore.Members, error) {
	ttl := b.leaseTTLOf(req.LeaseTTL)
	args := make([]any, 0, 7+len(req.Leases))
	args = append(args, req.Process, ms(req.ProcessTTL), ms(ttl))
	args = reservationArgs(args, req.Reservation)
	for _, l := range req.Leases {
		args = append(args, l)
	}
	res, err := b.run(ctx, renewScript, key, args).Slice()
	if err != nil {
		return budgetstore.Members{}, fmt.Errorf("redisbudget: renew: %w", err)
	}
	if len(res) != 2 {
		return budgetstore.Members{}, fmt.Errorf("redisbudget: renew: unexpected answer %v", res)
	}
	return members(res[0], res[1]), nil
}

// Release implements budgetstore.Store.
func (b *Budget) Release(ctx context.Context, key string, rel budgetstore.Release) error {
	flag := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	now := time.Now()
	var pause, block int64
	if !rel.PausedUntil.IsZero() {
		pause = max(ms(rel.PausedUntil.Sub(now)), 0)
	}
	if rel.Block != "" {
		block = max(ms(rel.BlockUntil.Sub(now)), 0)
	}
	factor := rel.CutFactor
	if factor <= 0 || factor >= 1 {
		factor = 0.5
	}
	args := []any{rel.Lease, flag(rel.Refused), flag(rel.Cut), ms(rel.RefusalWindow), rel.MaxInFlight, pause, rel.Block, block, num(factor),
		max(ms(rel.RefusedAgo), 0), max(ms(rel.Linger), 0), rel.Process}
	args = reservationArgs(args, rel.Reservation)
	args = levelArgs(args, rel.Refund)
	args = levelArgs(args, rel.Left)
	args = levelArgs(args, rel.Owe)
	if err := b.run(ctx, releaseScript, key, args).Err(); err != nil {
		return fmt.Errorf("redisbudget: release: %w", err)
	}
	return nil
}

// reservationArgs appends r's slots, calls, seq and ttl ms; a seq above
// 2^53, which Lua's numbers no longer hold exactly, counts as 2^53.
func reservationArgs(args []any, r budgetstore.Reservation) []any {
	return append(args, max(r.Slots, 0), max(r.Calls, 0), min(r.Seq, 1<<53), max(ms(r.TTL), 0))
}

// Refund implements budgetstore.Store.
func (b *Budget) Refund(ctx context.Context, key string, levels []budgetstore.Level) error {
	args := levelArgs(nil, levels)
	for _, l := range levels {
		args = append(args, l.ID)
	}
	if err := b.run(ctx, refundScript, key, args).Err(); err != nil {
		return fmt.Errorf("redisbudget: refund: %w", err)
	}
	return nil
}
