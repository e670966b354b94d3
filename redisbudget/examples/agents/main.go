// Command agents runs agent goroutines on one API key with the key's budget
// shared through Redis: processes started with the same -redis address
// against the same server keep within the key's limits together, as one
// process would.
//
//	go run ./examples/sandbox                           # in the SDK's module: prints a URL and a key
//	export BODO_BASE_URL=http://127.0.0.1:PORT BODO_API_KEY=bodo_test_...
//	cd redisbudget && go build -o /tmp/agents ./examples/agents
//	for i in 1 2 3 4; do /tmp/agents -redis localhost:6379 -seed $i & done; wait
//
// Each agent onboards customers, one after another: it creates a contact,
// reads it, searches for it, counts the contacts, reads the contact again,
// updates it, lists the contacts, creates an open invoice for it, reads the
// contact once more and pays the invoice: 4 writes in 10 calls and about 4
// points a call, the mix of the SDK's examples/agents, so that the key's
// points bind before its write level. At the end each process prints
// what it saw: its calls and their errors, the 429s, its waits (those for
// the shared budget are "shared-store") and latency, and the points the
// server accepted of it against what the key allows all processes
// together; -json prints the same as one JSON object, for a script that
// adds up the processes. Without -redis each process keeps a budget of its
// own, and the processes together overrun the key: compare the 429s.
// Without BODO_BASE_URL it runs against a bodotest server (the in-memory
// bodo API with the documented limits) of its own.
//
// It uses only the public API (packages bodo, bodotest and redisbudget):
// copy it as a start for a program of your own.
package main

import (
	"context"
	"encoding/json"
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
	"slices"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/bodo-app/bodo-go/redisbudget"
	"github.com/redis/go-redis/v9"
)

func main() {
	log.SetFlags(0)
	if err := run(os.Args[1:]); err != nil {
		log.Fatal(err)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("agents", flag.ExitOnError)
	redisAddr := fs.String("redis", "", "Redis address (host:port) to share the budget through; empty: this process's own budget")
	leaseTTL := fs.Duration("lease-ttl", 0, "how long a call may hold its slot before Redis frees it, should the process die (0: redisbudget's default)")
	n := fs.Int("agents", 8, "agent goroutines in this process")
	duration := fs.Duration("duration", time.Minute, "how long to run")
	seed := fs.Uint64("seed", 1, "seed of the agents' choices (give each process its own)")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	logLevel := fs.String("log", "warn", "what the client logs to stderr: info (calls held by the budget for 5 s, refusals, Redis outages), warn (refusals and outages) or off")
	_ = fs.Parse(args)
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("agents takes no arguments, only flags: %q", fs.Args())
	case *n < 1:
		return fmt.Errorf("-agents must be at least 1, not %d", *n)
	case *duration <= 0:
		return fmt.Errorf("-duration must be positive, not %v", *duration)
	case *leaseTTL < 0:
		return fmt.Errorf("-lease-ttl must not be negative, not %v", *leaseTTL)
	}
	logger, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	opts := []bodo.Option{bodo.WithLogger(logger)}
	if os.Getenv("BODO_BASE_URL") == "" {
		srv := bodotest.NewServer()
		if err := srv.Start(); err != nil {
			return err
		}
		defer srv.Close()
		opts = append(opts, bodo.WithBaseURL(srv.URL), bodo.WithAPIKey(bodotest.APIKey))
	}
	shared := "this process's own"
	if *redisAddr != "" {
		// Short timeouts and no retries of its own: the client gives Redis
		// 500 ms a request and falls back to its own budget when it fails.
		rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, DialTimeout: 200 * time.Millisecond,
			ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
		defer rdb.Close()
		var ropts []redisbudget.Option
		if *leaseTTL > 0 {
			ropts = append(ropts, redisbudget.WithLeaseTTL(*leaseTTL))
		}
		opts = append(opts, bodo.WithSharedBudget(redisbudget.New(rdb, ropts...)))
		shared = "shared through Redis at " + *redisAddr
	}
	rec := &recorder{errors: map[string]int{}, refusals: map[string]int{}, heldBy: map[string]int{}}
	opts = append(opts, bodo.WithOnRetry(rec.retried), bodo.WithOnWait(rec.waited))
	client, err := bodo.NewClient(opts...)
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Printf("%d agents in process %d on one key, budget %s, for %v\n", *n, os.Getpid(), shared, *duration)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for id := range *n {
		wg.Go(func() {
			a := &agent{id: id, seed: *seed, client: client, rng: rand.New(rand.NewPCG(*seed, uint64(id)))}
			a.run(ctx, rec)
		})
	}
	wg.Wait()
	<-ctx.Done() // agents whose next turn falls after the end stop early; the run lasts its time
	s := rec.summary(time.Since(start), client)
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(s)
	}
	s.print(os.Stdout)
	return nil
}

