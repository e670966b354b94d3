package main

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
)

// TestTour runs the quickstart's tour against a bodotest server on virtual
// time, as a user's test would.
func TestTour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		retries := 0
		client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
			bodo.WithAPIKey(bodotest.APIKey), bodo.WithLogger(slog.New(slog.DiscardHandler)),
			bodo.WithOnRetry(func(bodo.RetryEvent) { retries++ }))
		if err != nil {
			t.Fatal(err)
		}
		if err := tour(context.Background(), client); err != nil {
			t.Fatal(err)
		}
		if retries != 0 {
			t.Errorf("the tour needed %d retries", retries)
		}
	})
}
