package redisbudget

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// buildAgents builds examples/agents, the agents program with -redis.
func buildAgents(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agents")
	out, err := exec.Command("go", "build", "-o", bin, "./examples/agents").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// agentProcess is one OS process of the agents program.
type agentProcess struct {
	cmd     *exec.Cmd
	out     bytes.Buffer
	errOut  bytes.Buffer
	started time.Time
	ended   time.Duration
}

func startAgents(t *testing.T, bin, baseURL string, args ...string) *agentProcess {
	t.Helper()
	p := &agentProcess{cmd: exec.Command(bin, append([]string{"-json"}, args...)...)}
	p.cmd.Env = append(os.Environ(), "BODO_BASE_URL="+baseURL, "BODO_API_KEY="+sandbox.TestKey)
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.errOut
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

// agentSummary is the part of the program's -json summary the tests read.
type agentSummary struct {
	Calls int `json:"calls"`
	OK    int `json:"ok"`
}

func (p *agentProcess) wait(t *testing.T) agentSummary {
	t.Helper()
	err := p.cmd.Wait()
	p.ended = time.Since(p.started)
	var s agentSummary
	if err != nil {
		t.Fatalf("agents process: %v\n%s%s", err, p.out.String(), p.errOut.String())
	}
	if err := json.Unmarshal(p.out.Bytes(), &s); err != nil {
		t.Fatalf("agents output %q: %v", p.out.String(), err)
	}
	return s
}

// shrunken are limits where the key's points bind in a 30 s run: 600
// points a minute and as much capacity, with the write and delete levels
// raised out of the way.
func shrunken() sandbox.Limits {
	lim := sandbox.DefaultLimits()
	lim.KeyQuota, lim.KeyCapacity = 600, 600
	lim.WriteQuota, lim.DeleteQuota = 1000, 200
	return lim
}

// chaosSetup is what the tests of many processes through a proxy share: a
// private Redis behind a proxy, the agents program and a sandbox with
// shrunken limits whose answers take latency, on loopback.
func chaosSetup(t *testing.T, latency time.Duration) (*redisServer, *netProxy, string, sandbox.Limits, *sandbox.Server, string) {
	t.Helper()
	rs := startRedis(t)
	px := startProxy(t, rs.Addr)
	bin := buildAgents(t)
	lim := shrunken()
	srv, url := serveSandbox(t, lim, latency)
	return rs, px, bin, lim, srv, url
}

// serveSandbox serves a sandbox with limits lim whose answers take latency
// on loopback until t ends, and returns it and its URL.
func serveSandbox(t *testing.T, lim sandbox.Limits, latency time.Duration) (*sandbox.Server, string) {
	t.Helper()
	srv := sandbox.New(sandbox.WithLimits(lim), sandbox.WithLatency(latency))
	api := httptest.NewServer(srv)
	t.Cleanup(api.Close)
	return srv, api.URL
}

// longRun skips t under -short, lets it overlap the other long runs (it
// takes real time, with a Redis and a sandbox of its own) and returns how
// long it runs: d, or long with BODO_LONG=1.
func longRun(t *testing.T, d, long time.Duration) time.Duration {
	t.Helper()
	if testing.Short() {
		t.Skipf("a %v run of 4 processes", d)
	}
	t.Parallel()
	if os.Getenv("BODO_LONG") == "1" {
		return long
	}
	return d
}

// TestFourProcessesShareOneBudget runs the agents program in 4 OS processes
// on one key against one sandbox for 30 s, sharing the budget through
// Redis: no lockout, never more calls in flight over all processes than the
// parallel quota, and at least 95 % of the key's allowance accepted.
func TestFourProcessesShareOneBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s run of 4 processes")
	}
	t.Parallel() // real time, a Redis and a sandbox of its own: it overlaps the other long runs
	rs := startRedis(t)
	bin := buildAgents(t)
	lim := shrunken()
	srv, url := serveSandbox(t, lim, 20*time.Millisecond)
	const run = 30 * time.Second
	var procs []*agentProcess
	for i := range 4 {
		procs = append(procs, startAgents(t, bin, url, "-redis", rs.Addr, "-agents", "8", "-duration", run.String(), "-seed", fmt.Sprint(i+1)))
	}
	var sums []agentSummary
	for _, p := range procs {
		sums = append(sums, p.wait(t))
	}
	st := srv.Stats(sandbox.TestKey)
	allowance := lim.KeyCapacity + int(float64(lim.KeyQuota)*run.Seconds()/lim.Window.Seconds())
	refusals := 0
	for code, n := range st.Refusals {
		refusals += n
		_ = code
	}
	t.Logf("4 processes × 8 agents, %v: %d requests, %d points accepted of %d (%.1f %%), refusals %v, max in flight %d, lockouts %d",
		run, st.Requests, st.PointsAccepted, allowance, 100*float64(st.PointsAccepted)/float64(allowance), st.Refusals, st.MaxInFlight, st.Lockouts)
	if st.Lockouts != 0 {
		t.Errorf("%d lockouts", st.Lockouts)
	}
	if st.MaxInFlight > lim.Parallel {
		t.Errorf("%d calls in flight at once over all processes; the parallel quota is %d", st.MaxInFlight, lim.Parallel)
	}
	if float64(st.PointsAccepted) < 0.95*float64(allowance) {
		t.Errorf("%d points accepted of an allowance of %d", st.PointsAccepted, allowance)
	}
	for i, s := range sums {
		if s.Calls == 0 {
			t.Errorf("process %d made no call: %+v", i, s)
		}
	}
	if path := os.Getenv("BODO_REDIS_RUN"); path != "" {
		line := fmt.Sprintf("| 4 processes × 8 agents, %v | %d | %d | %d | %.1f %% | %d | %d | %d |\n",
			run, st.Requests, st.PointsAccepted, allowance, 100*float64(st.PointsAccepted)/float64(allowance), refusals, st.MaxInFlight, st.Lockouts)
		_ = os.WriteFile(path, []byte(line), 0o644)
	}
}

