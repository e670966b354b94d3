package agents

import (
	"context"

	"github.com/bodo-app/bodo-go"
)

// API is what an Agent calls: the eight operations of the mix (list and
// search are both ListContacts). SDK implements it over *bodo.Client, Raw over
// the generated client, so the same workload runs through either.
//
// Errors must let errors.Is find bodo.ErrNotFound and bodo.ErrInvalidState,
// which the agent acts on; Run also pauses after an error that carries a
// retry hint (see Pause).
type API interface {
	GetContact(ctx context.Context, id string) (*bodo.Contact, error)
	ListContacts(ctx context.Context, params *bodo.ListContactsParams) (*bodo.ContactList, error)
	CountContacts(ctx context.Context, params *bodo.CountContactsParams) (*bodo.ContactCount, error)
	CreateContact(ctx context.Context, body bodo.ContactCreate) (*bodo.Contact, error)
	UpdateContact(ctx context.Context, id string, body bodo.ContactUpdate) (*bodo.Contact, error)
	DeleteContact(ctx context.Context, id string) error
	CreateInvoice(ctx context.Context, body bodo.InvoiceCreate) (*bodo.Invoice, error)
	PayInvoice(ctx context.Context, id string) (*bodo.Invoice, error)
}

// SDK is the API over a *bodo.Client: every call goes through the client's
// budget and retry discipline, with the client's defaults.
type SDK struct{ Client *bodo.Client }

var _ API = SDK{}

// GetContact calls Contacts.Get.
func (s SDK) GetContact(ctx context.Context, id string) (*bodo.Contact, error) {
	return s.Client.Contacts.Get(ctx, id)
}

// ListContacts calls Contacts.List.
func (s SDK) ListContacts(ctx context.Context, params *bodo.ListContactsParams) (*bodo.ContactList, error) {
	return s.Client.Contacts.List(ctx, params)
}

// CountContacts calls Contacts.Count.
func (s SDK) CountContacts(ctx context.Context, params *bodo.CountContactsParams) (*bodo.ContactCount, error) {
	return s.Client.Contacts.Count(ctx, params)
}

// CreateContact calls Contacts.Create.
func (s SDK) CreateContact(ctx context.Context, body bodo.ContactCreate) (*bodo.Contact, error) {
	return s.Client.Contacts.Create(ctx, body)
}

// UpdateContact calls Contacts.Update.
func (s SDK) UpdateContact(ctx context.Context, id string, body bodo.ContactUpdate) (*bodo.Contact, error) {
	return s.Client.Contacts.Update(ctx, id, body)
}

// DeleteContact calls Contacts.Delete.
func (s SDK) DeleteContact(ctx context.Context, id string) error {
	return s.Client.Contacts.Delete(ctx, id)
}

// CreateInvoice calls Invoices.Create.
func (s SDK) CreateInvoice(ctx context.Context, body bodo.InvoiceCreate) (*bodo.Invoice, error) {
	return s.Client.Invoices.Create(ctx, body)
}

// PayInvoice calls Invoices.Pay.
func (s SDK) PayInvoice(ctx context.Context, id string) (*bodo.Invoice, error) {
	return s.Client.Invoices.Pay(ctx, id)
}
