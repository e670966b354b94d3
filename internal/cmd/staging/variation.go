package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// apiKey is the key the agents use, and peerKey the key of the same
// principal a variation's peer process uses; bodo-staging knows both by
// default.
const (
	apiKey  = "bodo_test_a"
	peerKey = "bodo_test_b"
)

// variation is one way of running bodo-staging, and the agents against it.
type variation struct {
	name      string
	summary   string
	flags     []string // bodo-staging's flags besides -addr, -scale and -seed
	processes int      // 1: examples/agents; more: redisbudget/examples/agents sharing a Redis
	agents    int      // agent goroutines in each process
	outage    bool     // Redis is paused, then killed and restarted, during the run
	peer      bool     // another process runs the same agents on peerKey, of the same principal
}

// The plans of the sandbox profiles of the same names (internal/sandbox).
const (
	smallPlan = "key=150,key.capacity=300,write=30,principal=600,org=1500,delete=5,delete-day=150,egress=5000"
	bigPlan   = "key=600,key.capacity=1200,write=120,principal=2400,org=6000,delete=20,delete-day=1000,egress=20000"
	// foreign90 is the big plan with the documented org, of which another
	// key takes 90 % (45 points a second); the principal is raised so that
	// the org binds.
	foreign90 = "key=600,key.capacity=1200,write=120,principal=6000,org=3000,delete=20,delete-day=1000,egress=20000"
)

func variations() []variation {
	return []variation{
		{name: "documented", summary: "the contract's limits", processes: 1, agents: 32},
		{name: "small-plan", summary: "key 150/min, capacity 300, write 30/min, …", flags: []string{"-policy-quota", smallPlan}, processes: 1, agents: 32},
		{name: "big-plan", summary: "key 600/min, capacity 1200, write 120/min, …", flags: []string{"-policy-quota", bigPlan}, processes: 1, agents: 32},
		{name: "search-20", summary: "an enforced, undocumented policy: 20 searches a minute", flags: []string{"-policy-quota", "search=20"}, processes: 1, agents: 32},
		{name: "header-noise", summary: "legal variations of RateLimit-Policy and RateLimit", flags: []string{"-header-noise"}, processes: 1, agents: 32},
		{name: "overload-ms-only", summary: "5 % OVERLOADED, the wait only in retryAfterMs", flags: []string{"-overload", "0.05", "-retry-after", "ms-only"}, processes: 1, agents: 32},
		{name: "foreign-90", summary: "another key takes 90 % of the org", flags: []string{"-policy-quota", foreign90, "-foreign-load", "45"}, processes: 1, agents: 32},
		{name: "drop-after-commit", summary: "5 % of writes committed, then the connection closed", flags: []string{"-drop-after-commit", "0.05"}, processes: 1, agents: 32},
		{name: "two-keys", summary: "another process runs the same agents on a key of the same principal (400/min)", flags: []string{"-policy-quota", "principal=400"}, processes: 1, agents: 32, peer: true},
		{name: "redis-4x8", summary: "4 processes × 8 agents sharing the budget through Redis", processes: 4, agents: 8},
		{name: "redis-4x8-outage", summary: "the same; Redis paused 4 s, later killed and restarted after 5 s", processes: 4, agents: 8, outage: true},
	}
}

