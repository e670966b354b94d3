package otelbodo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/bodo-app/bodo-go/otelbodo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	om "go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// rt is a RoundTripper of a func.
type rt func(*http.Request) (*http.Response, error)

func (f rt) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// newC is a quiet client of key at base through tr, with the telemetry of
// tel.
func newC(t *testing.T, base, key string, tr http.RoundTripper, tel ...otelbodo.Option) *bodo.Client {
	c, err := bodo.NewClient(bodo.WithBaseURL(base), bodo.WithHTTPClient(&http.Client{Transport: tr}), bodo.WithAPIKey(key),
		bodo.WithLogger(slog.New(slog.DiscardHandler)), otelbodo.WithTelemetry(tel...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAMiddlewareThatAnswersNothingEndsTheSpan: a middleware after the
// telemetry's that answers neither a response nor an error gets a failed
// span, and the client its own error, not a panic.
func TestAMiddlewareThatAnswersNothingEndsTheSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer(bodotest.WithoutLimits())
		defer srv.Close()
		r := newRecorded()
		c := newC(t, srv.URL, bodotest.APIKey, srv.Client().Transport, otelbodo.WithTracerProvider(r.tp))
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("panic: %v", p)
			}
		}()
		c.Me(t.Context(), bodo.WithMiddleware(func(*http.Request, bodo.MiddlewareNext) (*http.Response, error) { return nil, nil }))
	})
}

// countingProvider counts the callbacks registered on its meters and not
// unregistered since.
type countingProvider struct {
	om.MeterProvider
	live *atomic.Int64
}

type countingMeter struct {
	om.Meter
	live *atomic.Int64
}

type countingRegistration struct {
	om.Registration
	live *atomic.Int64
}

func (p countingProvider) Meter(n string, o ...om.MeterOption) om.Meter {
	return countingMeter{p.MeterProvider.Meter(n, o...), p.live}
}

func (m countingMeter) RegisterCallback(f om.Callback, in ...om.Observable) (om.Registration, error) {
	reg, err := m.Meter.RegisterCallback(f, in...)
	if err == nil {
		m.live.Add(1)
		reg = countingRegistration{reg, m.live}
	}
	return reg, err
}

func (r countingRegistration) Unregister() error {
	r.live.Add(-1)
	return r.Registration.Unregister()
}

// TestDroppedClientsLeaveNoCallbacks: 200 clients made and dropped, each
// with a WithTelemetry of its own, leave no gauge callback on the
// MeterProvider once they are collected.
func TestDroppedClientsLeaveNoCallbacks(t *testing.T) {
	srv := bodotest.NewServer(bodotest.WithoutLimits())
	defer srv.Close()
	live := new(atomic.Int64)
	mp := countingProvider{metric.NewMeterProvider(metric.WithReader(metric.NewManualReader())), live}
	func() {
		for range 200 {
			newC(t, srv.URL, bodotest.APIKey, srv.Client().Transport, otelbodo.WithMeterProvider(mp)).Me(t.Context())
		}
	}()
	for range 50 {
		runtime.GC()
		if live.Load() <= 1 {
			return
		}
		time.Sleep(10 * time.Millisecond) // the cleanups run on a goroutine of their own
	}
	t.Errorf("200 dropped clients: %d callbacks stay on the MeterProvider", live.Load())
}

// TestServerChosenValuesAreAClosedSetOnMetrics: a server that sends a
// new code and policy, 8 KiB each, in every 503 adds no series to the
// refusals and retries metrics beyond the closed set of values.
func TestServerChosenValuesAreAClosedSetOnMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		long := strings.Repeat("x", 8<<10)
		hostile := rt(func(r *http.Request) (*http.Response, error) {
			i := n.Add(1)
			b := fmt.Sprintf(`{"type":"about:blank","code":"C%d%s","policy":"P%d%s"}`, i, long, i, long)
			return &http.Response{StatusCode: 503, Header: http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"0"}},
				Body: io.NopCloser(strings.NewReader(b)), Request: r}, nil
		})
		r := newRecorded()
		c := newC(t, "https://api.example.test", bodotest.APIKey, hostile, otelbodo.WithMeterProvider(r.mp))
		for range 50 {
			c.Me(t.Context(), bodo.WithMaxRetries(1))
		}
		for _, name := range []string{otelbodo.MetricRefusals, otelbodo.MetricRetries} {
			d := metricByName(t, r.collect(t), name).Data.(metricdata.Sum[int64])
			kib := 0
			for _, p := range d.DataPoints {
				for _, kv := range p.Attributes.ToSlice() {
					kib += len(kv.Value.Emit())
				}
			}
			if len(d.DataPoints) > 10 {
				t.Errorf("%s: %d attribute sets, %d KiB of server strings", name, len(d.DataPoints), kib>>10)
			}
		}
	})
}

