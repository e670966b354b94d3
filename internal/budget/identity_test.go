package budget

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

func splitOf(s *State, name string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.levels[name].split
}

// TestKeysOfOnePrincipalSplitItsLevels: a second key on a host makes both
// want their identity, once; keys of one principal split the principal
// level, keys of one org the org level; a key that leaves (idle) gives its
// part back.
func TestKeysOfOnePrincipalSplitItsLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "identity.test"
		now := time.Now()
		a := For(host, "a")
		if a.WantsIdentity(now) {
			t.Error("the only key on a host wants its identity")
		}
		b := For(host, "b")
		if !a.WantsIdentity(now) || !b.WantsIdentity(now) {
			t.Fatal("two keys on a host do not want their identities")
		}
		if a.WantsIdentity(now) {
			t.Error("an identity is wanted twice while it is fetched")
		}
		b.IdentityFailed(now)
		if b.WantsIdentity(now) || !b.WantsIdentity(now.Add(identityRetry)) {
			t.Error("a failed fetch is not asked again after identityRetry, or at once")
		}
		c := For(host, "c")
		a.SetIdentity("prn_1", "org_1")
		b.SetIdentity("prn_1", "org_1")
		c.SetIdentity("prn_2", "org_1")
		if got := splitOf(a, Principal); got != 0.5 {
			t.Errorf("principal part of a = %v, want 1/2", got)
		}
		if got := splitOf(c, Principal); got != 1 {
			t.Errorf("principal part of the only key of prn_2 = %v, want 1", got)
		}
		if got := splitOf(c, Org); got != 1.0/3 {
			t.Errorf("org part of c = %v, want 1/3", got)
		}
		other := For("other."+host, "a")
		other.SetIdentity("prn_1", "org_1")
		if got := splitOf(a, Principal); got != 0.5 {
			t.Errorf("a key on another host changed the part on this one: %v", got)
		}

		busy := admitNow(t, b, call(ops.GetMe, "")) // in flight: b is not idle
		time.Sleep(IdleTTL + sweepEvery)
		For("trigger."+host, "k")
		if b.live() != b || a.live() == a {
			t.Fatal("the idle keys did not leave, or the busy one did")
		}
		if got := splitOf(b, Principal); got != 1 {
			t.Errorf("principal part of b after a left = %v, want 1", got)
		}
		if got := splitOf(b, Org); got != 1 {
			t.Errorf("org part of b after a and c left = %v, want 1", got)
		}
		busy.Finish(answer("", ""))
	})
}

// TestAKeyKeepsItsPartLongAfterTheWord: a key's part of a level it splits
// refills up to its part of the level, however long ago the server named
// the level: a key that took less than its part all the while still finds
// its part there.
func TestAKeyKeepsItsPartLongAfterTheWord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "part.test"
		a, b := For(host, "a"), For(host, "b")
		a.SetIdentity("prn_1", "org_1")
		b.SetIdentity("prn_1", "org_1")
		admitNow(t, a, call(ops.GetContact, "")).Finish(answer(`"principal";q=1200;w=60`, `"principal";r=1200;t=0`))
		for range 1200 { // 2 points a second, a fifth of a's part of the principal
			time.Sleep(500 * time.Millisecond)
			admitNow(t, a, call(ops.GetContact, "")).Finish(answer("", ""))
		}
		a.mu.Lock()
		left := a.levels[Principal].available(time.Now())
		a.mu.Unlock()
		if left < 590 {
			t.Errorf("a's part of the principal, 10 minutes after the word: %.0f, want its part of a full level, 600", left)
		}
	})
}
