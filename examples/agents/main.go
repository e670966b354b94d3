// Command agents runs many agent goroutines on one API key with a realistic
// mix of calls (reads, searches, counts, creates, updates, deletes, invoices
// and payments) and reports what the key got through.
//
//	go run ./examples/agents -agents 16 -duration 1m
//
// It runs against BODO_BASE_URL with BODO_API_KEY, or against the embedded
// sandbox on loopback when BODO_BASE_URL is unset. On a terminal it shows a
// live progress line; at the end it prints a summary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/agents"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

func main() {
	n := flag.Int("agents", 16, "agent goroutines sharing the key")
	duration := flag.Duration("duration", time.Minute, "how long to run")
	noBudget := flag.Bool("no-budget", false, "turn the client's budget off (retries only)")
	seed := flag.Uint64("seed", 1, "seed of the agents' choices")
	flag.Parse()
	log.SetFlags(0)
	if err := run(*n, *duration, *noBudget, *seed); err != nil {
		log.Fatal(err)
	}
}

func run(n int, duration time.Duration, noBudget bool, seed uint64) error {
	if n < 1 || duration <= 0 {
		return errors.New("agents: -agents must be at least 1 and -duration positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	stats := agents.NewStats()
	opts := []bodo.Option{
		bodo.WithHTTPClient(&http.Client{Transport: stats.Transport(http.DefaultTransport)}),
		bodo.WithLogger(slog.New(slog.DiscardHandler)),
	}
	var srv *sandbox.Server
	target := os.Getenv("BODO_BASE_URL")
	if target == "" {
		srv = sandbox.New()
		url, closeFn, err := serve(srv)
		if err != nil {
			return err
		}
		defer closeFn()
		target = url + " (embedded sandbox)"
		opts = append(opts, bodo.WithBaseURL(url), bodo.WithAPIKey(sandbox.TestKey))
	}
	if noBudget {
		opts = append(opts, bodo.WithoutBudget())
	}
	client, err := bodo.NewClient(opts...)
	if err != nil {
		return err
	}
	fmt.Printf("%d agents on one key against %s for %v (budget %s)\n", n, target, duration, onOff(!noBudget))

	runCtx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		agents.Run(runCtx, n, client, stats, seed)
		<-runCtx.Done() // agents whose next turn is past the end stop early; the run still lasts its time
		close(done)
	}()
	if isTerminal(os.Stdout) {
		progress(done, start, client, stats)
	} else {
		<-done
	}
	summary(time.Since(start), client, stats, srv)
	return nil
}

// progress redraws one line twice a second until done.
func progress(done <-chan struct{}, start time.Time, client *bodo.Client, stats *agents.Stats) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	type sample struct {
		at     time.Time
		points int
	}
	window := []sample{{start, 0}}
	for {
		select {
		case <-done:
			fmt.Print("\r\033[K")
			return
		case <-tick.C:
			c := stats.Snapshot()
			b := client.Budget()
			now := time.Now()
			window = append(window, sample{now, c.Points})
			for len(window) > 2 && now.Sub(window[1].at) >= time.Minute {
				window = window[1:]
			}
			first := window[0]
			perMin := float64(c.Points-first.points) / max(now.Sub(first.at).Minutes(), 1.0/60)
			fmt.Printf("\r\033[K%5.0fs  %5.0f points/min over the last %2.0fs (limit %d/min, capacity %d)  %d calls  %d × 429  %d waiting  %d in flight",
				now.Sub(start).Seconds(), perMin, now.Sub(first.at).Seconds(), keyQuota(b), keyCapacity(b), c.Calls, c.Count429(), b.Waiting, b.InFlight)
		}
	}
}

func summary(elapsed time.Duration, client *bodo.Client, stats *agents.Stats, srv *sandbox.Server) {
	c := stats.Snapshot()
	b := client.Budget()
	allowance := 0
	for _, l := range b.Levels {
		if l.Name == "key" {
			allowance = l.Capacity + int(float64(l.Quota)*elapsed.Seconds()/l.Window.Seconds())
		}
	}
	fmt.Printf("ran %v\n", elapsed.Round(time.Millisecond))
	fmt.Printf("  calls           %d (%d ok)\n", c.Calls, c.OK)
	fmt.Printf("  requests        %d\n", c.Requests)
	fmt.Printf("  points accepted %d of an allowance of %d (capacity + quota over the run): goodput %.1f %%\n",
		c.Points, allowance, 100*float64(c.Points)/float64(max(allowance, 1)))
	fmt.Printf("  429s            %d (%.2f %% of requests)%s\n", c.Count429(), 100*float64(c.Count429())/float64(max(c.Requests, 1)), byCode(c.Refusals))
	if srv != nil {
		fmt.Printf("  lockouts        %d\n", srv.Stats(sandbox.TestKey).Lockouts)
	} else {
		fmt.Printf("  lockouts        %d (lockout answers seen)\n", c.Errors["held locally (lockout)"])
	}
	fmt.Printf("  errors          %d%s\n", c.Calls-c.OK, byCode(c.Errors))
	fmt.Printf("  gave up         %d (retries ran out or held locally)\n", c.GaveUp)
	fmt.Printf("  waited          %d calls for %v in all; latency p50 %v, p99 %v\n",
		b.Waits, b.Waited.Round(time.Millisecond), c.Percentile(50).Round(time.Millisecond), c.Percentile(99).Round(time.Millisecond))
	fmt.Printf("  max in flight   %d (adaptive cap now %d, pace %.2f, cuts %d)\n", c.MaxFlight, b.InFlightCap, b.Pace, b.Cuts)
}

func byCode(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	s := ":"
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s += fmt.Sprintf(" %s %d", k, m[k])
	}
	return s
}

func keyQuota(b bodo.Budget) int {
	for _, l := range b.Levels {
		if l.Name == "key" {
			return int(float64(l.Quota) * time.Minute.Seconds() / l.Window.Seconds())
		}
	}
	return 0
}

func keyCapacity(b bodo.Budget) int {
	for _, l := range b.Levels {
		if l.Name == "key" {
			return l.Capacity
		}
	}
	return 0
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}
