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
// The module stands apart from the SDK's, so that a program without
// OpenTelemetry keeps a lean module graph.
package otelbodo

import (
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
// client's calls in a span and records its metrics. Metrics lists the
// names of the metrics; the spans are named by the operationId.
func WithTelemetry(opts ...Option) bodo.Option {
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
	t.instruments = newInstruments(c.meters.Meter(ScopeName, metric.WithInstrumentationVersion(bodo.Version)), t.observe)
	return bodo.WithMiddleware(t.attempt)
}
