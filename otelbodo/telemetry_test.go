package otelbodo_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/bodo-app/bodo-go/otelbodo"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// recorded is a client's telemetry, kept in memory.
type recorded struct {
	spans  *tracetest.SpanRecorder
	reader *metric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *metric.MeterProvider
}

func newRecorded() *recorded {
	r := &recorded{spans: tracetest.NewSpanRecorder(), reader: metric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	r.mp = metric.NewMeterProvider(metric.WithReader(r.reader))
	return r
}

// client makes a client of key on srv that reports to r.
func (r *recorded) client(t *testing.T, srv *bodotest.Server, key string) *bodo.Client {
	t.Helper()
	c, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(key), bodo.WithLogger(slog.New(slog.DiscardHandler)),
		otelbodo.WithTelemetry(otelbodo.WithTracerProvider(r.tp),
			otelbodo.WithMeterProvider(r.mp)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (r *recorded) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

func (r *recorded) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range r.spans.Ended() {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

// TestGaugesTellKeysApart: two keys on one host are two points of each
// level's remaining, told apart by bodo.key.id, which is the client's
// KeyID; a second client of a key adds none.
func TestGaugesTellKeysApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		r := newRecorded()
		busy, quiet := r.client(t, srv, bodotest.APIKey), r.client(t, srv, bodotest.SecondKey)
		again := r.client(t, srv, bodotest.APIKey)
		for _, c := range []*bodo.Client{busy, busy, busy, quiet, again} {
			if _, err := c.Contacts.List(context.Background(), &bodo.ListContactsParams{Q: bodo.Value("Ada")}); err != nil {
				t.Fatal(err)
			}
		}
		remaining := metricByName(t, r.collect(t), otelbodo.MetricBudgetRemaining).Data.(metricdata.Gauge[float64])
		byKey := map[string]float64{}
		for _, p := range remaining.DataPoints {
			if l, _ := p.Attributes.Value(otelbodo.AttrLevel); l.AsString() == "key" {
				id, _ := p.Attributes.Value(otelbodo.AttrKeyID)
				byKey[id.AsString()] = p.Value
			}
		}
		_, b := byKey[busy.KeyID()]
		_, q := byKey[quiet.KeyID()]
		if len(byKey) != 2 || !b || !q {
			t.Errorf("key level remaining by bodo.key.id: %v, want a point for %s and one for %s", byKey, busy.KeyID(), quiet.KeyID())
		}
		for id := range byKey {
			if id == "" || strings.Contains(bodotest.APIKey+bodotest.SecondKey, id) || strings.Contains(id, "sandbox") {
				t.Errorf("bodo.key.id %q is empty or reveals a key", id)
			}
		}
		waiting := metricByName(t, r.collect(t), otelbodo.MetricBudgetWaiting).Data.(metricdata.Gauge[int64])
		if len(waiting.DataPoints) != 2 {
			t.Errorf("%d points of calls waiting, want one per key", len(waiting.DataPoints))
		}
		runtime.KeepAlive(busy) // the gauges hold clients weakly: one collected is no point
		runtime.KeepAlive(quiet)
		runtime.KeepAlive(again)
	})
}

// TestHeldCallThatFailsHasASpan: after the server refused a delete for the
// delete level, a delete the budget holds until the caller gives up, and one whose deadline the wait would pass, are never sent;
// each is a failed span of the caller's trace, with what held it, and a
// point of the budget's wait.
func TestHeldCallThatFailsHasASpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer(bodotest.WithLimitFactor(0.1)) // one delete a minute
		defer srv.Close()
		r := newRecorded()
		c := r.client(t, srv, bodotest.APIKey)
		caller, parent := r.tp.Tracer("test").Start(context.Background(), "agent step")
		var notFound *bodo.Error
		if err := c.Contacts.Delete(caller, "con_00000000000000000000000000"); !errors.As(err, &notFound) || notFound.Local {
			t.Fatalf("first delete: %v", err)
		}
		var refused *bodo.Error // the server's word on the delete level
		if err := c.Contacts.Delete(caller, "con_00000000000000000000000000", bodo.WithMaxRetries(0)); !errors.As(err, &refused) || refused.Local || refused.Policy != "delete" {
			t.Fatalf("second delete: %v", err)
		}
		ctx, cancel := context.WithCancel(caller)
		go func() {
			time.Sleep(2 * time.Second)
			cancel()
		}()
		heldErr := c.Contacts.Delete(ctx, "con_00000000000000000000000000")
		short, cancelShort := context.WithTimeout(caller, time.Second)
		defer cancelShort()
		shortErr := c.Contacts.Delete(short, "con_00000000000000000000000000")
		parent.End()
		if !errors.Is(heldErr, context.Canceled) || !errors.Is(shortErr, context.DeadlineExceeded) {
			t.Fatalf("the held deletes: %v; %v", heldErr, shortErr)
		}

		var held []sdktrace.ReadOnlySpan
		for _, sp := range r.named("deleteContact") {
			if sp.SpanKind() == trace.SpanKindInternal {
				held = append(held, sp)
			}
		}
		if len(held) != 2 {
			for _, sp := range r.spans.Ended() {
				t.Log(sp.Name(), sp.SpanKind(), sp.Attributes(), sp.Status())
			}
			t.Fatalf("%d spans of held deletes, want 2", len(held))
		}
		for i, want := range []time.Duration{2 * time.Second, 0} {
			sp := held[i]
			a := attrsOf(sp.Attributes())
			if sp.Status().Code != codes.Error || a[semconv.ErrorTypeKey].AsString() != otelbodo.ErrorBudgetHold ||
				a[otelbodo.AttrHeldBy].AsString() != "delete" || sp.EndTime().Sub(sp.StartTime()) != want ||
				sp.Parent().SpanID() != parent.SpanContext().SpanID() || len(sp.Events()) != 1 {
				t.Errorf("held span %d: status %v, %v, lasting %v (want %v), parent %v, events %v",
					i, sp.Status(), sp.Attributes(), sp.EndTime().Sub(sp.StartTime()), want, sp.Parent().SpanID(), sp.Events())
			}
		}
		wait := metricByName(t, r.collect(t), otelbodo.MetricBudgetWait).Data.(metricdata.Histogram[float64])
		var n uint64
		var sum float64
		for _, p := range wait.DataPoints {
			if e, _ := p.Attributes.Value(semconv.ErrorTypeKey); e.AsString() == otelbodo.ErrorBudgetHold {
				n, sum = n+p.Count, sum+p.Sum
			}
		}
		if n != 2 || sum != 2 {
			t.Errorf("budget waits that failed: %d over %gs, want 2 over 2s", n, sum)
		}
	})
}

