// Command quickstart is a short tour of bodo-go: it creates, reads, lists,
// updates and deletes a contact, creates and pays an invoice, runs an export
// to completion and prints the key's rate-limit status.
//
// With BODO_BASE_URL and BODO_API_KEY set it runs against that server;
// without BODO_BASE_URL it starts a bodotest server (the in-memory bodo API
// of package bodotest) on loopback first.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
)

func main() {
	log.SetFlags(0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var opts []bodo.Option
	if os.Getenv("BODO_BASE_URL") == "" {
		srv := bodotest.NewServer()
		if err := srv.Start(); err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		fmt.Printf("BODO_BASE_URL is not set: using a bodotest server at %s\n\n", srv.URL)
		opts = append(opts, bodo.WithBaseURL(srv.URL), bodo.WithAPIKey(bodotest.APIKey))
	}
	client, err := bodo.NewClient(opts...)
	if err != nil {
		log.Fatal(err)
	}
	if err := tour(ctx, client); err != nil {
		log.Fatal(err)
	}
}

func tour(ctx context.Context, client *bodo.Client) error {
	me, err := client.Me(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("1. Me: key %s of %s (%s) in %s\n", me.KeyID, me.Principal.Name, me.Principal.Type, me.Organization.Name)

	ada, err := client.Contacts.Create(ctx, bodo.ContactCreate{
		Name:    "Ada Lovelace",
		Email:   bodo.String("ada@example.com"),
		Company: bodo.String("Analytical Engines"),
		Tags:    []string{"quickstart"},
	})
	if err != nil {
		return err
	}
	fmt.Printf("2. Created contact %s (%s)\n", ada.ID, ada.Name)

	got, err := client.Contacts.Get(ctx, ada.ID)
	if err != nil {
		return err
	}
	fmt.Printf("3. Read it back: %s <%s>\n", got.Name, got.Email.Value())

	n := 0
	for c, err := range client.Contacts.All(ctx, &bodo.ListContactsParams{Q: bodo.String("Ada"), Limit: bodo.Int(50)}) {
		if err != nil {
			return err
		}
		n++
		_ = c
	}
	fmt.Printf("4. Listed the contacts matching \"Ada\": %d\n", n)

	updated, err := client.Contacts.Update(ctx, ada.ID, bodo.ContactUpdate{
		Phone:   bodo.String("+44 20 7946 0000"),
		Company: bodo.Null[string](),
	})
	if err != nil {
		return err
	}
	fmt.Printf("5. Updated it: phone %s, company cleared (%v)\n", updated.Phone.Value(), updated.Company.IsNull())

	if err := client.Contacts.Delete(ctx, ada.ID); err != nil {
		return err
	}
	_, err = client.Contacts.Get(ctx, ada.ID)
	if !errors.Is(err, bodo.ErrNotFound) {
		return fmt.Errorf("reading a deleted contact: %v, want ErrNotFound", err)
	}
	fmt.Println("6. Deleted it; reading it again is ErrNotFound")

	grace, err := client.Contacts.Create(ctx, bodo.ContactCreate{Name: "Grace Hopper"})
	if err != nil {
		return err
	}
	inv, err := client.Invoices.Create(ctx, bodo.InvoiceCreate{
		ContactID: grace.ID,
		Amount:    12500,
		Currency:  "EUR",
		Status:    bodo.Value(bodo.InvoiceStatusOpen),
	})
	if err != nil {
		return err
	}
	paid, err := client.Invoices.Pay(ctx, inv.ID)
	if err != nil {
		return err
	}
	fmt.Printf("7. Invoice %s over %d.%02d %s for %s: %s\n", paid.ID, paid.Amount/100, paid.Amount%100, paid.Currency, grace.Name, paid.Status)

	op, err := client.Exports.Create(ctx, bodo.ExportCreate{Resource: bodo.ExportResourceContacts, Format: bodo.ExportFormatJSONL})
	if err != nil {
		return err
	}
	done, err := client.Operations.Wait(ctx, op.ID)
	if err != nil {
		return err
	}
	fmt.Printf("8. Export %s %s: %d records at %s\n", done.ID, done.Status, done.Result.Value().Records, done.Result.Value().URL)

	status, err := client.RateLimit(ctx)
	if err != nil {
		return err
	}
	fmt.Println("9. RateLimit():")
	for _, p := range status.Policies {
		fmt.Println("  ", p)
	}
	return nil
}
