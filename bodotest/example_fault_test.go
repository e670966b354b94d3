package bodotest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
)

// faultyClient is a client of a server that injects f into every request
// that lists contacts, with retries off.
func faultyClient(f bodotest.Fault) (*bodo.Client, func()) {
	srv := bodotest.NewServer(bodotest.WithFaults(func(r *http.Request) bodotest.Fault {
		if r.URL.Path == "/v1/contacts" {
			return f
		}
		return bodotest.Fault{}
	}))
	client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(bodotest.APIKey), bodo.WithLogger(slog.New(slog.DiscardHandler)),
		bodo.WithMaxRetries(0))
	if err != nil {
		log.Fatal(err)
	}
	return client, srv.Close
}

// A RATE_LIMITED fault plays a refusal by a level of the key; with retries
// off the call returns it, and errors.Is matches bodo.ErrRateLimited.
func ExampleFault_rateLimited() {
	client, stop := faultyClient(bodotest.Fault{RateLimited: "write", RetryAfter: 2 * time.Second})
	defer stop()

	_, err := client.Contacts.List(context.Background(), nil)
	var e *bodo.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, bodo.ErrRateLimited), e.Status, e.Policy, e.RetryAfter, e.Temporary())
	}
	// Output: true 429 write 2s true
}

// A QUOTA_EXHAUSTED fault plays a used-up quota: the client does not retry
// it, and the error says when the quota resets.
func ExampleFault_quotaExhausted() {
	client, stop := faultyClient(bodotest.Fault{QuotaExhausted: "egress", RetryAfter: 30 * time.Minute})
	defer stop()

	_, err := client.Contacts.List(context.Background(), nil)
	var e *bodo.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, bodo.ErrQuotaExhausted), e.Policy, e.ResetsAt.Sub(time.Now()).Round(time.Minute), e.Temporary())
	}
	// Output: true egress 30m0s false
}

// A lockout fault plays the answer of a key locked after too many
// refusals: RATE_LIMITED with policy lockout and a wait of 5 minutes.
func ExampleFault_lockout() {
	client, stop := faultyClient(bodotest.Fault{RateLimited: "lockout"})
	defer stop()

	_, err := client.Contacts.List(context.Background(), nil)
	var e *bodo.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, bodo.ErrRateLimited), e.Policy, e.RetryAfter)
	}
	// Output: true lockout 5m0s
}
