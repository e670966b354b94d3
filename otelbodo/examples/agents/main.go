// Command agents runs agent goroutines on one API key with OpenTelemetry
// wired in through otelbodo, and draws what the key went through as an SVG
// chart: the points the server accepted per minute against the key's limit,
// the calls waiting for the budget, and the refusals.
//
//	cd otelbodo && go run ./examples/agents -agents 16 -duration 3m -otel stdout -chart agents.svg
//
// -otel stdout prints every span and, every 10 s, the metrics to stdout, as
// the OpenTelemetry SDK's stdout exporters write them; without it nothing is
// exported (the global providers stay the no-op ones). Each agent onboards
// customers, one after another: it creates a contact, reads it, searches for
// it, updates it and counts the contacts. It runs against BODO_BASE_URL with
// BODO_API_KEY, or, when BODO_BASE_URL is unset, against a bodotest server
// (the in-memory bodo API) on loopback with the -profile given.
//
// It uses only the public API (packages bodo, bodotest and otelbodo).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/bodo-app/bodo-go/otelbodo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// config is what the flags set.
type config struct {
	agents   int
	duration time.Duration
	otel     string // "" or stdout
	chart    string // where the SVG goes; "" for none
	profile  string
	seed     uint64
}

// target is the server the agents call.
type target struct {
	url       string
	key       string // empty: NewClient reads BODO_API_KEY
	transport http.RoundTripper
}

func main() {
	log.SetFlags(0)
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	t := target{url: os.Getenv("BODO_BASE_URL"), transport: http.DefaultTransport}
	if t.url == "" {
		srv := bodotest.NewServer(bodotest.WithProfile(bodotest.Profile(cfg.profile)))
		if err := srv.Start(); err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		t = target{url: srv.URL, key: bodotest.APIKey, transport: srv.Client().Transport}
	}
	if err := run(ctx, cfg, t, os.Stdout, os.Stderr); err != nil {
		log.Fatal(err)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("agents", flag.ContinueOnError)
	fs.IntVar(&cfg.agents, "agents", 16, "agent goroutines sharing the key")
	fs.DurationVar(&cfg.duration, "duration", 3*time.Minute, "how long to run")
	fs.StringVar(&cfg.otel, "otel", "", "where to export traces and metrics: stdout, or empty for nowhere")
	fs.StringVar(&cfg.chart, "chart", "agents.svg", "the SVG chart of the run to write; empty for none")
	fs.StringVar(&cfg.profile, "profile", string(bodotest.Documented), "the bodotest server's profile, without BODO_BASE_URL")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the agents' choices")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	switch {
	case fs.NArg() > 0:
		return config{}, fmt.Errorf("agents takes no arguments, only flags: %q", fs.Args())
	case cfg.agents < 1:
		return config{}, fmt.Errorf("-agents must be at least 1, not %d", cfg.agents)
	case cfg.duration <= 0:
		return config{}, fmt.Errorf("-duration must be positive, not %v", cfg.duration)
	case cfg.otel != "" && cfg.otel != "stdout":
		return config{}, fmt.Errorf("-otel must be stdout or empty, not %q", cfg.otel)
	}
	return cfg, nil
}

// run runs the agents on t for cfg.duration, exporting to stdout when
// cfg.otel says so, and writes the chart.
func run(ctx context.Context, cfg config, t target, stdout, stderr io.Writer) error {
	if cfg.otel == "stdout" {
		shutdown, err := exportTo(stdout)
		if err != nil {
			return err
		}
		defer shutdown()
	}
	rec := &recorder{}
	opts := []bodo.Option{
		bodo.WithBaseURL(t.url),
		bodo.WithHTTPClient(&http.Client{Transport: t.transport}),
		bodo.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		otelbodo.WithTelemetry(),
		bodo.WithMiddleware(rec.attempt),
	}
	if t.key != "" {
		opts = append(opts, bodo.WithAPIKey(t.key))
	}
	client, err := bodo.NewClient(opts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%d agents on one key against %s for %v\n", cfg.agents, t.url, cfg.duration)
	runCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range cfg.agents {
		a := &agent{id: i, client: client, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i)))}
		wg.Go(func() { a.run(runCtx) })
	}
	samples := rec.sample(runCtx, client)
	wg.Wait()
	s := <-samples
	fmt.Fprintf(stderr, "%d points accepted, %d refusals, %d calls waited\n", rec.points, rec.refusals, client.Budget().Waits)
	if cfg.chart == "" {
		return nil
	}
	f, err := os.Create(cfg.chart)
	if err != nil {
		return err
	}
	if err := writeChart(f, s); err != nil {
		_ = f.Close()
		return err
	}
	fmt.Fprintf(stderr, "chart: %s\n", cfg.chart)
	return f.Close()
}

// exportTo sets the global providers to the stdout exporters on w, the
// metrics read every 10 s, and returns what flushes and stops them.
func exportTo(w io.Writer) (func(), error) {
	w = &lockedWriter{w: w} // the two exporters write from goroutines of their own
	spans, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return nil, err
	}
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics, sdkmetric.WithInterval(10*time.Second))))
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
		_ = mp.Shutdown(ctx)
	}, nil
}

// agent onboards customers one after another.
type agent struct {
	id     int
	client *bodo.Client
	rng    *rand.Rand
	seq    int
}

// run onboards customers until ctx ends.
func (a *agent) run(ctx context.Context) {
	for ctx.Err() == nil {
		a.seq++
		name := fmt.Sprintf("customer-%02d-%06d", a.id, a.seq)
		c := a.client
		ct, err := c.Contacts.Create(ctx, bodo.ContactCreate{Name: name})
		if err != nil {
			pause(ctx, err)
			continue
		}
		steps := []func() error{
			func() error { _, err := c.Contacts.Get(ctx, ct.ID); return err },
			func() error {
				_, err := c.Contacts.List(ctx, &bodo.ListContactsParams{Q: bodo.String(name), Limit: bodo.Int(5)})
				return err
			},
			func() error {
				_, err := c.Contacts.Update(ctx, ct.ID, bodo.ContactUpdate{Phone: bodo.String(fmt.Sprintf("+49 30 %06d", a.rng.IntN(1e6)))})
				return err
			},
			func() error { _, err := c.Contacts.Count(ctx, nil); return err },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				pause(ctx, err)
			}
		}
	}
}

// pause waits as long as a refusal asked, when it named a wait.
func pause(ctx context.Context, err error) {
	var e *bodo.Error
	if !errors.As(err, &e) || e.RetryAfter <= 0 {
		return
	}
	t := time.NewTimer(e.RetryAfter)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// lockedWriter lets one Write through at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
