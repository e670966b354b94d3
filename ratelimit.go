package bodo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// WaitEvent describes a call that waited for the budget, for WithOnWait, or
// one the budget held or refused and never sent.
type WaitEvent struct {
	Operation string        // operationId
	Class     string        // x-bodo-class
	Host      string        // the host of the client's base URL, with its port if it names one
	Wait      time.Duration // how long it waited for the budget
	// Reason is what held it last: a level's name, "in-flight" (the
	// adaptive cap on calls in flight), "pace" (the adaptive pacing),
	// "server-wait" (a wait the server asked of every call of the key),
	// "refusal-guard", "lockout" or "shared-store". For a call refused
	// without a wait it is the level or policy that refused it.
	Reason string
	// Err is nil when the budget let the attempt go after Wait. Otherwise
	// the budget did not let it go, and it was not sent: the call's
	// context ended while held, the wait the server asked for is longer
	// than MaxRetryWait, a quota is exhausted or the call can never fit.
	// Err is the *Error the call returns.
	Err error

	ctx context.Context
}

// Context returns the context of the call that waited: it carries what the
// caller put there, such as the span of a trace the call belongs to.
func (e WaitEvent) Context() context.Context {
	if e.ctx == nil {
		return context.Background()
	}
	return e.ctx
}

// admit lets one attempt of cl go, or says why it cannot: see
// budget.State.Admit. Its errors are *Error values. The WaitEvent says how
// long the attempt waited and what held it; its Reason is "" when the
// budget neither held nor refused it.
func (c *Client) admit(ctx context.Context, cl *call) (*budget.Ticket, WaitEvent, error) {
	ev := WaitEvent{Operation: cl.op.ID, Class: string(cl.op.Class), Host: c.host, ctx: ctx}
	if cl.settings.statusPoll {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, statusAdmitWithin)
		defer cancel()
	}
	start := time.Now()
	t, admitted, err := c.state.Admit(ctx, &cl.bc)
	if err != nil {
		ev.Wait = time.Since(start)
		ev.Reason, ev.Err = budgetError(cl, err)
		return nil, ev, ev.Err
	}
	ev.Wait, ev.Reason = admitted.Wait, admitted.Reason
	return t, ev, nil
}

// heldBy hears of a call the budget holds (once per call, and again when
// the level that holds it is due a status): when the level that holds it
// has not been named by the server for budget.StaleAfter, or for a few
// seconds while no other call of the key left, the client asks the server
// for the key's status in the background, so that a
// model built on an old word (or on the documented numbers alone) is put
// right before the calls behind it wait on it too. The channel closes when
// the answer is in.
func (c *Client) heldBy(reason string) <-chan struct{} {
	if !c.budgeted {
		return nil
	}
	done, start := c.state.StatusFor(reason, time.Now())
	if start {
		go func() {
			sent := true
			defer func() { c.state.StatusDone(sent) }()
			defer func() {
				// A transport, middleware or callback of the caller's that
				// panics on the status request, which the client sent of
				// its own, is no caller's to recover: it is logged, and the
				// request counts as sent.
				if p := recover(); p != nil {
					c.ownPanicked("status", p)
				}
			}()
			sent = c.pollStatus()
		}()
	}
	return done
}

// ownPanicked logs at ERROR a panic of the client's own request (what:
// status, identity), which no caller's recover sees; a logger that panics
// too is not heard.
func (c *Client) ownPanicked(what string, p any) {
	defer func() { _ = recover() }()
	c.logger.Error("bodo: the "+what+" request panicked", slog.String("host", c.host), slog.Any("panic", p))
}

// slowWait hears of a call that has waited budget.SlowAfter for the budget
// and is still held (once per call): it logs it, and asks for the status as
// heldBy does, the level's word being older by now.
func (c *Client) slowWait(ctx context.Context, sw budget.SlowWait) {
	c.heldBy(sw.Reason)
	c.logSlowWait(ctx, sw)
}

const (
	// statusPollTimeout bounds the client's own status request.
	statusPollTimeout = 30 * time.Second
	// statusAdmitWithin bounds its wait for the budget, so that it leaves
	// with most of statusPollTimeout: one cut off in flight may have been
	// answered with a wait that then never reaches the client. Held
	// longer, by a level the server has just named, it is not sent: that
	// level holds the calls anyway.
	statusAdmitWithin = 5 * time.Second
)

// pollStatus asks GET /v1/rate_limit (1 point) what is left of every level,
// once, without retries; do hands the answer to the budget. It reports
// whether the request was sent (false: the budget did not let it out, as
// when it would have held it past statusAdmitWithin). It passes the pace and the levels whose
// word is old, since the point is to learn whether a level the budget
// believes exhausted is, but not a lockout, a wait the server asked for,
// the guard or the slots in flight.
func (c *Client) pollStatus() bool {
	ctx, cancel := context.WithTimeout(context.Background(), statusPollTimeout)
	defer cancel()
	_, err := c.RateLimit(ctx, WithMaxRetries(0), requestOption(func(s *callSettings) error {
		s.statusPoll, s.own = true, true
		return nil
	}))
	var apiErr *Error
	return !errors.As(err, &apiErr) || !apiErr.Local
}

