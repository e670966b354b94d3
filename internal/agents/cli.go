package agents

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// Extension adds flags to the agents program and, once they are parsed,
// client options (the Redis-backed shared budget is one).
type Extension func(fs *flag.FlagSet) func() ([]bodo.Option, error)

// Summary is what -json prints at the end of a run.
type Summary struct {
	Elapsed   time.Duration  `json:"elapsed"`
	Calls     int            `json:"calls"`
	OK        int            `json:"ok"`
	Requests  int            `json:"requests"`
	Points    int            `json:"points"`
	Allowance int            `json:"allowance"`
	Refusals  map[string]int `json:"refusals"`
	Errors    map[string]int `json:"errors"`
	GaveUp    int            `json:"gaveUp"`
	MaxFlight int            `json:"maxInFlight"`
	Slowest   time.Duration  `json:"slowestCall"`
}

// Main is the agents program: N agent goroutines on one key with the mixed
// workload, against BODO_BASE_URL with BODO_API_KEY or the embedded sandbox
// on loopback when BODO_BASE_URL is unset. ext may add flags and options.
func Main(name string, args []string, stdout io.Writer, ext Extension) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	n := fs.Int("agents", 16, "agent goroutines sharing the key")
	duration := fs.Duration("duration", time.Minute, "how long to run")
	noBudget := fs.Bool("no-budget", false, "turn the client's budget off (retries only)")
	seed := fs.Uint64("seed", 1, "seed of the agents' choices")
	asJSON := fs.Bool("json", false, "print the summary as JSON, without the progress line")
	logLevel := fs.String("log", "info", "what the client logs to stderr: info (calls held by the budget for 5 s, and refusals), warn (refusals only) or off")
	var extra func() ([]bodo.Option, error)
	if ext != nil {
		extra = ext(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *duration <= 0 {
		return errors.New("-agents must be at least 1 and -duration positive")
	}
	tty := false
	if f, ok := stdout.(*os.File); ok && !*asJSON {
		tty = isTerminal(f)
	}
	con := &console{out: stdout, progress: tty}
	logger, err := con.logger(*logLevel)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	stats := NewStats()
	opts := []bodo.Option{
		bodo.WithHTTPClient(&http.Client{Transport: stats.Transport(http.DefaultTransport)}),
		bodo.WithLogger(logger),
	}
	var srv *sandbox.Server
	target := os.Getenv("BODO_BASE_URL")
	if target == "" {
		srv = sandbox.New()
		url, closeFn, err := sandbox.ServeLoopback(srv)
		if err != nil {
			return err
		}
		defer closeFn()
		target = url + " (embedded sandbox)"
		opts = append(opts, bodo.WithBaseURL(url), bodo.WithAPIKey(sandbox.TestKey))
	}
	if *noBudget {
		opts = append(opts, bodo.WithoutBudget())
	}
	if extra != nil {
		more, err := extra()
		if err != nil {
			return err
		}
		opts = append(opts, more...)
	}
	client, err := bodo.NewClient(opts...)
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%d agents on one key against %s for %v (budget %s)\n", *n, target, *duration, onOff(!*noBudget))
	}

	runCtx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		Run(runCtx, *n, client, stats, *seed)
		<-runCtx.Done() // agents whose next turn is past the end stop early; the run still lasts its time
		close(done)
	}()
	if tty {
		progress(con, done, start, client, stats)
	} else {
		<-done
	}
	sum := summarize(time.Since(start), client, stats)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(sum)
	}
	printSummary(stdout, sum, client, stats, srv)
	return nil
}

func summarize(elapsed time.Duration, client *bodo.Client, stats *Stats) Summary {
	c := stats.Snapshot()
	allowance := 0
	for _, l := range client.Budget().Levels {
		if l.Name == "key" {
			allowance = l.Capacity + int(float64(l.Quota)*elapsed.Seconds()/l.Window.Seconds())
		}
	}
	return Summary{
		Elapsed: elapsed, Calls: c.Calls, OK: c.OK, Requests: c.Requests, Points: c.Points, Allowance: allowance,
		Refusals: c.Refusals, Errors: c.Errors, GaveUp: c.GaveUp, MaxFlight: c.MaxFlight, Slowest: c.Percentile(100),
	}
}

