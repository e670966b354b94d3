package redisbudget

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/redis/go-redis/v9"
)

// chaosEpisode is one thing done to Redis in the chaos test.
type chaosEpisode struct {
	at, length time.Duration
	kind       string // "stop", "pause", "cut", "delay"
}

// chaosPlan spreads episodes of every kind over the run, each kind once in
// every round of four in a random order, with calm gaps between them, from
// 3 s on (while the processes still spend the key's capacity with every
// slot taken) and ending at least 12 s before the run does.
func chaosPlan(seed uint64, run time.Duration) []chaosEpisode {
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	kinds := []string{"stop", "pause", "cut", "delay"}
	var plan []chaosEpisode
	at := 3 * time.Second
	for {
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, k := range kinds {
			length := time.Duration(1000+rng.IntN(2500)) * time.Millisecond
			if at+length > run-12*time.Second {
				return plan
			}
			plan = append(plan, chaosEpisode{at: at, length: length, kind: k})
			at += length + time.Duration(2000+rng.IntN(4000))*time.Millisecond
		}
	}
}

// lateReplies delays a reply by up to 150 ms, and one in ten by 300 to
// 700 ms, past the agents' Redis timeout of 300 ms, at random from seed.
func lateReplies(seed uint64) func() time.Duration {
	r := rand.New(rand.NewPCG(seed, 2))
	var mu sync.Mutex
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if r.IntN(10) == 0 {
			return time.Duration(300+r.IntN(400)) * time.Millisecond
		}
		return time.Duration(r.IntN(150)) * time.Millisecond
	}
}

// TestChaos runs the agents program in 4 OS processes on one key sharing
// its budget through Redis, and meanwhile stops and restarts Redis (which
// comes back empty), pauses it (DEBUG SLEEP), cuts the network to it and
// delays its replies at random (a tenth of them past the clients'
// timeout). Calls take 200 ms, so the slots in flight are all taken while
// the key's capacity lasts. The sandbox must see no lockout, never more calls in flight
// than the parallel quota, and at least 80 % of the points the key allows
// over the run; Redis must hold no lease once the processes are done. The
// run lasts 60 s; BODO_LONG=1 makes it 3 minutes. BODO_CHAOS_SEED repeats
// the run of a seed that a failure logged.
func TestChaos(t *testing.T) {
	run := longRun(t, 60*time.Second, 3*time.Minute)
	rs, px, bin, lim, srv, api := chaosSetup(t, 200*time.Millisecond)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("BODO_CHAOS_SEED"); v != "" {
		if _, err := fmt.Sscan(v, &seed); err != nil {
			t.Fatalf("BODO_CHAOS_SEED=%q: %v", v, err)
		}
	}
	plan := chaosPlan(seed, run)
	var procs []*agentProcess
	start := time.Now()
	for i := range 4 {
		procs = append(procs, startAgents(t, bin, api, "-redis", px.Addr, "-agents", "8", "-duration", run.String(), "-seed", fmt.Sprint(seed+uint64(i))))
	}

	// Note when the sandbox first has more calls in flight than the
	// quota, and what was being done to Redis then.
	var mu sync.Mutex
	current, over := "calm", ""
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if n := srv.Stats(sandbox.TestKey).InFlight; n > lim.Parallel {
				mu.Lock()
				if over == "" {
					over = fmt.Sprintf("%d in flight at %.2fs (%s)", n, time.Since(start).Seconds(), current)
				}
				mu.Unlock()
			}
		}
	}()
	setCurrent := func(what string) {
		mu.Lock()
		current = what
		mu.Unlock()
	}

	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 1))
	var done []string
	for _, e := range plan {
		time.Sleep(time.Until(start.Add(e.at)))
		setCurrent(fmt.Sprintf("%s since %.2fs", e.kind, time.Since(start).Seconds()))
		switch e.kind {
		case "stop":
			rs.Stop()
			time.Sleep(e.length)
			rs.Start(t)
		case "pause":
			admin := redis.NewClient(&redis.Options{Addr: rs.Addr, ReadTimeout: e.length + 5*time.Second})
			if err := admin.Do(ctx, "DEBUG", "SLEEP", fmt.Sprintf("%.3f", e.length.Seconds())).Err(); err != nil {
				t.Errorf("DEBUG SLEEP: %v", err)
			}
			admin.Close()
		case "cut":
			px.Cut(true)
			time.Sleep(e.length)
			px.Cut(false)
		case "delay":
			px.Delay(lateReplies(rng.Uint64()))
			time.Sleep(e.length)
			px.Delay(nil)
		}
		done = append(done, fmt.Sprintf("%s %.1fs at %.1fs", e.kind, e.length.Seconds(), e.at.Seconds()))
		setCurrent(fmt.Sprintf("calm since %.2fs, after %s", time.Since(start).Seconds(), e.kind))
	}
	for i, p := range procs {
		if s := p.wait(t); s.Calls == 0 || s.OK == 0 {
			t.Errorf("process %d: %+v", i, s)
		}
	}
	st := srv.Stats(sandbox.TestKey)
	elapsed := time.Since(start)
	allowance := lim.KeyCapacity + int(float64(lim.KeyQuota)*run.Seconds()/lim.Window.Seconds())
	goodput := float64(st.PointsAccepted) / float64(allowance)
	rdb := rs.Client(t)
	// A process that ends while Redis has not had a release of its calls
	// leaves the lease to run out: within the lease time of its last
	// renewal, which may be the moment it ended.
	left, _ := waitFor(leaseTTL()+2*time.Second, func() bool { return leasesIn(t, rdb) == 0 })
	t.Logf("seed %d, 4 processes × 8 agents, %v; %s: %d requests, %d points accepted of %d (%.1f %%), refusals %v, max in flight %d, lockouts %d; %d leases in Redis %v after the end",
		seed, elapsed.Round(time.Second), strings.Join(done, ", "), st.Requests, st.PointsAccepted, allowance, 100*goodput, st.Refusals, st.MaxInFlight, st.Lockouts, leasesIn(t, rdb), left.Round(time.Millisecond))
	if st.Lockouts != 0 {
		t.Errorf("%d lockouts", st.Lockouts)
	}
	if st.MaxInFlight > lim.Parallel {
		mu.Lock()
		t.Errorf("%d calls in flight at once; the parallel quota is %d; first %s", st.MaxInFlight, lim.Parallel, over)
		mu.Unlock()
	}
	if goodput < 0.8 {
		t.Errorf("goodput %.1f %%, want at least 80 %%", 100*goodput)
	}
	if n := leasesIn(t, rdb); n != 0 {
		t.Errorf("%d leases still in Redis %v after the end", n, left)
	}
	if path := os.Getenv("BODO_CHAOS_RUN"); path != "" {
		line := fmt.Sprintf("| %v | %d | %d | %d | %.1f %% | %v | %d | %d | %d |\n",
			run, len(done), st.Requests, st.PointsAccepted, 100*goodput, st.Refusals, st.MaxInFlight, st.Lockouts, leasesIn(t, rdb))
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.WriteString(line)
			f.Close()
		}
	}
}

// leaseTTL is the client's default lease time: a slot leaked by a process
// comes back within it.
func leaseTTL() time.Duration { return 30 * time.Second }