// logSlowWait logs a call that has waited budget.SlowAfter for the budget
// and is still held.
func (c *Client) logSlowWait(ctx context.Context, sw budget.SlowWait) {
	if !c.logger.Enabled(ctx, slog.LevelInfo) {
		return
	}
	class := ""
	if op, ok := ops.ByID(sw.Op); ok {
		class = string(op.Class)
	}
	attrs := []slog.Attr{
		slog.String("host", c.host),
		slog.String("operation", sw.Op),
		slog.String("class", class),
		slog.String("held_by", sw.Reason),
		slog.Duration("waited", sw.Waited.Round(time.Millisecond)),
	}
	if sw.Remaining >= 0 {
		attrs = append(attrs, slog.Duration("expected_remaining", sw.Remaining.Round(time.Millisecond)))
	}
	attrs = append(attrs, slog.Int("queued_behind", sw.Behind))
	c.logger.LogAttrs(ctx, slog.LevelInfo, "bodo: waiting for the budget", attrs...)
}

// budgetError names what held or refused the call and turns the budget's
// refusal into the *Error the caller sees; the name is "" for a call whose context
// ended before anything held it.
func budgetError(cl *call, err error) (string, error) {
	var (
		held      *budget.HoldError
		never     *budget.NeverFitsError
		exhausted *budget.ExhaustedError
		panicked  *budget.PanicError
	)
	switch {
	case errors.As(err, &held) && errors.Is(held.Err, budget.ErrHoldTooLong):
		e := heldError(cl, held.Reason, held.Wait)
		e.Detail += fmt.Sprintf("; the wait, %v, is longer than MaxRetryWait (%v), so the call was not sent", held.Wait.Round(time.Millisecond), cl.settings.maxRetryWait)
		return held.Reason, e
	case errors.As(err, &held) && held.Reason == "":
		// The context ended before anything held the call: no limit of
		// the key's was in the way.
		return "", &Error{Operation: cl.op.ID, Title: "Not sent", Detail: "the context ended before the call was sent: " + held.Err.Error(), Local: true, Request: redactedRequest(cl.req), cause: held.Err}
	case errors.As(err, &held):
		return held.Reason, fmt.Errorf("%w: %w", heldError(cl, held.Reason, held.Wait), held.Err)
	case errors.As(err, &never):
		return never.Level, &Error{
			Operation: cl.op.ID,
			Status:    http.StatusTooManyRequests,
			Title:     "Can never fit",
			Detail:    fmt.Sprintf("the call needs %g %s of the %s level, which holds at most %g", never.Amount, never.Unit, never.Level, never.Size),
			Policy:    never.Level,
			Local:     true,
			permanent: true,
			Request:   redactedRequest(cl.req),
		}
	case errors.As(err, &panicked):
		// The shared store, the logger or the status request panicked:
		// this call is not sent, the key's other calls go on.
		reason, title := "", "Budget failed"
		if panicked.Where == budget.PanicStore {
			reason, title = budget.ReasonStore, "Shared budget failed"
		}
		return reason, &Error{Operation: cl.op.ID, Title: title, Detail: err.Error(), Local: true, Request: redactedRequest(cl.req), cause: err}
	case errors.As(err, &exhausted):
		now := time.Now()
		return cmp.Or(exhausted.Policy, "quota"), &Error{
			Operation:  cl.op.ID,
			Status:     http.StatusTooManyRequests,
			Code:       CodeQuotaExhausted,
			Title:      "Quota exhausted",
			Detail:     fmt.Sprintf("the %q quota is used up until %s; the client does not send calls that would hit it", exhausted.Policy, exhausted.Until.UTC().Format(time.RFC3339)),
			Policy:     exhausted.Policy,
			ResetsAt:   exhausted.Until,
			RetryAfter: exhausted.Until.Sub(now),
			Local:      true,
			Request:    redactedRequest(cl.req),
		}
	}
	return "", &Error{Operation: cl.op.ID, Title: "Held by the client", Detail: err.Error(), Local: true, Request: redactedRequest(cl.req), cause: err}
}

func heldError(cl *call, why string, wait time.Duration) *Error {
	detail := fmt.Sprintf("held by %s", why)
	switch why {
	case budget.ReasonGuard:
		detail = fmt.Sprintf("the key had %d refusals in the last %v; the client holds its calls until the window clears, so the server does not lock the key", budget.RefusalLimit, budget.RefusalWindow)
	case budget.ReasonLockout:
		detail = "the key is locked out; the client sends nothing until the lockout ends"
	case budget.ReasonServer:
		detail = "the server asked every call of the key to wait; the client sends nothing before the wait is over"
	}
	e := &Error{
		Operation: cl.op.ID,
		Status:    http.StatusTooManyRequests,
		Code:      CodeRateLimited,
		Title:     "Held by the client",
		Detail:    detail,
		Policy:    why,
		Local:     true,
		Request:   redactedRequest(cl.req),
	}
	if wait > 0 && wait < time.Duration(1<<62) {
		e.RetryAfter = wait
	}
	return e
}