// console is the terminal the program writes to: the summary and, on a
// terminal, the progress line go to out; the client's log lines to stderr,
// each on a line of its own above the progress line.
type console struct {
	mu       sync.Mutex
	out      io.Writer
	progress bool // a progress line is drawn on out
}

// logger is a text logger on stderr at level ("info", "warn" or "off").
func (c *console) logger(level string) (*slog.Logger, error) {
	var l slog.Level
	switch level {
	case "off":
		return slog.New(slog.DiscardHandler), nil
	case "info":
		l = slog.LevelInfo
	case "warn":
		l = slog.LevelWarn
	default:
		return nil, fmt.Errorf("-log must be info, warn or off, not %q", level)
	}
	return slog.New(slog.NewTextHandler(logWriter{c}, &slog.HandlerOptions{Level: l})), nil
}

// logWriter writes log lines to stderr, clearing the progress line first.
type logWriter struct{ c *console }

func (w logWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.c.progress {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	return os.Stderr.Write(p)
}

// printf writes to out under the console's lock.
func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, format, args...)
}

// progress redraws one line twice a second until done.
func progress(w *console, done <-chan struct{}, start time.Time, client *bodo.Client, stats *Stats) {
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
			w.printf("\r\033[K")
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
			quota, capacity := keyLevel(b)
			w.printf("\r\033[K%5.0fs  %5.0f points/min over the last %2.0fs (limit %d/min, capacity %d)  %d calls  %d × 429  %d waiting  %d in flight",
				now.Sub(start).Seconds(), perMin, now.Sub(first.at).Seconds(), quota, capacity, c.Calls, c.Count429(), b.Waiting, b.InFlight)
		}
	}
}

func printSummary(w io.Writer, s Summary, client *bodo.Client, stats *Stats, srv *sandbox.Server) {
	c := stats.Snapshot()
	b := client.Budget()
	fmt.Fprintf(w, "ran %v\n", s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  calls           %d (%d ok)\n", s.Calls, s.OK)
	fmt.Fprintf(w, "  requests        %d\n", s.Requests)
	fmt.Fprintf(w, "  points accepted %d of an allowance of %d (capacity + quota over the run): goodput %.1f %%\n",
		s.Points, s.Allowance, 100*float64(s.Points)/float64(max(s.Allowance, 1)))
	fmt.Fprintf(w, "  429s            %d (%.2f %% of requests)%s\n", c.Count429(), 100*float64(c.Count429())/float64(max(s.Requests, 1)), byCode(s.Refusals))
	if srv != nil {
		fmt.Fprintf(w, "  lockouts        %d\n", srv.Stats(sandbox.TestKey).Lockouts)
	}
	fmt.Fprintf(w, "  errors          %d%s\n", s.Calls-s.OK, byCode(s.Errors))
	fmt.Fprintf(w, "  gave up         %d (retries ran out or held locally)\n", s.GaveUp)
	fmt.Fprintf(w, "  waited          %d calls for %v in all; latency p50 %v, p99 %v\n",
		b.Waits, b.Waited.Round(time.Millisecond), c.Percentile(50).Round(time.Millisecond), c.Percentile(99).Round(time.Millisecond))
	fmt.Fprintf(w, "  max in flight   %d (adaptive cap now %d, pace %.2f, cuts %d)\n", s.MaxFlight, b.InFlightCap, b.Pace, b.Cuts)
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

func keyLevel(b bodo.Budget) (perMinute, capacity int) {
	for _, l := range b.Levels {
		if l.Name == "key" {
			return int(float64(l.Quota) * time.Minute.Seconds() / l.Window.Seconds()), l.Capacity
		}
	}
	return 0, 0
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
