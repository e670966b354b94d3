package otelbodo

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
)

// The names of the metrics besides http.client.request.duration.
const (
	MetricBudgetWait      = "bodo.client.budget.wait.duration"
	MetricRetries         = "bodo.client.retries"
	MetricRefusals        = "bodo.client.refusals"
	MetricInFlight        = "bodo.client.in_flight"
	MetricBudgetRemaining = "bodo.client.budget.remaining"
	MetricBudgetWaiting   = "bodo.client.budget.waiting"
)

// The attributes of this package's own, beside the semantic conventions'.
const (
	AttrOperation     = attribute.Key("bodo.operation")      // operationId
	AttrHeldBy        = attribute.Key("bodo.budget.held_by") // the level or reason that held an attempt
	AttrBudgetWait    = attribute.Key("bodo.budget.wait")    // seconds this attempt waited for the budget
	AttrCallWait      = attribute.Key("bodo.budget.call_wait")
	AttrRetryReason   = attribute.Key("bodo.retry.reason")
	AttrRefusalCode   = attribute.Key("bodo.refusal.code")
	AttrRefusalPolicy = attribute.Key("bodo.refusal.policy")
	AttrLevel         = attribute.Key("bodo.budget.level")
	AttrUnit          = attribute.Key("bodo.budget.unit")
	AttrKeyID         = attribute.Key("bodo.key.id") // the gauges' key: bodo.Client.KeyID, never the key
)

// EventHeldBack is the event of an attempt's span whose request the client
// held back at its last moment (bodo.ErrHeldBack): nothing was written, so
// the span has no error and the attempt no request duration.
const EventHeldBack = "bodo.held_back"

// budgetWaitBounds are the buckets of the budget's waits, in seconds: from
// none to past the minute of a level's window.
var budgetWaitBounds = []float64{0, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// instruments are the metrics of one WithTelemetry.
type instruments struct {
	duration   httpconv.ClientRequestDuration
	budgetWait metric.Float64Histogram
	retries    metric.Int64Counter
	refusals   metric.Int64Counter
	inFlight   metric.Int64UpDownCounter
}

// newInstruments makes the instruments on m and registers observe for the
// gauges of the budget, returning the registration (nil when there is
// none). An instrument m cannot make is reported to otel.Handle and records
// nothing.
func newInstruments(m metric.Meter, observe func(metric.Observer, metric.Float64Observable, metric.Int64Observable)) (instruments, metric.Registration) {
	var in instruments
	var err error
	report := func(e error) {
		if e != nil {
			otel.Handle(e)
		}
	}
	in.duration, err = httpconv.NewClientRequestDuration(m)
	report(err)
	in.budgetWait, err = m.Float64Histogram(MetricBudgetWait, metric.WithUnit("s"),
		metric.WithDescription("How long an attempt waited for the client's budget before it was sent."),
		metric.WithExplicitBucketBoundaries(budgetWaitBounds...))
	report(err)
	in.retries, err = m.Int64Counter(MetricRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Attempts sent again after a refusal, an overload or a lost answer."))
	report(err)
	in.refusals, err = m.Int64Counter(MetricRefusals, metric.WithUnit("{refusal}"),
		metric.WithDescription("429 and 503 answers of the server."))
	report(err)
	in.inFlight, err = m.Int64UpDownCounter(MetricInFlight, metric.WithUnit("{request}"),
		metric.WithDescription("Attempts sent and not yet answered."))
	report(err)
	remaining, err := m.Float64ObservableGauge(MetricBudgetRemaining, metric.WithUnit("{unit}"),
		metric.WithDescription("What the client believes is left of each level of the key, in the level's unit (bodo.budget.unit)."))
	report(err)
	waiting, err := m.Int64ObservableGauge(MetricBudgetWaiting, metric.WithUnit("{call}"),
		metric.WithDescription("Calls waiting for the budget."))
	report(err)
	var reg metric.Registration
	if remaining != nil && waiting != nil {
		reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			observe(o, remaining, waiting)
			return nil
		}, remaining, waiting)
		report(err)
	}
	return in, reg
}
