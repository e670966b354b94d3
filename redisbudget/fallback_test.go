package redisbudget

import (
	"fmt"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// TestEightProcessesOutlastA70SecondOutage runs the agents program in 8 OS
// processes sharing one key through Redis, and makes Redis unreachable for
// 70 s, longer than the lockout guard's window. Each process falls back to
// its share of the key (1/8 of the parallel quota, of the guard's refusals
// and of the key's rate, by the count Redis kept): the key is never locked
// out and never has more calls in flight than its parallel quota.
func TestEightProcessesOutlastA70SecondOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("an 88 s run of 8 processes")
	}
	t.Parallel() // real time, a Redis and a sandbox of its own: it overlaps the other long runs
	_, px, bin, lim, srv, api := chaosSetup(t, 20*time.Millisecond)
	const before, outage, after = 8 * time.Second, 70 * time.Second, 10 * time.Second
	run := before + outage + after
	var procs []*agentProcess
	for i := range 8 {
		procs = append(procs, startAgents(t, bin, api, "-redis", px.Addr, "-agents", "4", "-duration", run.String(), "-seed", fmt.Sprint(i+1)))
	}
	time.Sleep(before)
	atCut := srv.Stats(sandbox.TestKey)
	px.Cut(true)
	time.Sleep(outage)
	atBack := srv.Stats(sandbox.TestKey)
	px.Cut(false)
	for i, p := range procs {
		if s := p.wait(t); s.Calls == 0 {
			t.Errorf("process %d made no call: %+v", i, s)
		}
	}
	st := srv.Stats(sandbox.TestKey)
	rate := float64(lim.KeyQuota) / lim.Window.Seconds()
	during := atBack.PointsAccepted - atCut.PointsAccepted
	t.Logf("8 processes × 4 agents, Redis unreachable %v of %v: %d points accepted during the outage (the key's rate allows %.0f), refusals %v (%v before the outage), max in flight %d, lockouts %d",
		outage, run, during, rate*outage.Seconds(), st.Refusals, atCut.Refusals, st.MaxInFlight, st.Lockouts)
	if st.Lockouts != 0 {
		t.Errorf("%d lockouts", st.Lockouts)
	}
	if st.MaxInFlight > lim.Parallel {
		t.Errorf("%d calls in flight at once; the parallel quota is %d", st.MaxInFlight, lim.Parallel)
	}
	if during == 0 {
		t.Error("no call went through during the outage")
	}
}
