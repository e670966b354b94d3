// Package agents is the mixed workload of many agents sharing one API key:
// the goodput benchmark and the comparison with other clients
// (internal/compare) run it; examples/agents runs the same mix with only
// the public API. Agents call an API: SDK over
// *bodo.Client, or Raw over the generated client.
package agents

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go"
)

// Mix is the share of each kind of call in the workload, chosen so that the
// key's points bind before its write, delete and egress levels: about 4
// points a call, 40 % writes, 4 % deletes and 1.4 records a call.
var Mix = []struct {
	Kind   string
	Weight float64
}{
	{"get", 0.30},
	{"list", 0.10},
	{"search", 0.10},
	{"count", 0.10},
	{"create", 0.12},
	{"update", 0.08},
	{"delete", 0.04},
	{"invoice", 0.08},
	{"pay", 0.08},
}

// Agent is one agent: it makes its own contacts and invoices, with names
// unique per agent and sequence, and works on them.
type Agent struct {
	ID       int
	api      API
	rng      *rand.Rand
	seq      int
	contacts []string
	open     []string
}

// NewAgent makes agent id on api; seed makes its choices repeatable.
func NewAgent(id int, api API, seed uint64) *Agent {
	return &Agent{ID: id, api: api, rng: rand.New(rand.NewPCG(seed, uint64(id)))}
}

func (a *Agent) pick() string {
	x := a.rng.Float64()
	for _, m := range Mix {
		if x < m.Weight {
			return m.Kind
		}
		x -= m.Weight
	}
	return Mix[0].Kind
}

// Step makes one call of the mix and returns its kind and error.
func (a *Agent) Step(ctx context.Context) (string, error) {
	kind := a.pick()
	if len(a.contacts) == 0 && (kind == "get" || kind == "update" || kind == "delete" || kind == "invoice") {
		kind = "create"
	}
	if kind == "pay" && len(a.open) == 0 {
		kind = "invoice"
		if len(a.contacts) == 0 {
			kind = "create"
		}
	}
	c := a.api
	switch kind {
	case "get":
		_, err := c.GetContact(ctx, a.contacts[a.rng.IntN(len(a.contacts))])
		return kind, err
	case "list":
		_, err := c.ListContacts(ctx, &bodo.ListContactsParams{Limit: bodo.Int(5)})
		return kind, err
	case "search":
		_, err := c.ListContacts(ctx, &bodo.ListContactsParams{Limit: bodo.Int(5), Q: bodo.String(fmt.Sprintf("agent-%02d", a.ID))})
		return kind, err
	case "count":
		_, err := c.CountContacts(ctx, nil)
		return kind, err
	case "create":
		a.seq++
		ct, err := c.CreateContact(ctx, bodo.ContactCreate{
			Name:  fmt.Sprintf("agent-%02d-%06d", a.ID, a.seq),
			Email: bodo.String(fmt.Sprintf("agent%02d.%06d@example.com", a.ID, a.seq)),
		})
		if err == nil {
			a.contacts = append(a.contacts, ct.ID)
		}
		return kind, err
	case "update":
		_, err := c.UpdateContact(ctx, a.contacts[a.rng.IntN(len(a.contacts))], bodo.ContactUpdate{Phone: bodo.Value(fmt.Sprintf("+49 30 %06d", a.rng.IntN(1e6)))})
		return kind, err
	case "delete":
		i := a.rng.IntN(len(a.contacts))
		err := c.DeleteContact(ctx, a.contacts[i])
		if err == nil || errors.Is(err, bodo.ErrNotFound) {
			a.contacts = append(a.contacts[:i], a.contacts[i+1:]...)
		}
		return kind, err
	case "invoice":
		inv, err := c.CreateInvoice(ctx, bodo.InvoiceCreate{
			ContactID: a.contacts[a.rng.IntN(len(a.contacts))], Amount: int64(100 + a.rng.IntN(100000)), Currency: "EUR",
			Status: bodo.Value(bodo.InvoiceStatusOpen),
		})
		if err == nil {
			a.open = append(a.open, inv.ID)
		}
		return kind, err
	default: // pay
		id := a.open[len(a.open)-1]
		_, err := c.PayInvoice(ctx, id)
		if err == nil || errors.Is(err, bodo.ErrInvalidState) || errors.Is(err, bodo.ErrNotFound) {
			a.open = a.open[:len(a.open)-1]
		}
		return kind, err
	}
}

// Run runs n agents on client until ctx ends and records every call in
// stats: RunAPI over SDK{client}.
func Run(ctx context.Context, n int, client *bodo.Client, stats *Stats, seed uint64) {
	RunAPI(ctx, n, SDK{Client: client}, stats, seed)
}

// RunAPI runs n agents on api until ctx ends and records every call in
// stats. An agent whose call was refused locally, or refused with a retry
// hint, waits what the error says (at least a second) before its next call,
// as a well-behaved program does (see Pause).
func RunAPI(ctx context.Context, n int, api API, stats *Stats, seed uint64) {
	var wg sync.WaitGroup
	for id := range n {
		wg.Go(func() {
			a := NewAgent(id, api, seed)
			for ctx.Err() == nil {
				start := time.Now()
				kind, err := a.Step(ctx)
				if err != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) {
					return // the run ends: the call's turn was past its end
				}
				stats.call(kind, time.Since(start), err)
				if d, ok := Pause(err); ok {
					t := time.NewTimer(d)
					select {
					case <-t.C:
					case <-ctx.Done():
					}
					t.Stop()
				}
			}
		})
	}
	wg.Wait()
}

// Pause reports whether an agent pauses after a call that failed with err,
// and for how long: after a *bodo.Error that was refused locally or carries
// a RetryAfter, or a *StatusError that carries one, it waits that long, at
// least a second.
func Pause(err error) (time.Duration, bool) {
	var apiErr *bodo.Error
	if errors.As(err, &apiErr) && (apiErr.Local || apiErr.RetryAfter > 0) {
		return max(apiErr.RetryAfter, time.Second), true
	}
	var st *StatusError
	if errors.As(err, &st) && st.RetryAfter > 0 {
		return max(st.RetryAfter, time.Second), true
	}
	return 0, false
}