// answerOf is what the budget learns from an answer: its status, headers
// and, for a non-2xx one, the problem.
func answerOf(resp *http.Response, apiErr *Error) budget.Answer {
	a := budget.Answer{Status: resp.StatusCode, Header: resp.Header}
	if apiErr != nil {
		a.Problem = &budget.Problem{
			Code:       apiErr.Code,
			Policy:     apiErr.Policy,
			RetryAfter: apiErr.RetryAfter,
			Hinted:     apiErr.hinted,
			ResetsAt:   apiErr.ResetsAt,
		}
	}
	return a
}

// Budget is the client's local view of its key's budget: no call is made.
// Use Client.RateLimit for the server's own view.
type Budget struct {
	Levels      []BudgetLevel // in the order RateLimit lists them
	InFlight    int           // budgeted calls of this key in flight in this process
	InFlightCap int           // the adaptive cap on them
	Pace        float64       // the share of the key's rate the client allows itself now (1 = all; behind a limiter that gave no hint, of the rate of requests fixed at its first refusal, shown at most 1)
	Cuts        int           // how often RATE_LIMITED or OVERLOADED cut cap and pace
	Waiting     int           // calls waiting for the budget now
	Waits       int64         // calls that waited so far
	Waited      time.Duration // how long they waited, in all
	// Refusals counts the 429 answers of the last 60 s, and the attempts
	// of that time that got no answer (a lost answer may have been a 429
	// the server counts against the lockout): the guard holds every call
	// while they reach half the lockout's 50.
	Refusals    int
	PausedUntil time.Time // the end of a lockout, or of a wait the server asked of every call, if any
}

// BudgetLevel is the client's model of one server level: a documented one,
// or a policy the server announced in RateLimit-Policy or named in a
// refusal. Budget lists the levels in the order RateLimit does (key, write,
// parallel, principal, org, delete, delete-day, egress, then the server's
// own policies); Name, Unit, Quota, Window and Capacity mean what they mean
// in RateLimitPolicy. Remaining and FullIn are the model's: what it lets
// calls take now, counting the calls sent since the server last spoke, and
// when the level is full again (see FullIn). The Reported fields are the
// server's last word on the level, as it said it; before the server has
// named a level, the model is the contract's.
type BudgetLevel struct {
	Name   string
	Unit   string  // points, requests, records or concurrent-requests
	Quota  int     // what the level grants per Window, for every key it counts (org: the whole organisation)
	Share  float64 // the part of Quota this key may take (org: 0.5), split among the keys of this process that share the level, and while a shared store is down, this process's part
	Window time.Duration
	// Capacity is what the level holds when full: the contract's size
	// until the server shows another (the key level's 600 points).
	Capacity  int
	Remaining float64 // what the model lets calls take now (may be negative after a refusal)
	// FullIn is how long until the level is full again and no refusal's
	// wait holds it, as the level's refill and this key's takes tell; for
	// a level other keys may take from too (principal, org, a policy the
	// client learned), not before the t of the server's last word on it
	// (unless that t is longer than the window), since what they take the
	// client cannot tell. 0 when the level is full, or never will be.
	FullIn time.Duration
	// ReportedRemaining and ReportedReset are r and t of the last
	// RateLimit field (or GET /v1/rate_limit answer) that named the level,
	// at ReportedAt; a zero ReportedAt means none has yet. parallel has
	// none: its Remaining is the slots this key's calls leave, and what the
	// server says of it sets its Quota.
	ReportedRemaining float64
	ReportedReset     time.Duration
	ReportedAt        time.Time
	HeldUntil         time.Time // a refusal's wait: calls that take from the level wait until then
	Waiting           int       // calls waiting for this level now
	// Scope says which calls the level holds. "" for a documented level
	// (the calls the API documents it for). For a policy the client did not
	// know: "none" while the server has only announced it (it is
	// informative and holds no call), else the comma-separated kinds of call
	// the server tied it to, each an operationId and a cost such as
	// "listContacts@7" (answers that show the policy going down, or a
	// refusal), or "partition PK of METHOD PATH" for one partition of a
	// policy with a pk.
	Scope string
}

// Budget returns the local view of the key's budget, shared by every Client
// of this process that uses the same key on the same host.
func (c *Client) Budget() Budget {
	if !c.made() {
		return Budget{}
	}
	snap := c.state.Snapshot()
	b := Budget{
		InFlight:    snap.InFlight,
		InFlightCap: snap.InFlightCap,
		Pace:        snap.Pace,
		Cuts:        snap.Cuts,
		Waiting:     snap.Waiting,
		Waits:       snap.Waits,
		Waited:      snap.Waited,
		Refusals:    snap.Refusals,
		PausedUntil: snap.PausedUntil,
	}
	b.Levels = make([]BudgetLevel, len(snap.Levels))
	for i, l := range snap.Levels {
		b.Levels[i] = BudgetLevel(l)
	}
	return b
}
