package bodo_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
)

// exampleClient starts the test server bodotest on loopback and returns a
// client for it; a real program calls bodo.NewClient() with BODO_API_KEY
// set.
func exampleClient() (*bodo.Client, func()) {
	srv := bodotest.NewServer()
	client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()), bodo.WithAPIKey(bodotest.APIKey))
	if err != nil {
		log.Fatal(err)
	}
	return client, srv.Close
}

func ExampleNewClient() {
	client, err := bodo.NewClient(
		bodo.WithAPIKey("bodo_test_0123456789abcdef"),
		bodo.WithMaxRetries(3),
		bodo.WithMaxRetryWait(30*time.Second),
	)
	if err != nil {
		log.Fatal(err)
	}
	_ = client
	fmt.Println("ok")
	// Output: ok
}

func ExampleContactsService_Create() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()

	c, err := client.Contacts.Create(ctx, bodo.ContactCreate{Name: "Ada Lovelace", Email: bodo.String("ada@example.com")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Name, c.Email.Value())
	// Output: Ada Lovelace ada@example.com
}

func ExampleContactsService_All() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()
	for _, name := range []string{"Ada", "Grace", "Edsger"} {
		if _, err := client.Contacts.Create(ctx, bodo.ContactCreate{Name: name}); err != nil {
			log.Fatal(err)
		}
	}

	for c, err := range client.Contacts.All(ctx, &bodo.ListContactsParams{Limit: bodo.Int(2)}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.Name)
	}
	// Output:
	// Ada
	// Grace
	// Edsger
}

func ExampleContactsService_Update() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()
	c, _ := client.Contacts.Create(ctx, bodo.ContactCreate{Name: "Ada", Company: bodo.String("Engines")})

	c, err := client.Contacts.Update(ctx, c.ID, bodo.ContactUpdate{
		Phone:   bodo.String("+44 20 7946 0000"),
		Company: bodo.Null[string](),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Phone.Value(), c.Company.IsNull())
	// Output: +44 20 7946 0000 true
}

func ExampleInvoicesService_Pay() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()
	c, _ := client.Contacts.Create(ctx, bodo.ContactCreate{Name: "Grace"})
	inv, _ := client.Invoices.Create(ctx, bodo.InvoiceCreate{ContactID: c.ID, Amount: 4200, Currency: "EUR", Status: bodo.Value(bodo.InvoiceStatusOpen)})

	// The same key on a second call replays the first answer instead of paying twice.
	paid, err := client.Invoices.Pay(ctx, inv.ID, bodo.WithIdempotencyKey("pay-"+inv.ID))
	if err != nil {
		log.Fatal(err)
	}
	again, err := client.Invoices.Pay(ctx, inv.ID, bodo.WithIdempotencyKey("pay-"+inv.ID))
	fmt.Println(paid.Status, again.Status, err)
	// Output: paid paid <nil>
}

func ExampleClient_RateLimit() {
	client, stop := exampleClient()
	defer stop()

	status, err := client.RateLimit(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range status.Policies {
		if p.Name == "key" {
			fmt.Printf("%s: quota %d %s per %v, capacity %d\n", p.Name, p.Quota, p.Unit, p.Window, p.Capacity)
		}
	}
	// Output: key: quota 300 points per 1m0s, capacity 600
}

func ExampleClient_Budget() {
	client, stop := exampleClient()
	defer stop()

	if _, err := client.Contacts.Create(context.Background(), bodo.ContactCreate{Name: "Ada Lovelace"}); err != nil {
		log.Fatal(err)
	}
	b := client.Budget()
	for _, l := range b.Levels {
		if l.Name == "write" { // bodotest's write level refills a request a second
			fmt.Printf("%s: %.0f of %d %s left, full in %v\n", l.Name, math.Floor(l.Remaining), l.Capacity, l.Unit, l.FullIn.Round(time.Second))
		}
	}
	fmt.Println("in flight:", b.InFlight, "waiting:", b.Waiting)
	// Output:
	// write: 59 of 60 requests left, full in 1s
	// in flight: 0 waiting: 0
}

func ExampleError() {
	client, stop := exampleClient()
	defer stop()

	_, err := client.Contacts.Get(context.Background(), "con_00000000000000000000000000")
	var e *bodo.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, bodo.ErrNotFound), e.Status, e.Code)
	}
	// Output: true 404 NOT_FOUND
}

func ExampleOperationsService_Wait() {
	client, stop := exampleClient()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	op, err := client.Exports.Create(ctx, bodo.ExportCreate{Resource: bodo.ExportResourceInvoices, Format: bodo.ExportFormatCSV})
	if err != nil {
		log.Fatal(err)
	}
	op, err = client.Operations.Wait(ctx, op.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(op.Status, op.Result.Value().Records)
	// Output: succeeded 0
}

func ExampleClient_Batch() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()

	create, _ := bodo.BatchPart(bodo.BatchMethodPost, "/v1/contacts", bodo.ContactCreate{Name: "Ada"})
	count, _ := bodo.BatchPart(bodo.BatchMethodGet, "/v1/contacts/count", nil)
	missing, _ := bodo.BatchPart(bodo.BatchMethodGet, "/v1/contacts/con_00000000000000000000000000", nil)
	res, err := client.Batch(ctx, bodo.BatchRequest{Requests: []bodo.BatchRequestItem{create, count, missing}})
	if err != nil {
		log.Fatal(err)
	}
	var c bodo.Contact
	var n bodo.ContactCount
	fmt.Println(res.Responses[0].Decode(&c), c.Name)
	fmt.Println(res.Responses[1].Decode(&n), n.Count)
	fmt.Println(errors.Is(res.Responses[2].Decode(nil), bodo.ErrNotFound))
	// Output:
	// <nil> Ada
	// <nil> 1
	// true
}

func ExampleOpt() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()

	// Optional fields are Opts: leave them out, or set them with bodo.String,
	// bodo.Int, bodo.Int64, bodo.Bool or bodo.Value.
	c, err := client.Contacts.Create(ctx, bodo.ContactCreate{Name: "Ada", Email: bodo.String("ada@example.com")})
	if err != nil {
		log.Fatal(err)
	}
	// Reading one never panics: Get says whether there is a value, Or
	// gives a default.
	email, ok := c.Email.Get()
	fmt.Println(email, ok, c.Phone.Or("(no phone)"))

	// In a merge patch, an absent Opt keeps the field and bodo.Null clears it.
	c, _ = client.Contacts.Update(ctx, c.ID, bodo.ContactUpdate{Email: bodo.Null[string]()})
	fmt.Println(c.Email.IsNull(), c.Name)
	// Output:
	// ada@example.com true (no phone)
	// true Ada
}

func ExampleRateLimitPolicy_String() {
	p := bodo.RateLimitPolicy{Name: "key", Unit: "points", Quota: 300, Window: time.Minute, Capacity: 600, Remaining: 553, Reset: 10 * time.Second}
	fmt.Println(p)
	// Output: key: 553 of 600 points left (300 per 1m0s), full again in 10s
}