func newLogger(level string) (*slog.Logger, error) {
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
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// agent onboards customers: each turn makes the next call of its round
// (create a contact, get it, search for it, count the contacts, get it,
// update it, list the contacts, invoice it, get it, pay the invoice) and
// starts a new round after the last call or when it has no contact to work
// on.
type agent struct {
	id      int
	seed    uint64 // the process's -seed: names stay distinct across processes
	client  *bodo.Client
	rng     *rand.Rand
	seq     int    // contacts made
	turn    int    // the call of the round to make next
	contact string // the round's contact
	invoice string // the round's open invoice
}

// run makes calls until ctx ends. After a call refused locally, or refused
// with a wait, it waits that long (at least a second), as a well-behaved
// program does.
func (a *agent) run(ctx context.Context, rec *recorder) {
	for ctx.Err() == nil {
		start := time.Now()
		points, err := a.call(ctx)
		if err != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) {
			return // the call's turn came after the end of the run: it does not count
		}
		rec.called(points, time.Since(start), err)
		var e *bodo.Error
		if errors.As(err, &e) && (e.Local || e.RetryAfter > 0) {
			t := time.NewTimer(max(e.RetryAfter, time.Second))
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
}

// call makes the next call of the round and returns its documented cost in
// points ("Operations and their cost" of the API's documentation).
func (a *agent) call(ctx context.Context) (points int, err error) {
	if a.contact == "" {
		a.turn = 0
	}
	turn := a.turn
	a.turn = (a.turn + 1) % 10
	c := a.client
	switch turn {
	case 0:
		a.seq++
		a.contact, a.invoice = "", ""
		ct, err := c.Contacts.Create(ctx, bodo.ContactCreate{
			Name:  fmt.Sprintf("customer-%d-%02d-%06d", a.seed, a.id, a.seq),
			Email: bodo.String(fmt.Sprintf("customer%02d.%06d@example.com", a.id, a.seq)),
		})
		if err == nil {
			a.contact = ct.ID
		}
		return 5, err
	case 1, 4, 8:
		_, err = c.Contacts.Get(ctx, a.contact)
		return 1, err
	case 2: // a list with q: 2 points, and 5 for the search
		_, err = c.Contacts.List(ctx, &bodo.ListContactsParams{Q: bodo.String(fmt.Sprintf("customer-%d-%02d-%06d", a.seed, a.id, a.seq)), Limit: bodo.Int(5)})
		return 7, err
	case 3:
		_, err = c.Contacts.Count(ctx, nil)
		return 2, err
	case 5:
		_, err = c.Contacts.Update(ctx, a.contact, bodo.ContactUpdate{Phone: bodo.String(fmt.Sprintf("+49 30 %06d", a.rng.IntN(1e6)))})
		return 5, err
	case 6:
		_, err = c.Contacts.List(ctx, &bodo.ListContactsParams{Limit: bodo.Int(5)})
		return 2, err
	case 7:
		inv, err := c.Invoices.Create(ctx, bodo.InvoiceCreate{ContactID: a.contact, Amount: int64(100 + a.rng.IntN(100000)),
			Currency: "EUR", Status: bodo.Value(bodo.InvoiceStatusOpen)})
		if err == nil {
			a.invoice = inv.ID
		}
		return 5, err
	default:
		if a.invoice == "" {
			return a.call(ctx) // the invoice failed: nothing to pay
		}
		_, err = c.Invoices.Pay(ctx, a.invoice)
		return 10, err
	}
}

// recorder counts what the process sees: each call's outcome and latency,
// and each retry (WithOnRetry) and wait (WithOnWait) of the client.
type recorder struct {
	mu        sync.Mutex
	calls, ok int
	points    int            // the cost of every call the server answered, and so charged
	errors    map[string]int // failed calls by code
	refusals  map[string]int // 429 and 503 answers by code
	waits     int
	waitedFor time.Duration
	heldBy    map[string]int // waits by what held the call last
	latencies []time.Duration
}

func (r *recorder) called(points int, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.latencies = append(r.latencies, d)
	var e *bodo.Error
	switch {
	case err == nil:
		r.ok++
		r.points += points
	case !errors.As(err, &e): // every error of the client is a *bodo.Error; this is for the unexpected
		r.errors[err.Error()]++
	case e.Local:
		r.errors["held locally ("+e.Policy+")"]++
	case e.Status == 0:
		r.errors["no answer"]++
	case e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable:
		r.refusals[e.Code]++
		r.errors[e.Code]++
	default: // answered, so charged
		r.points += points
		r.errors[fmt.Sprint(e.Status, " ", e.Code)]++
	}
}

func (r *recorder) retried(ev bodo.RetryEvent) {
	var e *bodo.Error
	if errors.As(ev.Err, &e) && (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) {
		r.mu.Lock()
		r.refusals[e.Code]++
		r.mu.Unlock()
	}
}

func (r *recorder) waited(ev bodo.WaitEvent) {
	if ev.Err != nil {
		return // a call the budget did not let go: its error counts it
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits++
	r.waitedFor += ev.Wait
	r.heldBy[ev.Reason]++
}

// summary is what one process saw of a run.
type summary struct {
	Elapsed   time.Duration  `json:"elapsed"`
	Calls     int            `json:"calls"`
	OK        int            `json:"ok"`
	Points    int            `json:"points"`
	Allowance int            `json:"allowance"` // what the key allows all processes together over the run: its capacity plus its quota
	Refusals  map[string]int `json:"refusals"`
	Errors    map[string]int `json:"errors"`
	Waits     int            `json:"waits"`
	Waited    time.Duration  `json:"waited"`
	HeldBy    map[string]int `json:"heldBy"`
	P50       time.Duration  `json:"p50"`
	P99       time.Duration  `json:"p99"`
	Budget    bodo.Budget    `json:"-"`
	// RateLimitErr is why RateLimit failed at the end, leaving Allowance 0.
	RateLimitErr string `json:"rateLimitError,omitempty"`
}

// summary takes the counts of the run, the client's budget, and the key's
// level from the server (RateLimit) for the allowance.
func (r *recorder) summary(elapsed time.Duration, client *bodo.Client) summary {
	r.mu.Lock()
	s := summary{Elapsed: elapsed, Calls: r.calls, OK: r.ok, Points: r.points, Refusals: r.refusals, Errors: r.errors,
		Waits: r.waits, Waited: r.waitedFor, HeldBy: r.heldBy, Budget: client.Budget()}
	lat := slices.Sorted(slices.Values(r.latencies))
	r.mu.Unlock()
	if len(lat) > 0 {
		s.P50, s.P99 = lat[len(lat)*50/100], lat[len(lat)*99/100]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := client.RateLimit(ctx)
	if err != nil {
		s.RateLimitErr = err.Error()
		return s
	}
	for _, p := range st.Policies {
		if p.Name == "key" && p.Window > 0 {
			s.Allowance = p.Capacity + int(float64(p.Quota)*elapsed.Seconds()/p.Window.Seconds())
		}
	}
	return s
}

func (s summary) print(w io.Writer) {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	fmt.Fprintf(w, "ran %v\n", ms(s.Elapsed))
	fmt.Fprintf(w, "  calls     %d (%d ok)\n", s.Calls, s.OK)
	if s.RateLimitErr != "" {
		fmt.Fprintf(w, "  points    %d accepted of this process (the key's allowance is unknown: %s)\n", s.Points, s.RateLimitErr)
	} else {
		fmt.Fprintf(w, "  points    %d accepted of this process; the key allows %d over the run, to all processes together\n", s.Points, s.Allowance)
	}
	fmt.Fprintf(w, "  refusals  %v\n", s.Refusals)
	fmt.Fprintf(w, "  errors    %v\n", s.Errors)
	fmt.Fprintf(w, "  waited    %d calls for %v in all, by what held them: %v\n", s.Waits, ms(s.Waited), s.HeldBy)
	fmt.Fprintf(w, "  latency   p50 %v, p99 %v (waits included)\n", ms(s.P50), ms(s.P99))
	fmt.Fprintf(w, "  budget    cap on calls in flight %d, pace %.2f, cuts %d, %d refusals in the last 60 s\n", s.Budget.InFlightCap, s.Budget.Pace, s.Budget.Cuts, s.Budget.Refusals)
}