// cutOnce breaks off the body of the first answer after a second.
func cutOnce() bodo.Middleware {
	cut := false
	return func(req *http.Request, next bodo.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err != nil || cut {
			return resp, err
		}
		cut = true
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(io.LimitReader(resp.Body, 3), stall{}), resp.Body}
		return resp, nil
	}
}

// stall fails a read after a second, as a connection that dies.
type stall struct{}

func (stall) Read([]byte) (int, error) {
	time.Sleep(time.Second)
	return 0, io.ErrUnexpectedEOF
}

// TestSpanEndsWithTheBody: an attempt whose 200 broke off in the body is a
// failed span that lasts until the read failed; its retry is a span that
// succeeds. url.full keeps the query's keys, not its values.
func TestSpanEndsWithTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer(bodotest.WithoutLimits())
		defer srv.Close()
		r := newRecorded()
		c := r.client(t, srv, bodotest.APIKey)
		if _, err := c.Contacts.List(context.Background(), &bodo.ListContactsParams{Q: bodo.Value("ada@example.com")}, bodo.WithMiddleware(cutOnce())); err != nil {
			t.Fatal(err)
		}
		spans := r.named("listContacts")
		if len(spans) != 2 {
			t.Fatalf("%d listContacts spans, want 2", len(spans))
		}
		cut, retry := spans[0], spans[1]
		if cut.Status().Code != codes.Error || len(cut.Events()) != 1 || cut.EndTime().Sub(cut.StartTime()) < time.Second {
			t.Errorf("the cut attempt: status %v, events %v, lasting %v", cut.Status(), cut.Events(), cut.EndTime().Sub(cut.StartTime()))
		}
		if retry.Status().Code == codes.Error {
			t.Errorf("the retry: status %v", retry.Status())
		}
		full := attrsOf(cut.Attributes())[semconv.URLFullKey].AsString()
		u, err := url.Parse(full)
		if err != nil || u.Query().Get("q") != "REDACTED" || strings.Contains(full, "ada") {
			t.Errorf("url.full %q", full)
		}
	})
}
