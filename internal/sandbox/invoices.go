package sandbox

import (
	"net/http"
	"regexp"
	"slices"
	"time"
)

// The invoice states.
const (
	statusDraft    = "draft"
	statusOpen     = "open"
	statusPaid     = "paid"
	statusRefunded = "refunded"
	statusVoid     = "void"
)

var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)

type invoice struct {
	id, contactID    string
	amount, refunded int64
	currency, status string
	created, updated time.Time
}

type invoiceJSON struct {
	ID             string `json:"id"`
	ContactID      string `json:"contactId"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	AmountRefunded int64  `json:"amountRefunded"`
	CreatedAt      string `json:"createdAt"`
	UpdatedAt      string `json:"updatedAt"`
}

func (in *invoice) view() invoiceJSON {
	return invoiceJSON{ID: in.id, ContactID: in.contactID, Amount: in.amount, Currency: in.currency, Status: in.status,
		AmountRefunded: in.refunded, CreatedAt: timestamp(in.created), UpdatedAt: timestamp(in.updated)}
}

func (s *Server) listInvoices(c *call, _ *http.Request) answer {
	limit, after, bad := pageStart(c, "inv_")
	if bad != nil {
		return *bad
	}
	status := c.query.Get("status")
	if status != "" && !slices.Contains([]string{statusDraft, statusOpen, statusPaid, statusRefunded, statusVoid}, status) {
		return c.badRequest(msg{"status muss draft, open, paid, refunded oder void sein.", "status must be draft, open, paid, refunded or void."})
	}
	items, last, more := page(s.invoiceIDs, after, limit, func(id string) (invoiceJSON, bool) {
		in := s.invoices[id]
		if in == nil || status != "" && in.status != status {
			return invoiceJSON{}, false
		}
		return in.view(), true
	})
	return listAnswer(items, encodeCursor(last), more)
}

func (s *Server) getInvoice(c *call, r *http.Request) answer {
	in := s.invoices[r.PathValue("id")]
	if in == nil {
		return c.notFound()
	}
	return resourceAnswer(c, in.view())
}

func (s *Server) createInvoice(c *call, _ *http.Request) answer {
	f, bad := parseObject(c, false)
	if bad != nil {
		return *bad
	}
	var v validator
	contactID, _ := v.text(f, "contactId", 100)
	switch {
	case !hasValue(f, "contactId"):
		v.add("contactId", msgRequired)
	case contactID != nil && s.contacts[*contactID] == nil:
		v.add("contactId", msg{"diesen Kontakt gibt es nicht", "there is no such contact"})
	}
	amount, set := v.integer(f, "amount")
	switch {
	case !hasValue(f, "amount"):
		v.add("amount", msgRequired)
	case set && amount < 1:
		v.add("amount", msgPositive)
	}
	currency, _ := v.text(f, "currency", 100)
	switch {
	case !hasValue(f, "currency"):
		v.add("currency", msgRequired)
	case currency != nil && !currencyPattern.MatchString(*currency):
		v.add("currency", msg{"muss ein ISO-4217-Code aus drei Großbuchstaben sein", "must be an ISO 4217 code of three capital letters"})
	}
	status := v.oneOf(f, "status", false, statusDraft, statusOpen)
	if v.errs != nil {
		return c.invalid(v.errs)
	}
	if status == "" {
		status = statusDraft
	}
	in := &invoice{id: "inv_" + s.ids.next(c.now), contactID: *contactID, amount: amount, currency: *currency,
		status: status, created: c.now, updated: c.now}
	s.invoices[in.id] = in
	s.invoiceIDs = append(s.invoiceIDs, in.id)
	view := in.view()
	s.emit(c.now, c.now, "invoice.created", view)
	a := jsonAnswer(http.StatusCreated, view)
	a.header.Set("Location", "/v1/invoices/"+in.id)
	a.header.Set("ETag", etagOf(a.body))
	a.writes = 1
	return a
}

// wrongState answers 409 INVALID_STATE; m takes the invoice's status.
func (c *call) wrongState(in *invoice, m msg) answer {
	return c.fail(http.StatusConflict, codeInvalidState, m, in.status)
}

func (s *Server) payInvoice(c *call, r *http.Request) answer {
	in := s.invoices[r.PathValue("id")]
	if in == nil {
		return c.notFound()
	}
	if _, bad := parseObject(c, true); bad != nil {
		return *bad
	}
	if in.status != statusOpen {
		return c.wrongState(in, msg{"Die Rechnung ist im Zustand %s; bezahlt werden kann nur eine offene Rechnung.",
			"The invoice is %s; only an open invoice can be paid."})
	}
	in.status = statusPaid
	in.updated = c.now
	view := in.view()
	s.emit(c.now, c.now, "invoice.paid", view)
	a := jsonAnswer(http.StatusOK, view)
	a.writes = 1
	return a
}

func (s *Server) refundInvoice(c *call, r *http.Request) answer {
	in := s.invoices[r.PathValue("id")]
	if in == nil {
		return c.notFound()
	}
	f, bad := parseObject(c, true)
	if bad != nil {
		return *bad
	}
	if in.status != statusPaid {
		return c.wrongState(in, msg{"Die Rechnung ist im Zustand %s; erstattet werden kann nur eine bezahlte Rechnung.",
			"The invoice is %s; only a paid invoice can be refunded."})
	}
	var v validator
	rest := in.amount - in.refunded
	amount, set := v.integer(f, "amount")
	switch {
	case !set && len(v.errs) == 0:
		amount = rest
	case set && amount < 1:
		v.add("amount", msgPositive)
	case set && amount > rest:
		v.add("amount", msg{"darf nicht größer sein als der noch nicht erstattete Betrag %d", "must not exceed the amount not yet refunded, %d"}, rest)
	}
	if v.errs != nil {
		return c.invalid(v.errs)
	}
	in.refunded += amount
	if in.refunded == in.amount {
		in.status = statusRefunded
	}
	in.updated = c.now
	view := in.view()
	s.emit(c.now, c.now, "invoice.refunded", view)
	a := jsonAnswer(http.StatusOK, view)
	a.writes = 1
	return a
}