// TestARecordedErrorRedactsTheQuery: the error a failed attempt's span
// records names the URL as url.full does, with the query's values
// redacted.
func TestARecordedErrorRedactsTheQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := rt(func(*http.Request) (*http.Response, error) { return nil, errors.New("connection reset") })
		r := newRecorded()
		c := newC(t, "https://api2.example.test", bodotest.SecondKey, down, otelbodo.WithTracerProvider(r.tp))
		c.Contacts.List(t.Context(), &bodo.ListContactsParams{Q: bodo.Value("ada@example.com")}, bodo.WithMaxRetries(0))
		for _, sp := range r.named("listContacts") {
			if strings.Contains(sp.Status().Description, "ada") || strings.Contains(fmt.Sprint(sp.Events()), "ada") {
				t.Errorf("status %q, events %v", sp.Status().Description, sp.Events())
			}
		}
	})
}

// TestTelemetryLetsNoRequestGoWhileARefusalIsRead: a 503 whose body, and
// with it the wait it asks for, comes a second after its headers holds the
// key's next request until it has been read, with telemetry as without:
// the telemetry does not read the body ahead of the client.
func TestTelemetryLetsNoRequestGoWhileARefusalIsRead(t *testing.T) {
	for _, tel := range []bool{false, true} {
		t.Run(fmt.Sprint("telemetry=", tel), func(t *testing.T) {
			var mu sync.Mutex
			var bodyAt, otherAt time.Time
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/v1/contacts/con_00000000000000000000000001":
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(503)
					w.(http.Flusher).Flush() // headers now, body in 1 s
					time.Sleep(time.Second)
					fmt.Fprint(w, `{"type":"about:blank","status":503,"code":"OVERLOADED","retryAfterMs":3000}`)
					mu.Lock()
					bodyAt = time.Now()
					mu.Unlock()
					return
				case "/v1/contacts/con_00000000000000000000000002":
					mu.Lock()
					otherAt = time.Now()
					mu.Unlock()
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"id":"con_00000000000000000000000003","object":"contact","name":"Ada","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}`)
			}))
			defer srv.Close()
			opts := []bodo.Option{bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(&http.Client{Transport: &http.Transport{}}),
				bodo.WithAPIKey(bodotest.APIKey), bodo.WithMaxRetries(0)}
			if tel {
				r := newRecorded()
				opts = append(opts, otelbodo.WithTelemetry(otelbodo.WithTracerProvider(r.tp), otelbodo.WithMeterProvider(r.mp)))
			}
			c, _ := bodo.NewClient(opts...)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			c.Contacts.Get(ctx, "con_00000000000000000000000003") // ends slow start
			var wg sync.WaitGroup
			wg.Go(func() { c.Contacts.Get(ctx, "con_00000000000000000000000001") })
			time.Sleep(300 * time.Millisecond) // the refusal's headers are in, its body is not
			wg.Go(func() { c.Contacts.Get(ctx, "con_00000000000000000000000002") })
			wg.Wait()
			if !otherAt.IsZero() && otherAt.Before(bodyAt) {
				t.Errorf("a request went out %v before the refusal's body (retryAfterMs 3000) was read", bodyAt.Sub(otherAt).Round(time.Millisecond))
			}
		})
	}
}

