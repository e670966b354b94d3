package agents

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// TestProfileTargetsOfItsOwn: a profile's own targets replace the goodput
// floor and the share of 429s, in Targets and in the guarantees.
func TestProfileTargetsOfItsOwn(t *testing.T) {
	r := ProfileResult{Profile: "p", Duration: time.Hour, Requests: 1000, Points: 920, Allowance: 1000, Refused: 40, MaxFlight: 6}
	if len(r.Targets()) != 2 || rowGuarantees([]ProfileResult{r}) == "" {
		t.Errorf("with the issue's targets: misses %q, guarantees %q", r.Targets(), rowGuarantees([]ProfileResult{r}))
	}
	r.TargetGoodput, r.TargetRefused = 0.90, 0.05
	if len(r.Targets()) != 0 || rowGuarantees([]ProfileResult{r}) != "" || guarantees(r) != "" {
		t.Errorf("with 90 %% and 5 %%: misses %q, guarantees %q", r.Targets(), rowGuarantees([]ProfileResult{r}))
	}
	r.Refused = 60
	if len(r.Targets()) != 1 || rowGuarantees([]ProfileResult{r}) == "" {
		t.Errorf("6 %% refused with 5 %% allowed: misses %q, guarantees %q", r.Targets(), rowGuarantees([]ProfileResult{r}))
	}
	kept := ProfileResult{Profile: "p", Duration: time.Hour, Requests: 1000, Points: 920, Allowance: 1000, TargetGoodput: 0.90, TargetRefused: 0.05}
	if row := []ProfileResult{r, kept, r}; rowGuarantees(row) == "" {
		t.Errorf("two of three runs 6 %% refused: the median misses too, guarantees %q", rowGuarantees(row))
	}
	better := kept
	better.Points = 950
	if row := []ProfileResult{r, kept, better}; rowGuarantees(row) != "" {
		t.Errorf("one of three runs 6 %% refused: %q, want the median to keep them", rowGuarantees(row))
	}
}

// TestRunProfileBehindTheGateway: the gateway's refusals count as requests
// and 429s, and the allowance is the gateway's requests at the run's points
// a request, below the key's.
func TestRunProfileBehindTheGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := sandbox.ProfileByName("gateway")
		const d = 2 * time.Minute
		r, err := RunProfile(p, "bodo-go", SDKClient(bodo.WithLogger(slog.New(slog.DiscardHandler))), 8, d, seed)
		if err != nil {
			t.Fatal(err)
		}
		if r.GatewayRefused == 0 || r.RefusedBy["Too Many Requests "] != r.GatewayRefused || r.Refused < r.GatewayRefused {
			t.Errorf("gateway refusals %d, 429s %d by %v", r.GatewayRefused, r.Refused, r.RefusedBy)
		}
		if r.Requests <= r.Refused || r.Rate429() >= 1 {
			t.Errorf("%d requests, %d refused", r.Requests, r.Refused)
		}
		if gw := p.Gateway.Allowance(d); r.Allowance >= p.Allowance(d) || r.Allowance < 3*gw || r.Allowance > 5*gw {
			t.Errorf("allowance %d points: the key's is %d, the gateway's %d requests", r.Allowance, p.Allowance(d), gw)
		}
		if r.Goodput() > 1 || r.TargetGoodput != 0.90 || r.TargetRefused != 0.05 {
			t.Errorf("goodput %.3f, targets %v and %v", r.Goodput(), r.TargetGoodput, r.TargetRefused)
		}
	})
}
