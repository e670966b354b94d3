// Package otelbodo makes a bodo client report what it does to OpenTelemetry:
// a CLIENT span for every attempt of every call, following the HTTP client
// semantic conventions, and metrics of the requests, of the budget's waits,
// of the retries and refusals, and of what is left of each level of the key.
//
//	client, err := bodo.NewClient(
//		otelbodo.WithTelemetry(),
//	)
//
// It takes the global TracerProvider and MeterProvider unless given others;
// while neither is set, nothing is recorded. Each request carries the W3C
// trace context of its span (traceparent, tracestate).
//
// An attempt's span ends when its response body has been read to the end or
// closed: a body that breaks off makes it a failed span. The
// http.client.request.duration of an attempt ends with the response's
// headers. A call the budget held or refused and never sent (its context
// ended while held, the server's wait was longer than MaxRetryWait, a quota
// is exhausted) is an INTERNAL span from when it began to wait, with
// error.type budget_hold (ErrorBudgetHold) and bodo.budget.held_by.
//
// url.full keeps the query's keys and replaces every value with REDACTED,
// since a search (q) may name a person. The budget gauges tell keys apart
// by bodo.key.id, the client's KeyID, never the key.
//
// The module stands apart from the SDK's, so that a program without
// OpenTelemetry keeps a lean module graph.
package otelbodo

import (
	"context"
	"runtime"
	"weak"

	"github.com/bodo-app/bodo-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/bodo-app/bodo-go/otelbodo"

// Option configures WithTelemetry.
type Option func(*config)

type config struct {
	tracers    trace.TracerProvider
	meters     metric.MeterProvider
	propagator propagation.TextMapPropagator
}

// WithTracerProvider sets where the spans go; the default is the global
// TracerProvider (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracers = tp }
}

// WithMeterProvider sets where the metrics go; the default is the global
// MeterProvider (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meters = mp }
}

// WithPropagator sets how the trace context goes onto each request; the
// default is W3C Trace Context (propagation.TraceContext).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// WithTelemetry returns the bodo.Option that wraps every attempt of a
// client's calls in a span and records its metrics: the Metric constants
// name them, besides the conventions' http.client.request.duration, and
// the values a server chooses go on them only from a closed set (others
// as _OTHER). The spans are named by the operationId.
func WithTelemetry(opts ...Option) bodo.Option {
	return newTelemetry(opts...).option()
}

// newTelemetry is WithTelemetry's state: the tracer, the propagator and the
// instruments its options name.
func newTelemetry(opts ...Option) *telemetry {
	c := config{}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.tracers == nil {
		c.tracers = otel.GetTracerProvider()
	}
	if c.meters == nil {
		c.meters = otel.GetMeterProvider()
	}
	if c.propagator == nil {
		c.propagator = propagation.TraceContext{}
	}
	t := &telemetry{
		tracer:     c.tracers.Tracer(ScopeName, trace.WithInstrumentationVersion(bodo.Version)),
		propagator: c.propagator,
	}
	// The MeterProvider keeps the gauges' callback, which holds t only
	// weakly: once no client uses t, the callback goes with it.
	weakT := weak.Make(t)
	var reg metric.Registration
	t.instruments, reg = newInstruments(c.meters.Meter(ScopeName, metric.WithInstrumentationVersion(bodo.Version)),
		func(o metric.Observer, remaining metric.Float64Observable, waiting metric.Int64Observable) {
			if t := weakT.Value(); t != nil {
				t.gauged.observe(o, remaining, waiting)
			}
		})
	if reg != nil {
		runtime.AddCleanup(t, func(reg metric.Registration) { _ = reg.Unregister() }, reg)
	}
	t.gauged.recording = func(context.Context) bool { return false }
	if t.budgetWait != nil {
		t.gauged.recording = t.budgetWait.Enabled
	}
	return t
}

// option installs t on a client: the middleware around every attempt, and
// the hook that hears of attempts the budget never let go.
func (t *telemetry) option() bodo.Option {
	return bodo.WithOptions(bodo.WithMiddleware(t.attempt), bodo.WithOnWait(t.held))
}
