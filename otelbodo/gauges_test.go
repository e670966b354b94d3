package otelbodo

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric"
)

// callEach makes a client of each key with t's option and has it call once;
// it returns the clients, to keep them alive.
func callEach(tb testing.TB, srv *bodotest.Server, opt bodo.Option, keys ...string) []*bodo.Client {
	tb.Helper()
	var clients []*bodo.Client
	for _, key := range keys {
		c, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
			bodo.WithAPIKey(key), bodo.WithLogger(slog.New(slog.DiscardHandler)), opt)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := c.Me(context.Background()); err != nil {
			tb.Fatal(err)
		}
		clients = append(clients, c)
	}
	return clients
}

func (g *gauged) count() int {
	n := 0
	g.clients.Range(func(any, any) bool { n++; return true })
	return n
}

// globalProviderSet is whether a test set the global MeterProvider: the
// default one hands over to the first set and never again, so a second
// run in the process (-count=2) no longer starts without a provider.
var globalProviderSet bool

func TestNoClientRememberedWithoutAMeterProvider(t *testing.T) {
	if globalProviderSet {
		t.Skip("the global MeterProvider was set by an earlier run in this process")
	}
	globalProviderSet = true
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer(bodotest.WithoutLimits())
		defer srv.Close()
		tel := newTelemetry()
		callEach(t, srv, tel.option(), bodotest.APIKey, bodotest.SecondKey, bodotest.APIKey)
		if n := tel.gauged.count(); n != 0 {
			t.Errorf("with no MeterProvider the gauges hold %d clients", n)
		}
		// Once the program sets the global provider, the gauges read them.
		otel.SetMeterProvider(metric.NewMeterProvider(metric.WithReader(metric.NewManualReader())))
		defer otel.SetMeterProvider(noop.NewMeterProvider())
		callEach(t, srv, tel.option(), bodotest.APIKey)
		if n := tel.gauged.count(); n != 1 {
			t.Errorf("with the global MeterProvider set the gauges hold %d clients, want 1", n)
		}
	})
}

func TestOneClientRememberedPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer(bodotest.WithoutLimits())
		defer srv.Close()
		tel := newTelemetry(WithMeterProvider(metric.NewMeterProvider(metric.WithReader(metric.NewManualReader()))))
		clients := callEach(t, srv, tel.option(), bodotest.APIKey, bodotest.SecondKey, bodotest.APIKey, bodotest.APIKey)
		if n := tel.gauged.count(); n != 2 {
			t.Errorf("four clients of two keys: the gauges hold %d, want 2", n)
		}
		_ = clients
	})
}