// run starts a server, runs the agents against it for c.duration and
// measures the run from the server's stats, read as the agents end.
func (v variation) run(ctx context.Context, c config, seed uint64) (result, error) {
	srv, url, log, err := startStaging(ctx, c, v, seed)
	if err != nil {
		return result{}, err
	}
	var stop sync.Once
	stopServer := func() {
		stop.Do(func() {
			srv.Process.Signal(syscall.SIGTERM)
			<-log.done // the log is read to its end before Wait closes it
			srv.Wait()
		})
	}
	defer stopServer()
	env := append(os.Environ(), "BODO_BASE_URL="+url, "BODO_API_KEY="+apiKey)
	foreignStart := make(chan float64, 1)
	watchCtx, endWatch := context.WithCancel(ctx)
	defer endWatch()
	go func() { foreignStart <- foreignAfterFirstMinutes(watchCtx, url, c.scale) }()

	var errs int
	waits := &waitLog{}
	if v.processes == 1 {
		errs, err = runAgents(ctx, c, v, seed, env, waits)
	} else {
		errs, err = runSharedAgents(ctx, c, v, seed, env, waits)
	}
	if err != nil {
		return result{}, err
	}
	resp, err := http.Get(url + "/__stats?series=1")
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return result{}, err
	}
	if c.keep != "" {
		if err := os.WriteFile(filepath.Join(c.keep, fmt.Sprintf("%s-%d.json", v.name, seed)), raw, 0o644); err != nil {
			return result{}, err
		}
	}
	st, err := readStats(bytes.NewReader(raw))
	if err != nil {
		return result{}, err
	}
	stopServer()
	endWatch()
	r, err := st.resultOf(apiKey, log, <-foreignStart, waits.spans())
	r.Errors = errs
	r.Processes, r.Agents = v.processes, v.agents
	return r, err
}

// foreignAfterFirstMinutes returns what the foreign load had taken from the
// org when the key's first firstMinutes contract seconds ended, or -1 when
// the run ended first.
func foreignAfterFirstMinutes(ctx context.Context, url string, scale float64) float64 {
	read := func() (*stats, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/__stats?series=0", nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return readStats(io.LimitReader(resp.Body, 16<<20))
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return -1
		case <-tick.C:
		}
		st, err := read()
		if err != nil {
			continue
		}
		first := st.Keys[apiKey].FirstRequestAt
		if first.IsZero() {
			continue
		}
		end := first.Add(time.Duration(firstMinutes / scale * float64(time.Second)))
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(time.Until(end)):
		}
		if st, err = read(); err != nil {
			return -1
		}
		return st.Foreign.TakenFromOrgs
	}
}

// startStaging starts bodo-staging and returns it with its URL and the log
// of the key's writes.
func startStaging(ctx context.Context, c config, v variation, seed uint64) (*exec.Cmd, string, *writeLog, error) {
	args := append([]string{"-addr", "127.0.0.1:0", "-scale", strconv.FormatFloat(c.scale, 'f', -1, 64),
		"-seed", strconv.FormatUint(seed, 10), "-v"}, v.flags...)
	cmd := exec.CommandContext(ctx, c.staging, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", nil, err
	}
	log := newWriteLog(apiKey, c.scale)
	var src io.Reader = stderr
	if c.keep != "" {
		f, err := os.Create(filepath.Join(c.keep, fmt.Sprintf("%s-%d.log", v.name, seed)))
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, "", nil, err
		}
		src = io.TeeReader(stderr, f)
		go func() { <-log.done; f.Close() }()
	}
	go log.read(src)
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
	}()
	select {
	case l := <-line:
		if url, ok := strings.CutPrefix(l, "listening "); ok {
			return cmd, url, log, nil
		}
		err = fmt.Errorf("bodo-staging said %q", l)
	case <-time.After(10 * time.Second):
		err = errors.New("bodo-staging did not say where it listens within 10 s")
	}
	cmd.Process.Kill()
	<-log.done
	cmd.Wait()
	return nil, "", nil, err
}

var failedLine = regexp.MustCompile(`(?m)^\s+errors\s+(\d+)`)

