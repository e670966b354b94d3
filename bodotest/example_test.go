package bodotest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"sync"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
)

// A test makes a server and a client that talks to it in-process. Inside
// testing/synctest the waits the documented limits impose pass in virtual
// time.
func ExampleNewServer() {
	srv := bodotest.NewServer()
	defer srv.Close()
	client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(bodotest.APIKey))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	ada, err := client.Contacts.Create(ctx, bodo.ContactCreate{Name: "Ada Lovelace"})
	if err != nil {
		log.Fatal(err)
	}
	got, err := client.Contacts.Get(ctx, ada.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Name)
	// Output: Ada Lovelace
}

// Where a test checks what the code does rather than how it paces itself,
// WithoutLimits lets 300 creates through at once; with the documented limits
// (60 writes a minute) they take four minutes.
func ExampleWithoutLimits() {
	srv := bodotest.NewServer(bodotest.WithoutLimits())
	defer srv.Close()
	client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(bodotest.APIKey))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	names := make(chan string)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for name := range names {
				if _, err := client.Contacts.Create(ctx, bodo.ContactCreate{Name: name}); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	for i := range 300 {
		names <- fmt.Sprintf("Contact %d", i)
	}
	close(names)
	wg.Wait()

	n, err := client.Contacts.Count(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n.Count, "contacts")
	// Output: 300 contacts
}

// A profile plays a server that differs from the documented one where the
// API leaves room, here a smaller plan.
func ExampleWithProfile() {
	srv := bodotest.NewServer(bodotest.WithProfile(bodotest.SmallPlan))
	defer srv.Close()
	client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(bodotest.APIKey))
	if err != nil {
		log.Fatal(err)
	}

	status, err := client.RateLimit(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range status.Policies {
		if p.Name == "key" || p.Name == "write" {
			fmt.Println(p.Name, p.Quota, p.Unit, "per", p.Window)
		}
	}
	// Output:
	// key 150 points per 1m0s
	// write 30 requests per 1m0s
}

func ExampleProfiles() {
	for _, p := range bodotest.Profiles()[:3] {
		fmt.Printf("%s: %s\n", p, p.Summary())
	}
	// Output:
	// documented: the limits of bodo-api.md
	// small-plan: a smaller plan: key 150 points/min, capacity 300, the other quotas halved
	// big-plan: a bigger plan: key 600 points/min, capacity 1200, other levels doubled or more
}

// The server creates the first contact but drops the connection before it
// answers; the client sends the create again with the same Idempotency-Key
// and gets the stored answer, so the contact exists once.
func ExampleWithFaults() {
	var mu sync.Mutex
	dropped := false
	srv := bodotest.NewServer(bodotest.WithFaults(func(r *http.Request) bodotest.Fault {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPost && r.URL.Path == "/v1/contacts" && !dropped {
			dropped = true
			return bodotest.Fault{DropAfterCommit: true}
		}
		return bodotest.Fault{}
	}))
	defer srv.Close()
	client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(bodotest.APIKey),
		bodo.WithLogger(slog.New(slog.DiscardHandler)),
		bodo.WithOnRetry(func(e bodo.RetryEvent) {
			fmt.Printf("attempt %d of %s failed (connection lost: %v)\n", e.Attempt, e.Operation, errors.Is(e.Err, io.ErrUnexpectedEOF))
		}))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	if _, err := client.Contacts.Create(ctx, bodo.ContactCreate{Name: "Ada Lovelace"}); err != nil {
		log.Fatal(err)
	}
	n, err := client.Contacts.Count(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n.Count, "contact")
	// Output:
	// attempt 1 of createContact failed (connection lost: true)
	// 1 contact
}

// Problems are German, as the API's are; a client that asks for English
// with Accept-Language gets English titles, details and field messages.
func ExampleServer_english() {
	srv := bodotest.NewServer()
	defer srv.Close()
	client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(bodotest.APIKey), bodo.WithHeader("Accept-Language", "en"))
	if err != nil {
		log.Fatal(err)
	}

	_, err = client.Invoices.Create(context.Background(), bodo.InvoiceCreate{ContactID: "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP", Currency: "EUR"})
	var apiErr *bodo.Error
	if errors.As(err, &apiErr) {
		fmt.Printf("%s: %s\n", apiErr.Title, apiErr.Detail)
		for _, f := range apiErr.Fields {
			fmt.Printf("  %s %s\n", f.Field, f.Message)
		}
	}
	// Output:
	// Invalid fields: 2 fields are invalid
	//   contactId there is no such contact
	//   amount must be greater than 0
}

// Start serves the server over HTTP on loopback, for code that takes a URL
// rather than an *http.Client.
func ExampleServer_Start() {
	srv := bodotest.NewServer()
	defer srv.Close()
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/me", nil)
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bodotest.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status, resp.Header.Get("Bodo-Version"))
	// Output: 200 OK 2026-11-01
}