// TestAHeldBackAttemptIsNoFailedRequest: an attempt the client held back
// before its request was written (bodo.ErrHeldBack) ends its span without
// an error, with the event EventHeldBack, and records no request duration.
func TestAHeldBackAttemptIsNoFailedRequest(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	reader := metric.NewManualReader()
	heldBack := func(*http.Request, bodo.MiddlewareNext) (*http.Response, error) {
		return nil, fmt.Errorf("gotConn: %w", bodo.ErrHeldBack)
	}
	c, err := bodo.NewClient(bodo.WithBaseURL("https://held.bodo.test"), bodo.WithAPIKey(bodotest.APIKey),
		bodo.WithLogger(slog.New(slog.DiscardHandler)), bodo.WithMaxRetries(0),
		otelbodo.WithTelemetry(otelbodo.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))),
			otelbodo.WithMeterProvider(metric.NewMeterProvider(metric.WithReader(reader)))),
		bodo.WithMiddleware(heldBack))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Contacts.Get(t.Context(), "con_01JBD8Y3K5M7Q2W9X4Z6T1V0AA"); !errors.Is(err, bodo.ErrHeldBack) {
		t.Fatalf("the call: %v, want bodo.ErrHeldBack", err)
	}
	ended := spans.Ended()
	if len(ended) != 1 || ended[0].Status().Code == codes.Error || len(ended[0].Events()) != 1 || ended[0].Events()[0].Name != otelbodo.EventHeldBack {
		for _, sp := range ended {
			t.Logf("span %s: status %v, events %v", sp.Name(), sp.Status(), sp.Events())
		}
		t.Fatalf("%d spans, want one without an error and with the event %s", len(ended), otelbodo.EventHeldBack)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "http.client.request.duration" {
				t.Errorf("a held-back attempt recorded a request duration: %+v", m.Data)
			}
		}
	}
}

// heldHosts numbers the hosts of the tests below, so that each has a
// budget of its own.
var heldHosts atomic.Int64

// TestTheGaugesLevelIsAClosedSet: a server that announces a new policy in
// every answer, and policies named as the client's reasons or a status,
// puts no name or unit of its choosing on the bodo.client.budget.remaining
// gauge: the levels the contract does not name are one _OTHER series per
// unit.
func TestTheGaugesLevelIsAClosedSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		pad := strings.Repeat("x", 64)
		hostile := rt(func(r *http.Request) (*http.Response, error) {
			i := n.Add(1)
			h := http.Header{"Content-Type": {"application/json"},
				"Ratelimit-Policy": {fmt.Sprintf(`"p%d%s";q=100;w=60, "pace";q=5;w=60, "429";q=5;w=60;qu="bytes"`, i, pad)},
				"Ratelimit":        {`"key";r=500;t=10`}}
			body := `{"keyId":"key_1","principal":{"id":"prn_1","type":"user","name":"A"},"organization":{"id":"org_1","name":"O"}}`
			return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		})
		r := newRecorded()
		c := newC(t, fmt.Sprintf("https://held%d.example.test", heldHosts.Add(1)), bodotest.APIKey, hostile, otelbodo.WithMeterProvider(r.mp))
		for range 100 {
			if _, err := c.Me(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		allowed := map[string]bool{"key": true, "write": true, "parallel": true, "principal": true, "org": true,
			"delete": true, "delete-day": true, "egress": true, "_OTHER": true,
			"points": true, "requests": true, "records": true, "concurrent-requests": true}
		d := metricByName(t, r.collect(t), otelbodo.MetricBudgetRemaining).Data.(metricdata.Gauge[float64])
		for _, p := range d.DataPoints {
			level, _ := p.Attributes.Value(otelbodo.AttrLevel)
			unit, _ := p.Attributes.Value(otelbodo.AttrUnit)
			if !allowed[level.AsString()] || !allowed[unit.AsString()] && unit.AsString() != "_OTHER" {
				t.Errorf("a point of bodo.budget.level %.80q, unit %q: want the contract's levels and units, or _OTHER", level.AsString(), unit.AsString())
			}
		}
	})
}

