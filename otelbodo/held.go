package otelbodo

import (
	"net/url"
	"time"

	"github.com/bodo-app/bodo-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ErrorBudgetHold is the error.type of a call the client's budget held or
// refused and never sent: held until its context ended, refused because
// the wait the server asked for is longer than MaxRetryWait, or because a
// quota is exhausted. AttrHeldBy names the level or reason.
const ErrorBudgetHold = "budget_hold"

// held is the client's WithOnWait hook. A wait that ended in a request is
// told by the attempt's span; an attempt the budget never let go gets a
// span of its own, INTERNAL since no request left, from when it began to
// wait until it failed, and its wait is recorded.
func (t *telemetry) held(ev bodo.WaitEvent) {
	if ev.Err == nil {
		return
	}
	host, _ := serverOf(&url.URL{Host: ev.Host})
	now := time.Now()
	attrs := []attribute.KeyValue{
		semconv.ServerAddress(host),
		AttrOperation.String(ev.Operation),
		semconv.ErrorTypeKey.String(ErrorBudgetHold),
		AttrHeldBy.String(spanValue(ev.Reason)),
	}
	_, span := t.tracer.Start(ev.Context(), ev.Operation, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(now.Add(-ev.Wait)), trace.WithAttributes(append(attrs, AttrBudgetWait.Float64(ev.Wait.Seconds()))...))
	span.RecordError(ev.Err)
	span.SetStatus(codes.Error, spanValue(ev.Err.Error()))
	span.End(trace.WithTimestamp(now))
	attrs[len(attrs)-1] = AttrHeldBy.String(metricValue(ev.Reason))
	t.budgetWait.Record(ev.Context(), ev.Wait.Seconds(), metric.WithAttributes(attrs...))
}