// TestKilledProcessFreesItsSlots kills a process that holds every slot in
// flight: its leases expire within the lease time and another process gets
// the slots back.
func TestKilledProcessFreesItsSlots(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	rdb := rs.Client(t)
	bin := buildAgents(t)
	srv := sandbox.New(sandbox.WithLatency(2 * time.Second))
	api := httptest.NewServer(srv)
	defer api.Close()
	const ttl = 3 * time.Second
	p := startAgents(t, bin, api.URL, "-redis", rs.Addr, "-agents", "8", "-duration", "1m", "-lease-ttl", ttl.String())

	ctx := context.Background()
	var leasesKey string
	deadline := time.Now().Add(10 * time.Second)
	for {
		ks, _ := rdb.Keys(ctx, DefaultPrefix+"*:leases").Result()
		if len(ks) == 1 && rdb.ZCard(ctx, ks[0]).Val() == 6 {
			leasesKey = ks[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process never held 6 slots: %v\n%s", ks, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	killed := time.Now()

	// The key of the store is the part between the prefix's braces.
	ns := leasesKey[strings.Index(leasesKey, "{")+1 : strings.Index(leasesKey, "}")]
	b := New(rdb)
	req := budgetstore.Acquire{LeaseTTL: time.Minute, Levels: []budgetstore.Level{{Name: "key", Amount: 1, Rate: 5, Size: 600}},
		Cost: 1, KeyRate: 5, MaxInFlight: 6, RefusalLimit: 25, RefusalWindow: time.Minute}
	req.Lease = "after-the-kill"
	g, err := b.Acquire(ctx, ns, req)
	if err != nil || g.Admitted || g.Reason != "in-flight" {
		t.Fatalf("right after the kill: %+v %v", g, err)
	}
	for {
		req.Lease = fmt.Sprint("probe-", time.Now().UnixNano())
		g, err = b.Acquire(ctx, ns, req)
		if err != nil {
			t.Fatal(err)
		}
		if g.Admitted {
			break
		}
		if time.Since(killed) > ttl+2*time.Second {
			t.Fatalf("no slot came back %v after the kill: %+v", time.Since(killed), g)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(killed); d > ttl+time.Second {
		t.Errorf("the slots came back after %v, the lease time is %v", d, ttl)
	}
}

// TestProcessesGoOnWhenRedisStops stops Redis in the middle of a run of 4
// processes: they go on with their own budgets, every process ends on time
// (no call hangs), and no lockout follows.
func TestProcessesGoOnWhenRedisStops(t *testing.T) {
	if testing.Short() {
		t.Skip("a 12 s run of 4 processes")
	}
	t.Parallel() // real time, a Redis and a sandbox of its own: it overlaps the other long runs
	rs := startRedis(t)
	bin := buildAgents(t)
	srv := sandbox.New(sandbox.WithLimits(shrunken()), sandbox.WithLatency(20*time.Millisecond))
	api := httptest.NewServer(srv)
	defer api.Close()
	const run = 12 * time.Second
	var procs []*agentProcess
	for i := range 4 {
		procs = append(procs, startAgents(t, bin, api.URL, "-redis", rs.Addr, "-agents", "8", "-duration", run.String(), "-seed", fmt.Sprint(i+1)))
	}
	var once sync.Once
	time.AfterFunc(4*time.Second, func() { once.Do(rs.Stop) })
	time.Sleep(8 * time.Second)
	once.Do(func() {})
	rs.Start(t)
	for i, p := range procs {
		s := p.wait(t)
		if p.ended > run+3*time.Second {
			t.Errorf("process %d ran %v for a run of %v: a call hung", i, p.ended, run)
		}
		if s.Calls == 0 || s.OK == 0 {
			t.Errorf("process %d: %+v", i, s)
		}
	}
	if st := srv.Stats(sandbox.TestKey); st.Lockouts != 0 {
		t.Errorf("%d lockouts", st.Lockouts)
	}
}
