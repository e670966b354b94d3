package otelbodo

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bodo-app/bodo-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// telemetry is one WithTelemetry: its tracer, propagator and instruments,
// and the budgets the gauges read.
type telemetry struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	instruments
	gauged
}

// attempt is the middleware: a span around the attempt, its trace context
// on the request, and its metrics.
func (t *telemetry) attempt(req *http.Request, next bodo.MiddlewareNext) (*http.Response, error) {
	a, ok := bodo.AttemptFrom(req.Context())
	if !ok {
		return next(req)
	}
	host, port := serverOf(req.URL)
	t.gauged.remember(req.Context(), a.Client, host)
	server := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(req.Method),
		semconv.ServerAddress(host),
		semconv.ServerPort(port),
		semconv.URLTemplate(a.PathTemplate),
	}
	attrs := append(server[:len(server):len(server)],
		semconv.URLFull(redactedURL(req.URL)),
		AttrOperation.String(a.Operation),
		AttrBudgetWait.Float64(a.Wait.Seconds()),
		AttrCallWait.Float64(a.CallWait.Seconds()),
	)
	if a.HeldBy != "" {
		attrs = append(attrs, AttrHeldBy.String(spanValue(a.HeldBy)))
	}
	if a.Number > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(a.Number-1), AttrRetryReason.String(spanValue(a.RetryReason)))
	}
	ctx, span := t.tracer.Start(req.Context(), a.Operation, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if a.Wait > 0 {
		span.AddEvent("bodo.budget.wait", trace.WithTimestamp(time.Now().Add(-a.Wait)), trace.WithAttributes(
			AttrHeldBy.String(spanValue(a.HeldBy)), AttrBudgetWait.Float64(a.Wait.Seconds())))
	}
	t.record(ctx, a, host)

	req = req.Clone(ctx) // the attempts share the headers
	t.propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	inFlight := metric.WithAttributes(semconv.ServerAddress(host))
	t.inFlight.Add(ctx, 1, inFlight)
	returned := false
	defer func() {
		if !returned { // next panicked: the span and the count in flight end with it
			t.inFlight.Add(ctx, -1, inFlight)
			span.SetAttributes(semconv.ErrorTypeKey.String("panic"))
			span.SetStatus(codes.Error, "panic")
			span.End()
		}
	}()
	start := time.Now()
	resp, err := next(req)
	returned = true
	elapsed := time.Since(start)
	t.inFlight.Add(ctx, -1, inFlight)

	outcome := server
	switch {
	case errors.Is(err, bodo.ErrHeldBack):
		// Nothing was written: no request failed, and none took time.
		span.AddEvent(EventHeldBack)
		span.End()
		return resp, err
	case err != nil:
		errType := errorType(err)
		outcome = append(outcome, errType)
		span.SetAttributes(errType)
		recorded := redactedErr(err, req.URL)
		span.RecordError(recorded)
		span.SetStatus(codes.Error, recorded.Error())
		span.End()
	case resp == nil:
		// A middleware after this one answered nothing, which the client
		// makes its error.
		errType := semconv.ErrorTypeKey.String("no_response")
		outcome = append(outcome, errType)
		span.SetAttributes(errType)
		span.SetStatus(codes.Error, "no response")
		span.End()
	default:
		status := semconv.HTTPResponseStatusCode(resp.StatusCode)
		outcome = append(outcome, status)
		span.SetAttributes(status)
		if resp.StatusCode >= 400 {
			errType := semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode))
			outcome = append(outcome, errType)
			span.SetAttributes(errType)
			span.SetStatus(codes.Error, "")
		}
		body := &spanBody{ReadCloser: resp.Body, span: span}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			// The refusal's code and policy come from its body as the
			// client reads it: read here, the client would learn of the
			// refusal's wait only once the whole body was in, and let
			// requests go meanwhile.
			body.refusal = &refusal{t: t, ctx: ctx, attrs: []attribute.KeyValue{semconv.ServerAddress(host), status}}
		}
		if resp.Body == nil || resp.Body == http.NoBody {
			body.end(nil)
		} else {
			resp.Body = body
		}
	}
	// The duration ends with the answer's headers, as net/http's Do
	// returns; the span ends with its body.
	t.duration.Inst().Record(ctx, elapsed.Seconds(), metric.WithAttributes(outcome...))
	return resp, err
}

// record counts what the client did before the attempt: its wait for the
// budget, and the retry it is.
func (t *telemetry) record(ctx context.Context, a bodo.Attempt, host string) {
	wait := []attribute.KeyValue{semconv.ServerAddress(host), AttrOperation.String(a.Operation)}
	if a.HeldBy != "" {
		wait = append(wait, AttrHeldBy.String(metricValue(a.HeldBy)))
	}
	t.budgetWait.Record(ctx, a.Wait.Seconds(), metric.WithAttributes(wait...))
	if a.Number > 1 {
		t.retries.Add(ctx, 1, metric.WithAttributes(semconv.ServerAddress(host), AttrRetryReason.String(metricValue(a.RetryReason))))
	}
}

// serverOf is the server.address and server.port of u.
func serverOf(u *url.URL) (string, int) {
	host := u.Hostname()
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return host, p
	}
	if u.Scheme == "http" {
		return host, 80
	}
	return host, 443
}

// errorType is the error.type of a failed attempt: the type of the error
// under the *url.Error of net/http, or "timeout" for a deadline.
func errorType(err error) attribute.KeyValue {
	if errors.Is(err, context.DeadlineExceeded) {
		return semconv.ErrorTypeKey.String("timeout")
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	return semconv.ErrorType(err)
}
