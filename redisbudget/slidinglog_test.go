package redisbudget

import (
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// slidingLogWrites are the documented limits at 10 s windows (as
// bodo-staging's -scale 6 has them) with a write level of 20 writes a
// window counted as a sliding log whose t says when it is full again (as
// bodo-staging's has it), so that for the agents' mix (40 % writes, about
// 4 points a call) the write level binds: 2 writes a second are 5 calls
// and 20 points a second, below the key's 30.
func slidingLogWrites() sandbox.Limits {
	lim := sandbox.DefaultLimits()
	lim.Window = 10 * time.Second
	lim.WriteQuota = 20
	lim.Shapes = map[string]sandbox.Shape{"write": sandbox.SlidingLogUntilFull}
	return lim
}

// refusedPolicy finds the policy of a refusal the client logged.
var refusedPolicy = regexp.MustCompile(`bodo: refused.* policy=(\S+)`)

// TestFourProcessesOnASlidingLogWriteLevel runs the agents program in 4 OS
// processes × 8 agents on one key, sharing the budget through a real Redis,
// against a sandbox whose binding write level is a sliding log (a refusal
// there asks to wait until the oldest write leaves the window, up to a
// whole window). It must see no lockout and never more calls in flight than
// the parallel quota. It logs the writes accepted against what the write
// level allows, the refusals (by policy, from the processes' logs) and the
// early requests; the targets for them (at least 90 % of the writes,
// refusals at most 0.5 % of the requests, no early request) fail the test
// only with BODO_REDIS_STRICT=1: a 30 s run has about 220 requests, so a
// second refusal misses the target. The run lasts
// 30 s (3 windows); BODO_LONG=1 makes it 3 minutes. It does not overlap
// the other long runs: under their load, once in four runs, a 7th call was
// in flight, which is still to be explained.
func TestFourProcessesOnASlidingLogWriteLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s run of 4 processes")
	}
	run := 30 * time.Second
	if os.Getenv("BODO_LONG") == "1" {
		run = 3 * time.Minute
	}
	rs := startRedis(t)
	bin := buildAgents(t)
	lim := slidingLogWrites()
	srv, url := serveSandbox(t, lim, 20*time.Millisecond)
	var procs []*agentProcess
	for i := range 4 {
		procs = append(procs, startAgents(t, bin, url, "-redis", rs.Addr, "-agents", "8", "-duration", run.String(), "-seed", fmt.Sprint(i+1)))
	}
	byPolicy := map[string]int{}
	for i, p := range procs {
		if s := p.wait(t); s.Calls == 0 {
			t.Errorf("process %d made no call: %+v", i, s)
		}
		if os.Getenv("DBGREF") != "" {
			t.Log(p.errOut.String())
		}
		for _, m := range refusedPolicy.FindAllStringSubmatch(p.errOut.String(), -1) {
			byPolicy[m[1]]++
		}
	}
	st := srv.Stats(sandbox.TestKey)
	allowed := lim.WriteQuota * int((run+lim.Window-1)/lim.Window)
	refused := 0
	for _, n := range st.Refusals {
		refused += n
	}
	goodput := float64(st.Writes) / float64(allowed)
	rate := float64(refused) / float64(max(st.Requests, 1))
	t.Logf("4 processes × 8 agents, %v, write level a sliding log of %d per %v: %d requests, %d writes of %d allowed (%.1f %%), %d points, refused %d (%.2f %%) %v (by policy, as the processes logged them: %v), early %d %v %q, max in flight %d, lockouts %d",
		run, lim.WriteQuota, lim.Window, st.Requests, st.Writes, allowed, 100*goodput, st.PointsAccepted, refused, 100*rate, st.Refusals, byPolicy,
		st.EarlyRequests, st.EarlyByPolicy, st.FirstEarly, st.MaxInFlight, st.Lockouts)
	if st.Lockouts != 0 {
		t.Errorf("%d lockouts", st.Lockouts)
	}
	if st.MaxInFlight > lim.Parallel {
		t.Errorf("%d calls in flight at once over all processes; the parallel quota is %d", st.MaxInFlight, lim.Parallel)
	}
	if st.Writes > allowed {
		t.Errorf("%d writes accepted; the write level allows %d", st.Writes, allowed)
	}
	var miss []string
	if goodput < 0.90 {
		miss = append(miss, fmt.Sprintf("writes %.1f %% of the write level's allowance < 90 %%", 100*goodput))
	}
	if rate > 0.005 {
		miss = append(miss, fmt.Sprintf("refusals %.2f %% > 0.5 %%", 100*rate))
	}
	if st.EarlyRequests > 0 {
		miss = append(miss, fmt.Sprintf("%d early requests", st.EarlyRequests))
	}
	for _, m := range miss {
		if os.Getenv("BODO_REDIS_STRICT") == "1" {
			t.Error(m)
		} else {
			t.Log("target missed: " + m)
		}
	}
}
