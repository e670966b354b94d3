package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go"
)

// mix is the share of each kind of call, chosen so that the key's points
// bind before its write, delete and egress levels: about 4 points a call,
// 40 % writes and 4 % deletes. points is the call's cost as the API
// documents it ("Operations and their cost"); a search is a list with q.
var mix = []struct {
	kind   string
	weight float64
	points int
}{
	{"get", 0.30, 1},
	{"list", 0.10, 2},
	{"search", 0.10, 7},
	{"count", 0.10, 2},
	{"create", 0.12, 5},
	{"update", 0.08, 5},
	{"delete", 0.04, 10},
	{"invoice", 0.08, 5},
	{"pay", 0.08, 10},
}

// cost returns the points a call of kind costs.
func cost(kind string) int {
	for _, m := range mix {
		if m.kind == kind {
			return m.points
		}
	}
	return 0
}

// agent is one agent: it makes its own contacts, with a name unique per
// agent and sequence, and its own invoices, and works on them.
type agent struct {
	id       int
	client   *bodo.Client
	rng      *rand.Rand
	seq      int
	contacts []string // ids of its contacts
	open     []string // ids of its open invoices
}

// next picks the kind of the next call: one of the mix, or the create or
// invoice that must come before a call that needs a contact or an invoice.
func (a *agent) next() string {
	x := a.rng.Float64()
	kind := mix[0].kind
	for _, m := range mix {
		if x < m.weight {
			kind = m.kind
			break
		}
		x -= m.weight
	}
	if kind == "pay" && len(a.open) == 0 {
		kind = "invoice"
	}
	switch kind {
	case "get", "update", "delete", "invoice":
		if len(a.contacts) == 0 {
			kind = "create"
		}
	}
	return kind
}

// step makes one call and returns its kind.
func (a *agent) step(ctx context.Context) (string, error) {
	kind := a.next()
	c := a.client
	var err error
	switch kind {
	case "get":
		_, err = c.Contacts.Get(ctx, a.someContact())
	case "list":
		_, err = c.Contacts.List(ctx, &bodo.ListContactsParams{Limit: bodo.Int(5)})
	case "search":
		_, err = c.Contacts.List(ctx, &bodo.ListContactsParams{Limit: bodo.Int(5), Q: bodo.String(fmt.Sprintf("agent-%02d", a.id))})
	case "count":
		_, err = c.Contacts.Count(ctx, nil)
	case "create":
		a.seq++
		var ct *bodo.Contact
		ct, err = c.Contacts.Create(ctx, bodo.ContactCreate{
			Name:  fmt.Sprintf("agent-%02d-%06d", a.id, a.seq),
			Email: bodo.String(fmt.Sprintf("agent%02d.%06d@example.com", a.id, a.seq)),
		})
		if err == nil {
			a.contacts = append(a.contacts, ct.ID)
		}
	case "update":
		_, err = c.Contacts.Update(ctx, a.someContact(), bodo.ContactUpdate{Phone: bodo.String(fmt.Sprintf("+49 30 %06d", a.rng.IntN(1e6)))})
	case "delete":
		i := a.rng.IntN(len(a.contacts))
		err = c.Contacts.Delete(ctx, a.contacts[i])
		if err == nil || errors.Is(err, bodo.ErrNotFound) {
			a.contacts = append(a.contacts[:i], a.contacts[i+1:]...)
		}
	case "invoice":
		var inv *bodo.Invoice
		inv, err = c.Invoices.Create(ctx, bodo.InvoiceCreate{
			ContactID: a.someContact(), Amount: int64(100 + a.rng.IntN(100000)), Currency: "EUR",
			Status: bodo.Value(bodo.InvoiceStatusOpen),
		})
		if err == nil {
			a.open = append(a.open, inv.ID)
		}
	case "pay":
		last := len(a.open) - 1
		_, err = c.Invoices.Pay(ctx, a.open[last])
		if err == nil || errors.Is(err, bodo.ErrInvalidState) || errors.Is(err, bodo.ErrNotFound) {
			a.open = a.open[:last]
		}
	}
	return kind, err
}

func (a *agent) someContact() string { return a.contacts[a.rng.IntN(len(a.contacts))] }

// runAgents runs n agents on client until ctx ends and records every call
// in rec. An agent whose call was refused locally, or refused with a wait,
// waits that long (at least a second) before its next call, as a
// well-behaved program does.
func runAgents(ctx context.Context, n int, seed uint64, client *bodo.Client, rec *recorder) {
	var wg sync.WaitGroup
	for id := range n {
		wg.Go(func() {
			a := &agent{id: id, client: client, rng: rand.New(rand.NewPCG(seed, uint64(id)))}
			for ctx.Err() == nil {
				start := time.Now()
				kind, err := a.step(ctx)
				if err != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) {
					return // the call's turn came after the end of the run: it does not count
				}
				rec.called(kind, time.Since(start), err)
				var e *bodo.Error
				if errors.As(err, &e) && (e.Local || e.RetryAfter > 0) {
					pause(ctx, max(e.RetryAfter, time.Second))
				}
			}
		})
	}
	wg.Wait()
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
