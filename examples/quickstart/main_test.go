package main

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// TestTour runs the quickstart's tour against the sandbox on virtual time.
func TestTour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		client, err := bodo.NewClient(bodo.WithAPIKey(sandbox.TestKey), bodo.WithBaseURL("https://quickstart.bodo.test"),
			bodo.WithHTTPClient(&http.Client{Transport: srv.Transport()}), bodo.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		if err := tour(context.Background(), client); err != nil {
			t.Fatal(err)
		}
		if st := srv.Stats(sandbox.TestKey); st.Accepted != st.Requests {
			t.Errorf("%d of %d requests accepted", st.Accepted, st.Requests)
		}
	})
}
