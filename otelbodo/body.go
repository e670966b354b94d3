package otelbodo

import (
	"io"
	"sync"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// spanBody is a response body that ends the attempt's span when the body
// is read to its end, fails or is closed, as otelhttp's does: a body that
// breaks off after the status line shows as a failed span.
type spanBody struct {
	io.ReadCloser
	span    trace.Span
	refusal *refusal // of a 429 or 503, counted at the end
	once    sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.refusal != nil && n > 0 {
		b.refusal.keep(p[:n])
	}
	switch {
	case err == io.EOF:
		b.end(nil)
	case err != nil:
		b.end(err)
	}
	return n, err
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.end(nil) // closed before its end: the reader wanted no more
	return err
}

// end ends the span once, failed when err is not nil, and counts the
// refusal it carries.
func (b *spanBody) end(err error) {
	b.once.Do(func() {
		if b.refusal != nil {
			b.refusal.count(b.span.SetAttributes)
		}
		if err != nil {
			b.span.SetAttributes(errorType(err))
			b.span.RecordError(err)
			b.span.SetStatus(codes.Error, "the response body broke off: "+err.Error())
		}
		b.span.End()
	})
}
