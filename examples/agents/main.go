// Command agents runs many agent goroutines on one API key with a realistic
// mix of calls (reads, searches, counts, creates, updates, deletes, invoices
// created open and paid) and reports what the key got through.
//
//	go run ./examples/agents -agents 16 -duration 1m
//
// It runs against BODO_BASE_URL with BODO_API_KEY, or, when BODO_BASE_URL is
// unset, against a bodotest server (the in-memory bodo API with the
// documented limits) on loopback. On a terminal it shows a live progress
// line; at the end it prints a summary of what it saw: calls and their
// errors, the 429s, the waits, latency, the points the server accepted
// against the key's allowance, and the client's and the server's view of
// the budget. The client's log goes to stderr: every call the budget has
// held for 5 s, once, at INFO, and every refusal at WARN (-log warn or
// -log off for less).
//
// It uses only the public API (packages bodo and bodotest): copy it as a
// start for a program of your own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
)

// config is what the flags set.
type config struct {
	agents   int
	duration time.Duration
	seed     uint64
	log      string // info, warn or off
	noBudget bool
}

// target is the server the agents call.
type target struct {
	url       string
	key       string            // empty: NewClient reads BODO_API_KEY
	transport http.RoundTripper // what sends the requests
	name      string            // how the first line names the server
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
	t.name = t.url
	if t.url == "" {
		srv := bodotest.NewServer()
		if err := srv.Start(); err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		t = target{url: srv.URL, key: bodotest.APIKey, transport: srv.Client().Transport, name: srv.URL + " (bodotest server)"}
	}
	if _, err := run(ctx, cfg, t, os.Stdout, os.Stderr); err != nil {
		log.Fatal(err)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("agents", flag.ContinueOnError)
	fs.IntVar(&cfg.agents, "agents", 16, "agent goroutines sharing the key")
	fs.DurationVar(&cfg.duration, "duration", time.Minute, "how long to run")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the agents' choices")
	fs.StringVar(&cfg.log, "log", "info", "what the client logs to stderr: info (calls held by the budget for 5 s, and refusals), warn (refusals only) or off")
	fs.BoolVar(&cfg.noBudget, "no-budget", false, "turn the client's budget off (the retries stay)")
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
	case cfg.log != "info" && cfg.log != "warn" && cfg.log != "off":
		return config{}, fmt.Errorf("-log must be info, warn or off, not %q", cfg.log)
	}
	return cfg, nil
}

// run runs cfg.agents agents on t for cfg.duration, or until ctx ends, and
// prints the summary to stdout (with a progress line while it runs, when
// stdout is a terminal); the client logs to stderr.
func run(ctx context.Context, cfg config, t target, stdout, stderr io.Writer) (summary, error) {
	con := newConsole(stdout, stderr)
	rec := newRecorder()
	opts := []bodo.Option{
		bodo.WithBaseURL(t.url),
		bodo.WithHTTPClient(&http.Client{Transport: rec.transport(t.transport)}),
		bodo.WithLogger(con.logger(cfg.log)),
		bodo.WithOnRetry(rec.retried),
		bodo.WithOnWait(rec.waited),
	}
	if t.key != "" {
		opts = append(opts, bodo.WithAPIKey(t.key))
	}
	if cfg.noBudget {
		opts = append(opts, bodo.WithoutBudget())
	}
	client, err := bodo.NewClient(opts...)
	if err != nil {
		return summary{}, err
	}
	budget := "on"
	if cfg.noBudget {
		budget = "off"
	}
	con.printf("%d agents on one key against %s for %v (budget %s)\n", cfg.agents, t.name, cfg.duration, budget)

	runCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runAgents(runCtx, cfg.agents, cfg.seed, client, rec)
		<-runCtx.Done() // agents whose next turn falls after the end stop early; the run lasts its time
	}()
	if con.tty {
		con.progress(done, client, rec)
	} else {
		<-done
	}
	s := summarize(ctx, client, rec)
	s.print(stdout)
	return s, nil
}
