package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/gen/oapi"
	"github.com/google/uuid"
)

// Raw is the API over the generated client alone, as a user of package oapi
// writes it: whatever retries there are live in the client's HTTP
// transport; writes carry no Idempotency-Key, except the money actions,
// which the server refuses without one: each call gets a fresh UUID (the
// transport's retries resend the same request, so the same key; the agent's
// own later attempt at the same payment gets a new one). A non-2xx answer
// becomes a *StatusError.
type Raw struct{ Client *oapi.ClientWithResponses }

var _ API = Raw{}

// StatusError is a non-2xx answer seen through the generated client: the
// HTTP status, the problem's code and its retryAfterMs.
type StatusError struct {
	Operation  string
	Status     int
	Code       string        // the problem's code; empty when the body is no problem
	RetryAfter time.Duration // the problem's retryAfterMs; zero without one
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s: %d %s", e.Operation, e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	return s
}

// Is matches the bodo sentinels the way a *bodo.Error of the same status and
// code does (bodo.ErrNotFound for NOT_FOUND, and so on).
func (e *StatusError) Is(target error) bool {
	return (&bodo.Error{Status: e.Status, Code: e.Code}).Is(target)
}

// Temporary reports whether the answer was a refusal that may pass later:
// RATE_LIMITED, OVERLOADED or IDEMPOTENCY_KEY_IN_USE, or a 429 or 503 without
// a problem.
func (e *StatusError) Temporary() bool {
	if e.Code == "" {
		return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
	}
	return (&bodo.Error{Status: e.Status, Code: e.Code}).Temporary()
}

// check turns an answer of a generated call into an error: a *StatusError
// for a non-2xx answer, another error for a 2xx answer whose body the
// generated parser did not decode (decoded false), else nil.
func check(op string, resp *http.Response, body []byte, decoded bool) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if !decoded {
			return fmt.Errorf("%s: the %d answer has no body the client could decode", op, resp.StatusCode)
		}
		return nil
	}
	e := &StatusError{Operation: op, Status: resp.StatusCode}
	var p oapi.Problem
	if json.Unmarshal(body, &p) == nil {
		e.Code = p.Code
		if p.RetryAfterMs != nil && *p.RetryAfterMs > 0 {
			e.RetryAfter = time.Duration(*p.RetryAfterMs) * time.Millisecond
		}
	}
	return e
}

// GetContact calls GetContactWithResponse.
func (r Raw) GetContact(ctx context.Context, id string) (*bodo.Contact, error) {
	res, err := r.Client.GetContactWithResponse(ctx, id, &oapi.GetContactParams{})
	if err != nil {
		return nil, fmt.Errorf("getContact: %w", err)
	}
	if err := check("getContact", res.HTTPResponse, res.Body, res.JSON200 != nil); err != nil {
		return nil, err
	}
	return convert[bodo.Contact](res.JSON200)
}

// ListContacts calls ListContactsWithResponse.
func (r Raw) ListContacts(ctx context.Context, params *bodo.ListContactsParams) (*bodo.ContactList, error) {
	in, err := convert[oapi.ListContactsParams](params)
	if err != nil {
		return nil, err
	}
	res, err := r.Client.ListContactsWithResponse(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("listContacts: %w", err)
	}
	if err := check("listContacts", res.HTTPResponse, res.Body, res.JSON200 != nil); err != nil {
		return nil, err
	}
	return convert[bodo.ContactList](res.JSON200)
}

// CountContacts calls CountContactsWithResponse.
func (r Raw) CountContacts(ctx context.Context, params *bodo.CountContactsParams) (*bodo.ContactCount, error) {
	in, err := convert[oapi.CountContactsParams](params)
	if err != nil {
		return nil, err
	}
	res, err := r.Client.CountContactsWithResponse(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("countContacts: %w", err)
	}
	if err := check("countContacts", res.HTTPResponse, res.Body, res.JSON200 != nil); err != nil {
		return nil, err
	}
	return convert[bodo.ContactCount](res.JSON200)
}

// CreateContact calls CreateContactWithResponse, without an Idempotency-Key.
func (r Raw) CreateContact(ctx context.Context, body bodo.ContactCreate) (*bodo.Contact, error) {
	in, err := convert[oapi.ContactCreate](body)
	if err != nil {
		return nil, err
	}
	res, err := r.Client.CreateContactWithResponse(ctx, &oapi.CreateContactParams{}, *in)
	if err != nil {
		return nil, fmt.Errorf("createContact: %w", err)
	}
	if err := check("createContact", res.HTTPResponse, res.Body, res.JSON201 != nil); err != nil {
		return nil, err
	}
	return convert[bodo.Contact](res.JSON201)
}

// UpdateContact calls UpdateContactWithResponse, without an Idempotency-Key.
func (r Raw) UpdateContact(ctx context.Context, id string, body bodo.ContactUpdate) (*bodo.Contact, error) {
	in, err := convert[oapi.ContactUpdate](body)
	if err != nil {
		return nil, err
	}
	res, err := r.Client.UpdateContactWithResponse(ctx, id, &oapi.UpdateContactParams{}, *in)
	if err != nil {
		return nil, fmt.Errorf("updateContact: %w", err)
	}
	if err := check("updateContact", res.HTTPResponse, res.Body, res.JSON200 != nil); err != nil {
		return nil, err
	}
	return convert[bodo.Contact](res.JSON200)
}

// DeleteContact calls DeleteContactWithResponse.
func (r Raw) DeleteContact(ctx context.Context, id string) error {
	res, err := r.Client.DeleteContactWithResponse(ctx, id)
	if err != nil {
		return fmt.Errorf("deleteContact: %w", err)
	}
	return check("deleteContact", res.HTTPResponse, res.Body, true)
}

// CreateInvoice calls CreateInvoiceWithResponse, without an Idempotency-Key
// (creating an invoice is no money action).
func (r Raw) CreateInvoice(ctx context.Context, body bodo.InvoiceCreate) (*bodo.Invoice, error) {
	in, err := convert[oapi.InvoiceCreate](body)
	if err != nil {
		return nil, err
	}
	res, err := r.Client.CreateInvoiceWithResponse(ctx, &oapi.CreateInvoiceParams{}, *in)
	if err != nil {
		return nil, fmt.Errorf("createInvoice: %w", err)
	}
	if err := check("createInvoice", res.HTTPResponse, res.Body, res.JSON201 != nil); err != nil {
		return nil, err
	}
	return convert[bodo.Invoice](res.JSON201)
}

// PayInvoice calls PayInvoiceWithResponse with a fresh Idempotency-Key.
func (r Raw) PayInvoice(ctx context.Context, id string) (*bodo.Invoice, error) {
	res, err := r.Client.PayInvoiceWithResponse(ctx, id, &oapi.PayInvoiceParams{IdempotencyKey: uuid.NewString()})
	if err != nil {
		return nil, fmt.Errorf("payInvoice: %w", err)
	}
	if err := check("payInvoice", res.HTTPResponse, res.Body, res.JSON200 != nil); err != nil {
		return nil, err
	}
	return convert[bodo.Invoice](res.JSON200)
}

// convert moves a value between its types in packages bodo and oapi through
// JSON, the wire form the two share (both are generated from openapi.json).
func convert[T any](v any) (*T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("converting %T: %w", v, err)
	}
	return out, nil
}
