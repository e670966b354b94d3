package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
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

// TestTheTourReportsAFailedRead: the read after the delete must be
// ErrNotFound; any other answer (here a 500 INTERNAL) fails the tour, as
// the README's "case err != nil: return err" advises.
func TestTheTourReportsAFailedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deleted := false
		srv := bodotest.NewServer(bodotest.WithFaults(func(r *http.Request) bodotest.Fault {
			if r.Method == http.MethodDelete {
				deleted = true
			}
			if deleted && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/contacts/con_") {
				return bodotest.Fault{RateLimited: "no-such-policy"} // answered 500 INTERNAL
			}
			return bodotest.Fault{}
		}))
		defer srv.Close()
		client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
			bodo.WithAPIKey(bodotest.APIKey), bodo.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		if err := tour(context.Background(), client); err == nil {
			t.Error("tour returned nil although reading the deleted contact failed with 500 INTERNAL")
		}
	})
}
