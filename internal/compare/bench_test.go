package compare

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/gen/oapi"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// benchSandbox is a sandbox whose limits nothing in a benchmark reaches, with
// one contact to get.
func benchSandbox(tb testing.TB) (*sandbox.Server, string) {
	tb.Helper()
	const huge = 1 << 40
	// Validation off: the overhead measured is the client's, not that of
	// the kin-openapi check the test binary's sandboxes otherwise run on
	// every exchange (it doubled both sides' allocations).
	srv := sandbox.New(sandbox.WithValidation(false), sandbox.WithLimits(sandbox.Limits{
		KeyQuota: huge, KeyCapacity: huge, WriteQuota: huge, Parallel: 1 << 20,
		PrincipalQuota: huge, OrgQuota: huge, DeleteQuota: huge, DeleteDayQuota: huge, EgressQuota: huge,
	}))
	hc := &http.Client{Transport: srv.Transport()}
	c, err := oapi.NewClientWithResponses("https://setup.bench.test", oapi.WithHTTPClient(hc), oapi.WithRequestEditorFn(authorize))
	if err != nil {
		tb.Fatal(err)
	}
	email := "ada@example.com"
	res, err := c.CreateContactWithResponse(context.Background(), &oapi.CreateContactParams{},
		oapi.ContactCreate{Name: "Ada Lovelace", Email: &email})
	if err != nil || res.JSON201 == nil {
		tb.Fatalf("creating the contact: %v %s", err, res.Body)
	}
	return srv, res.JSON201.Id
}

func authorize(_ context.Context, req *http.Request) error {
	req.Header.Set("Authorization", "Bearer "+sandbox.TestKey)
	req.Header.Set("Bodo-Version", bodo.APIVersion)
	return nil
}

// getter gets one contact and reports an error for anything but a 200.
type getter func(ctx context.Context, id string) error

// benchClient is one way of getting a contact that BenchmarkGet measures.
type benchClient struct {
	name string
	// make returns the getter of a new client on srv, and for bodo-go the
	// count of calls its budget held.
	make func(tb testing.TB, srv *sandbox.Server, host string) (getter, *atomic.Int64)
}

var benchClients = []benchClient{
	{name: "gen", make: func(tb testing.TB, srv *sandbox.Server, host string) (getter, *atomic.Int64) {
		c, err := oapi.NewClientWithResponses("https://"+host, oapi.WithHTTPClient(&http.Client{Transport: srv.Transport()}),
			oapi.WithRequestEditorFn(authorize))
		if err != nil {
			tb.Fatal(err)
		}
		return func(ctx context.Context, id string) error {
			res, err := c.GetContactWithResponse(ctx, id, &oapi.GetContactParams{})
			if err != nil {
				return err
			}
			if res.JSON200 == nil {
				return fmt.Errorf("getContact: %d", res.StatusCode())
			}
			return nil
		}, nil
	}},
	{name: "bodo-go", make: func(tb testing.TB, srv *sandbox.Server, host string) (getter, *atomic.Int64) {
		return makeBodo(tb, srv, host)
	}},
	{name: "bodo-go-nobudget", make: func(tb testing.TB, srv *sandbox.Server, host string) (getter, *atomic.Int64) {
		return makeBodo(tb, srv, host, bodo.WithoutBudget())
	}},
}

// onWait, when set, also sees every wait of the bodo-go clients made from
// now on (sustained sets it).
var onWait func(bodo.WaitEvent)

func makeBodo(tb testing.TB, srv *sandbox.Server, host string, opts ...bodo.Option) (getter, *atomic.Int64) {
	waits := new(atomic.Int64)
	also := onWait
	c, err := bodo.NewClient(append([]bodo.Option{bodo.WithAPIKey(sandbox.TestKey), bodo.WithBaseURL("https://" + host),
		bodo.WithHTTPClient(&http.Client{Transport: srv.Transport()}), bodo.WithLogger(slog.New(slog.DiscardHandler)),
		bodo.WithOnWait(func(e bodo.WaitEvent) {
			if e.Err != nil {
				return // a call the budget did not let go: its error counts it
			}
			waits.Add(1)
			if also != nil {
				also(e)
			}
		})}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return func(ctx context.Context, id string) error {
		_, err := c.Contacts.Get(ctx, id)
		return err
	}, waits
}

// benchGoroutines are the numbers of goroutines BenchmarkGet calls from.
var benchGoroutines = []int{1, 64}

// benchDeadline bounds every round of a benchmark, so that a client whose
// budget holds its calls for good fails instead of hanging.
const benchDeadline = 2 * time.Minute

// BenchmarkGet measures one getContact through the raw generated client and
// through bodo-go (as shipped, and with WithoutBudget), from 1 goroutine and
// from 64, in real time; every round uses a new sandbox and a new client.
// Besides ns/op (wall time) it reports cpu-ns/op (the process's CPU time,
// sandbox included, per call) and for bodo-go waits/op (calls its budget
// held). It runs its cases one after another, so their ratio moves with
// whatever else the machine does; overhead.md uses the paired rounds of
// TestOverhead instead. Use it for profiles (see overhead.md).
func BenchmarkGet(b *testing.B) {
	for _, bc := range benchClients {
		for _, n := range benchGoroutines {
			b.Run(fmt.Sprintf("client=%s/goroutines=%d", bc.name, n), func(b *testing.B) { benchGet(b, bc, n) })
		}
	}
}

func benchGet(b *testing.B, bc benchClient, goroutines int) {
	srv, id := benchSandbox(b)
	get, waits := bc.make(b, srv, fmt.Sprintf("%s-%d-%d.bench.test", bc.name, goroutines, runSeq.Add(1)))
	ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
	defer cancel()
	if err := get(ctx, id); err != nil {
		b.Fatal(err)
	}
	var waitsBefore int64
	if waits != nil {
		waitsBefore = waits.Load()
	}
	cpuBefore := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	if goroutines == 1 {
		for b.Loop() {
			if err := get(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((goroutines + procs - 1) / procs)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := get(ctx, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpuBefore)/float64(b.N), "cpu-ns/op")
	if waits != nil {
		b.ReportMetric(float64(waits.Load()-waitsBefore)/float64(b.N), "waits/op")
	}
}
