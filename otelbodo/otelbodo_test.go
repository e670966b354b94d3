package otelbodo_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/bodo-app/bodo-go/otelbodo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
	"go.opentelemetry.io/otel/trace"
)

// seen is what the server saw: the traceparent of every request, and
// which POSTs it got.
type seen struct {
	mu           sync.Mutex
	traceparents []string
	posts        int
}

// faults answers the third create 429 OVERLOADED and the sixth 503
// OVERLOADED, and notes every request's traceparent.
func (s *seen) faults(r *http.Request) bodotest.Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traceparents = append(s.traceparents, r.Header.Get("traceparent"))
	if r.Method != http.MethodPost {
		return bodotest.Fault{}
	}
	s.posts++
	switch s.posts {
	case 3:
		return bodotest.Fault{Overloaded: http.StatusTooManyRequests, RetryAfter: 2 * time.Second}
	case 6:
		return bodotest.Fault{Overloaded: http.StatusServiceUnavailable, RetryAfter: time.Second}
	}
	return bodotest.Fault{}
}

// run makes a client with telemetry on a server whose write level holds 6
// writes a minute, creates 10 contacts from 10 goroutines, and returns the
// spans and metrics.
func run(t *testing.T, s *seen) (*bodotest.Server, []sdktrace.ReadOnlySpan, metricdata.ResourceMetrics) {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := metric.NewManualReader()
	mp := metric.NewMeterProvider(metric.WithReader(reader))
	srv := bodotest.NewServer(bodotest.WithLimitFactor(0.1), bodotest.WithFaults(s.faults))
	t.Cleanup(srv.Close)
	client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(bodotest.APIKey), bodo.WithLogger(slog.New(slog.DiscardHandler)),
		otelbodo.WithTelemetry(otelbodo.WithTracerProvider(tp), otelbodo.WithMeterProvider(mp)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			if _, err := client.Contacts.Create(ctx, bodo.ContactCreate{Name: "Agent " + string(rune('A'+i))}); err != nil {
				t.Errorf("create %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return srv, spans.Ended(), rm
}

func attrsOf(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestSpansOfARunWithRefusalsRetriesAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s seen
		srv, spans, _ := run(t, &s)
		u, _ := url.Parse(srv.URL)
		// The names the spans carry are the conventions' own.
		for key, want := range map[attribute.Key]string{
			semconv.HTTPRequestMethodKey:      "http.request.method",
			semconv.ServerAddressKey:          "server.address",
			semconv.ServerPortKey:             "server.port",
			semconv.URLTemplateKey:            "url.template",
			semconv.HTTPResponseStatusCodeKey: "http.response.status_code",
			semconv.ErrorTypeKey:              "error.type",
			semconv.HTTPRequestResendCountKey: "http.request.resend_count",
		} {
			if string(key) != want {
				t.Errorf("semconv names %q %q", want, key)
			}
		}
		var creates, refused429, refused503, resent, waited int
		for _, sp := range spans {
			a := attrsOf(sp.Attributes())
			if sp.SpanKind() != trace.SpanKindClient {
				t.Errorf("span %s is %v, not a client span", sp.Name(), sp.SpanKind())
			}
			if a[semconv.ServerAddressKey].AsString() != u.Hostname() || a[semconv.ServerPortKey].AsInt64() != 443 {
				t.Errorf("span %s: server %v:%v, want %s:443", sp.Name(), a[semconv.ServerAddressKey], a[semconv.ServerPortKey], u.Hostname())
			}
			if sp.Name() != "createContact" {
				continue
			}
			creates++
			if a[semconv.HTTPRequestMethodKey].AsString() != "POST" || a[semconv.URLTemplateKey].AsString() != "/v1/contacts" {
				t.Errorf("createContact span: %v", sp.Attributes())
			}
			switch a[semconv.HTTPResponseStatusCodeKey].AsInt64() {
			case 429:
				refused429++
				if a[semconv.ErrorTypeKey].AsString() != "429" || a[otelbodo.AttrRefusalCode].AsString() != "OVERLOADED" {
					t.Errorf("429 span: %v", sp.Attributes())
				}
			case 503:
				refused503++
			case 201:
				if _, ok := a[semconv.ErrorTypeKey]; ok {
					t.Errorf("a 201 span has error.type: %v", sp.Attributes())
				}
			}
			if n, ok := a[semconv.HTTPRequestResendCountKey]; ok {
				resent++
				if n.AsInt64() != 1 || a[otelbodo.AttrRetryReason].AsString() != "OVERLOADED" {
					t.Errorf("resent span: %v", sp.Attributes())
				}
			}
			if a[otelbodo.AttrBudgetWait].AsFloat64() > 0 {
				waited++
				if a[otelbodo.AttrHeldBy].AsString() == "" || len(sp.Events()) != 1 || sp.Events()[0].Name != "bodo.budget.wait" {
					t.Errorf("a span that waited says not what held it: %v %v", sp.Attributes(), sp.Events())
				}
			}
		}
		if creates != 12 || refused429 != 1 || refused503 != 1 || resent != 2 {
			t.Errorf("%d createContact spans (want 12), %d of 429 (want 1), %d of 503 (want 1), %d resent (want 2)", creates, refused429, refused503, resent)
		}
		if waited == 0 {
			t.Error("no span says it waited for the budget, with 10 writes on a level of 6 a minute")
		}
		// Every request carried the trace context of its own span.
		sent := strings.Join(s.traceparents, "\n")
		for _, sp := range spans {
			sc := sp.SpanContext()
			if !strings.Contains(sent, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01") {
				t.Errorf("no request carried the traceparent of span %s %s", sp.Name(), sc.SpanID())
			}
		}
		if len(s.traceparents) != len(spans) {
			t.Errorf("%d requests, %d spans", len(s.traceparents), len(spans))
		}
	})
}

// metricByName finds a metric of the run.
func metricByName(t *testing.T, rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelbodo.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return metricdata.Metrics{}
}

func sumWhere(t *testing.T, m metricdata.Metrics, where func(map[attribute.Key]attribute.Value) bool) int64 {
	t.Helper()
	var n int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if where(attrsOf(p.Attributes.ToSlice())) {
				n += p.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if where(attrsOf(p.Attributes.ToSlice())) {
				n += int64(p.Count)
			}
		}
	default:
		t.Fatalf("%s is a %T", m.Name, m.Data)
	}
	return n
}

