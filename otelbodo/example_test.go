package otelbodo_test

import (
	"context"
	"fmt"
	"log"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/bodo-app/bodo-go/otelbodo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A client with telemetry reports a CLIENT span for every attempt, named
// by the operation, to the TracerProvider given (or the global one).
func ExampleWithTelemetry() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	srv := bodotest.NewServer()
	defer srv.Close()
	client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL), bodo.WithHTTPClient(srv.Client()),
		bodo.WithAPIKey(bodotest.APIKey), otelbodo.WithTelemetry(otelbodo.WithTracerProvider(tp)))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Me(context.Background()); err != nil {
		log.Fatal(err)
	}
	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), s.SpanKind())
	}
	// Output: getMe client
}
