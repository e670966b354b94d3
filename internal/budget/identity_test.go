package budget

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

func splitOf(s *State, name string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.levels[name].parts.split
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

// twoKeysOfOnePrincipal returns two keys on host that split the levels
// of one principal and org.
func twoKeysOfOnePrincipal(host string) (a, b *State) {
	a, b = For(host, "a"), For(host, "b")
	a.SetIdentity("prn_"+host, "org_"+host)
	b.SetIdentity("prn_"+host, "org_"+host)
	return a, b
}

// TestAKeyKeepsItsPartLongAfterTheWord: a key's part of a level it splits
// refills up to its part of the level, however long ago the server named
// the level: a key that took less than its part all the while still finds
// its part there.
func TestAKeyKeepsItsPartLongAfterTheWord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := twoKeysOfOnePrincipal("part.test")
		admitNow(t, a, call(ops.GetContact, "")).Finish(answer(`"principal";q=1200;w=60`, `"principal";r=1200;t=0`))
		for i := range 1200 { // 2 points a second, a fifth of a's part of the principal
			time.Sleep(500 * time.Millisecond)
			admitNow(t, a, call(ops.GetContact, "")).Finish(answer("", ""))
			if i%120 == 0 {
				admitNow(t, b, call(ops.GetContact, "")).Finish(answer("", "")) // b stays
			}
		}
		a.mu.Lock()
		left, part := a.levels[Principal].available(time.Now()), a.levels[Principal].part()
		a.mu.Unlock()
		if part != 0.5 {
			t.Fatalf("a's part of the principal is %v, want half", part)
		}
		if left < 590 {
			t.Errorf("a's part of the principal, 10 minutes after the word: %.0f, want its part of a full level, 600", left)
		}
	})
}

// TestARefusalBoundsTheKeysPart: a refusal on a level two keys of the
// process split leaves each key its part of what the refusal left, not
// the whole of it.
func TestARefusalBoundsTheKeysPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _ := twoKeysOfOnePrincipal("owe.test")
		admitNow(t, a, call(ops.GetContact, "")).Finish(answer(`"principal";q=1200;w=60`, `"principal";r=1000;t=10`))
		admitNow(t, a, call(ops.GetContact, "")).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, Principal, 10*time.Second))
		time.Sleep(30 * time.Second)
		a.mu.Lock()
		l, now := a.levels[Principal], time.Now()
		l.refill(now)
		if av := l.available(now); av > l.part()*l.tokens+1 {
			t.Errorf("a's part after a refusal: %.1f of a level holding %.1f, split %.2f: both keys may take %.1f", av, l.tokens, l.part(), 2*av)
		}
		a.mu.Unlock()
	})
}

// TestAKeyWithoutAnOrgSplitsNothingOfIt: keys whose identity names a
// principal and no org split no level with each other for the org they
// may not share, nor for their distinct principals; an identity of
// neither changes nothing.
func TestAKeyWithoutAnOrgSplitsNothingOfIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "no-org.identity.test"
		x, y, z := For(host, "x"), For(host, "y"), For(host, "z")
		x.SetIdentity("prn_x", "")
		y.SetIdentity("prn_y", "")
		z.SetIdentity("", "")
		for _, s := range []*State{x, y, z} {
			if p, o := splitOf(s, Principal), splitOf(s, Org); p != 1 || o != 1 {
				t.Errorf("parts of a key without an org: principal %v, org %v, want 1 and 1", p, o)
			}
		}
		x.SetIdentity("prn_x", "org_1") // x leaves the group it had, of no org
		if p, o := splitOf(y, Principal), splitOf(y, Org); p != 1 || o != 1 {
			t.Errorf("after x named its org, y's parts: principal %v, org %v, want 1 and 1", p, o)
		}
	})
}