func TestMetricsOfARunWithRefusalsRetriesAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s seen
		_, spans, rm := run(t, &s)
		if (httpconv.ClientRequestDuration{}).Name() != "http.client.request.duration" {
			t.Fatal("the conventions renamed the duration")
		}
		duration := metricByName(t, rm, httpconv.ClientRequestDuration{}.Name())
		if duration.Unit != "s" {
			t.Errorf("duration unit %q", duration.Unit)
		}
		all := func(map[attribute.Key]attribute.Value) bool { return true }
		if n := sumWhere(t, duration, all); n != int64(len(spans)) {
			t.Errorf("%d durations, %d attempts", n, len(spans))
		}
		required := func(a map[attribute.Key]attribute.Value) bool {
			_, m := a[semconv.HTTPRequestMethodKey]
			_, h := a[semconv.ServerAddressKey]
			_, p := a[semconv.ServerPortKey]
			_, st := a[semconv.HTTPResponseStatusCodeKey]
			return m && h && p && st
		}
		if n := sumWhere(t, duration, required); n != int64(len(spans)) {
			t.Errorf("%d of %d durations have the required attributes", n, len(spans))
		}
		if n := sumWhere(t, duration, func(a map[attribute.Key]attribute.Value) bool {
			return a[semconv.HTTPResponseStatusCodeKey].AsInt64() == 503 && a[semconv.ErrorTypeKey].AsString() == "503"
		}); n != 1 {
			t.Errorf("%d durations of a 503 with error.type 503", n)
		}

		retries := metricByName(t, rm, otelbodo.MetricRetries)
		if n := sumWhere(t, retries, func(a map[attribute.Key]attribute.Value) bool {
			return a[otelbodo.AttrRetryReason].AsString() == "OVERLOADED"
		}); n != 2 {
			t.Errorf("%d retries for OVERLOADED, want 2", n)
		}
		refusals := metricByName(t, rm, otelbodo.MetricRefusals)
		for _, status := range []int64{429, 503} {
			if n := sumWhere(t, refusals, func(a map[attribute.Key]attribute.Value) bool {
				return a[otelbodo.AttrRefusalCode].AsString() == "OVERLOADED" && a[semconv.HTTPResponseStatusCodeKey].AsInt64() == status
			}); n != 1 {
				t.Errorf("%d refusals %d OVERLOADED, want 1", n, status)
			}
		}
		wait := metricByName(t, rm, otelbodo.MetricBudgetWait)
		if wait.Unit != "s" {
			t.Errorf("budget wait unit %q", wait.Unit)
		}
		var heldFor float64
		for _, p := range wait.Data.(metricdata.Histogram[float64]).DataPoints {
			if held, ok := p.Attributes.Value(otelbodo.AttrHeldBy); ok && held.AsString() != "" {
				heldFor += p.Sum
			}
		}
		if heldFor <= 0 {
			t.Errorf("no budget wait by what held it: %+v", wait.Data)
		}
		if n := sumWhere(t, metricByName(t, rm, otelbodo.MetricInFlight), all); n != 0 {
			t.Errorf("%d in flight after the run", n)
		}
		remaining := metricByName(t, rm, otelbodo.MetricBudgetRemaining).Data.(metricdata.Gauge[float64])
		levels := map[string]bool{}
		for _, p := range remaining.DataPoints {
			l, _ := p.Attributes.Value(otelbodo.AttrLevel)
			levels[l.AsString()] = true
		}
		if !levels["key"] || !levels["write"] {
			t.Errorf("remaining of levels %v, want key and write among them", levels)
		}
		if w := metricByName(t, rm, otelbodo.MetricBudgetWaiting).Data.(metricdata.Gauge[int64]); len(w.DataPoints) != 1 || w.DataPoints[0].Value != 0 {
			t.Errorf("calls waiting after the run: %+v", w.DataPoints)
		}
	})
}

func TestAttemptSpanIsAChildOfTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		srv := bodotest.NewServer(bodotest.WithoutLimits())
		defer srv.Close()
		client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
			bodo.WithAPIKey(bodotest.APIKey), otelbodo.WithTelemetry(otelbodo.WithTracerProvider(tp)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, parent := tp.Tracer("test").Start(context.Background(), "agent step")
		if _, err := client.Me(ctx); err != nil {
			t.Fatal(err)
		}
		parent.End()
		var me sdktrace.ReadOnlySpan
		for _, sp := range spans.Ended() {
			if sp.Name() == "getMe" {
				me = sp
			}
		}
		if me == nil || me.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Fatalf("getMe span %v is not a child of the caller's", me)
		}
	})
}

func TestNothingRecordedWithoutAProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s seen
		srv := bodotest.NewServer(bodotest.WithoutLimits(), bodotest.WithFaults(s.faults))
		defer srv.Close()
		client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
			bodo.WithAPIKey(bodotest.APIKey), otelbodo.WithTelemetry())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Me(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(s.traceparents) != 1 || s.traceparents[0] != "" {
			t.Errorf("without a provider the requests carried %q", s.traceparents)
		}
	})
}
