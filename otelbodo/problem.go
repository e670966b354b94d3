package otelbodo

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxProblem caps how much of a refusal's body is kept for its code and
// policy.
const maxProblem = 64 << 10

// refusal is a 429 or 503 answer: the span and the refusals metric learn
// its code and policy once the client has read its body (spanBody).
type refusal struct {
	t     *telemetry
	ctx   context.Context
	attrs []attribute.KeyValue // server.address and the status
	head  []byte               // the body's first maxProblem bytes, as read
}

// keep notes what the client read of the body.
func (r *refusal) keep(p []byte) {
	if room := maxProblem - len(r.head); room > 0 {
		r.head = append(r.head, p[:min(len(p), room)]...)
	}
}

// count records the refusal, with the code and policy of its problem body
// on the span as they came and on the metric from the closed set of
// metricValue.
func (r *refusal) count(set func(...attribute.KeyValue)) {
	var p struct {
		Code   string `json:"code"`
		Policy string `json:"policy"`
	}
	_ = json.Unmarshal(r.head, &p)
	attrs := r.attrs
	if p.Code != "" {
		set(AttrRefusalCode.String(spanValue(p.Code)))
		attrs = append(attrs, AttrRefusalCode.String(metricValue(p.Code)))
	}
	if p.Policy != "" {
		set(AttrRefusalPolicy.String(spanValue(p.Policy)))
		attrs = append(attrs, AttrRefusalPolicy.String(metricValue(p.Policy)))
	}
	r.t.refusals.Add(r.ctx, 1, metric.WithAttributes(attrs...))
}