// runAgents runs examples/agents, its refusals logged to waits, and returns
// how many of its calls failed.
func runAgents(ctx context.Context, c config, v variation, seed uint64, env []string, waits *waitLog) (int, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "agents"), "-agents", strconv.Itoa(v.agents),
		"-duration", c.duration.String(), "-seed", strconv.FormatUint(seed, 10), "-log", "warn")
	stderr, end := waits.writer()
	cmd.Env, cmd.Stderr = env, stderr
	peer := make(chan error, 1)
	if v.peer {
		p := exec.CommandContext(ctx, filepath.Join(c.bin, "agents"), "-agents", strconv.Itoa(v.agents),
			"-duration", c.duration.String(), "-seed", strconv.FormatUint(seed+1000, 10), "-log", "off")
		p.Env = append(slices.Clone(env), "BODO_API_KEY="+peerKey)
		if err := p.Start(); err != nil {
			return 0, fmt.Errorf("peer agents: %w", err)
		}
		go func() { peer <- p.Wait() }()
	} else {
		peer <- nil
	}
	out, err := cmd.Output()
	end()
	if perr := <-peer; perr != nil && err == nil {
		err = fmt.Errorf("peer agents: %w", perr)
	}
	if err != nil {
		return 0, fmt.Errorf("agents: %w\n%s%s", err, out, waits)
	}
	if c.keep != "" {
		report := fmt.Appendf(out, "%s", waits)
		if err := os.WriteFile(filepath.Join(c.keep, fmt.Sprintf("%s-%d.agents.txt", v.name, seed)), report, 0o644); err != nil {
			return 0, err
		}
	}
	m := failedLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("agents printed no errors line:\n%s", out)
	}
	return strconv.Atoi(string(m[1]))
}

// runSharedAgents runs v.processes redisbudget agents sharing a Redis of
// their own, with its outage when v has one, their refusals logged to
// waits, and returns how many of their calls failed.
func runSharedAgents(ctx context.Context, c config, v variation, seed uint64, env []string, waits *waitLog) (int, error) {
	rds, err := startRedis(ctx)
	if err != nil {
		return 0, err
	}
	defer rds.stop()
	type out struct {
		Calls int `json:"calls"`
		OK    int `json:"ok"`
	}
	done := make(chan error, v.processes)
	outs := make([]out, v.processes)
	for i := range v.processes {
		cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "redisagents"), "-redis", rds.addr, "-agents", strconv.Itoa(v.agents),
			"-duration", c.duration.String(), "-seed", strconv.FormatUint(seed*100+uint64(i), 10), "-json", "-log", "warn")
		stderr, end := waits.writer()
		cmd.Env, cmd.Stderr = env, stderr
		go func() {
			b, err := cmd.Output()
			end()
			if err == nil {
				err = json.Unmarshal(b, &outs[i])
			}
			if err != nil {
				err = fmt.Errorf("redisagents %d: %w\n%s%s", i, err, b, waits)
			}
			done <- err
		}()
	}
	outageDone := make(chan struct{})
	go func() {
		if v.outage {
			rds.outage(ctx, c.duration)
		}
		close(outageDone)
	}()
	defer func() { <-outageDone }()
	var first error
	for range v.processes {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	failed := 0
	for _, o := range outs {
		failed += o.Calls - o.OK
	}
	return failed, first
}

// redisServer is a private redis-server on a free loopback port.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
}

func startRedis(ctx context.Context) (*redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	r := &redisServer{addr: addr}
	return r, r.start(ctx)
}

func (r *redisServer) start(ctx context.Context) error {
	_, port, _ := net.SplitHostPort(r.addr)
	r.cmd = exec.CommandContext(ctx, "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := r.cmd.Start(); err != nil {
		return err
	}
	for range 100 {
		if conn, err := net.DialTimeout("tcp", r.addr, 100*time.Millisecond); err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not start", r.addr)
}

func (r *redisServer) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// outage pauses Redis for 4 s a third into the run, and at half of it
// kills it and starts a new, empty one 5 s later on the same port.
func (r *redisServer) outage(ctx context.Context, d time.Duration) {
	sleep := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !sleep(d / 3) {
		return
	}
	r.cmd.Process.Signal(syscall.SIGSTOP)
	sleep(4 * time.Second)
	r.cmd.Process.Signal(syscall.SIGCONT)
	if !sleep(d/2 - d/3 - 4*time.Second) {
		return
	}
	r.stop()
	if sleep(5 * time.Second) {
		if err := r.start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "restarting redis:", err)
		}
	}
}