// TestAHeldSpanKeepsServerStringsShort: a QUOTA_EXHAUSTED naming a 512 KiB
// policy makes every later call of the operation be refused locally; the
// INTERNAL span of each carries no more than a few KiB the server chose.
func TestAHeldSpanKeepsServerStringsShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := strings.Repeat("q", 512<<10)
		hostile := rt(func(r *http.Request) (*http.Response, error) {
			body := fmt.Sprintf(`{"type":"about:blank","code":"QUOTA_EXHAUSTED","policy":%q,"resetsAt":%q}`,
				policy, time.Now().Add(23*time.Hour).UTC().Format(time.RFC3339))
			h := http.Header{"Content-Type": {"application/problem+json"}}
			return &http.Response{StatusCode: 429, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		})
		r := newRecorded()
		c := newC(t, fmt.Sprintf("https://held%d.example.test", heldHosts.Add(1)), bodotest.APIKey, hostile, otelbodo.WithTracerProvider(r.tp))
		const calls = 20
		for range calls {
			_, _ = c.Me(context.Background())
		}
		held, bytes := 0, 0
		for _, sp := range r.spans.Ended() {
			if sp.SpanKind().String() != "internal" {
				continue
			}
			held++
			bytes += len(sp.Status().Description)
			for _, ev := range sp.Events() {
				for _, kv := range ev.Attributes {
					bytes += len(kv.Value.Emit())
				}
			}
		}
		if held > 0 && bytes/held > 4<<10 {
			t.Errorf("%d calls refused locally: %d held spans carry %d MiB of server strings (%d KiB each)", calls, held, bytes>>20, bytes/held>>10)
		}
	})
}

// TestServerStringsOnSpansAreUTF8: a refusal whose policy the span must
// cut (over 256 bytes) in the middle of a character still gives every
// attribute and status of every span as UTF-8, which OTLP needs to export
// the batch at all.
func TestServerStringsOnSpansAreUTF8(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := "x" + strings.Repeat("ü", 200)
		hostile := rt(func(r *http.Request) (*http.Response, error) {
			body := fmt.Sprintf(`{"type":"about:blank","status":429,"code":"QUOTA_EXHAUSTED","policy":%q,"resetsAt":%q}`,
				policy, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
			h := http.Header{"Content-Type": {"application/problem+json"}}
			return &http.Response{StatusCode: 429, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		})
		r := newRecorded()
		c := newC(t, fmt.Sprintf("https://held%d.example.test", heldHosts.Add(1)), bodotest.APIKey, hostile, otelbodo.WithTracerProvider(r.tp))
		for range 2 { // the second is refused locally: a held span
			_, _ = c.Me(context.Background())
		}
		cut := false
		for _, sp := range r.spans.Ended() {
			values := []string{sp.Status().Description}
			for _, kv := range sp.Attributes() {
				values = append(values, kv.Value.Emit())
			}
			for _, ev := range sp.Events() {
				for _, kv := range ev.Attributes {
					values = append(values, kv.Value.Emit())
				}
			}
			for _, v := range values {
				if !utf8.ValidString(v) {
					t.Errorf("span %s carries %q, which is not UTF-8", sp.Name(), v[max(len(v)-8, 0):])
				}
				cut = cut || strings.HasPrefix(v, "xü") && len(v) <= 256
			}
		}
		if !cut {
			t.Error("no span carries the policy, cut to 256 bytes")
		}
	})
}

// TestAPanickingTransportEndsTheSpan: a transport that panics (recovered
// by the caller) ends the attempt's span as failed and leaves nothing
// counted in flight.
func TestAPanickingTransportEndsTheSpan(t *testing.T) {
	panicking := rt(func(*http.Request) (*http.Response, error) { panic("the transport failed") })
	r := newRecorded()
	c := newC(t, "https://panic.example.test", bodotest.APIKey, panicking,
		otelbodo.WithTracerProvider(r.tp), otelbodo.WithMeterProvider(r.mp))
	func() {
		defer func() { _ = recover() }()
		_, _ = c.Me(context.Background(), bodo.WithMaxRetries(0))
	}()
	if started, ended := len(r.spans.Started()), len(r.spans.Ended()); started != 1 || ended != 1 {
		t.Errorf("%d spans started, %d ended; want one of each", started, ended)
	} else if sp := r.spans.Ended()[0]; sp.Status().Code != codes.Error {
		t.Errorf("the span's status is %v, want an error", sp.Status())
	}
	all := func(map[attribute.Key]attribute.Value) bool { return true }
	if n := sumWhere(t, metricByName(t, r.collect(t), otelbodo.MetricInFlight), all); n != 0 {
		t.Errorf("%d in flight after the call ended", n)
	}
}
