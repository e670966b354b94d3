package sandbox

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dunglas/httpsfv"
)

// stateNow is the level or extra policy partition name of key as s sees it
// now.
func stateNow(s *Server, key, name, pk string) (levelState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	now := time.Now()
	s.advance(k, now)
	for _, st := range s.levels(k, now) {
		if st.name == name {
			return st, true
		}
	}
	for i, p := range s.extras {
		if p.Name == name {
			return s.extraState(k, i, pk, now), true
		}
	}
	return levelState{}, false
}

// sfMemberOf returns the name, r, t and pk of a RateLimit member.
func sfMemberOf(t *testing.T, m httpsfv.Member) (name string, r, reset int64, pk string) {
	t.Helper()
	it, ok := m.(httpsfv.Item)
	if !ok {
		t.Fatalf("member %v is not an item", m)
	}
	name, _ = it.Value.(string)
	rv, ok1 := it.Params.Get("r")
	tv, ok2 := it.Params.Get("t")
	if !ok1 || !ok2 {
		t.Fatalf("member %v lacks r or t", m)
	}
	if v, ok := it.Params.Get("pk"); ok {
		pk = string(v.([]byte))
	}
	return name, rv.(int64), tv.(int64), pk
}

func TestNoisyHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := []Option{
			WithLimits(Limits{KeyQuota: 120, KeyCapacity: 60, WriteQuota: 10, DeleteQuota: 3}),
			WithExtraPolicies(
				ExtraPolicy{Name: "bodo-search", Quota: 3, Enforced: true, Operations: []string{"listContacts"}, Query: "q"},
				ExtraPolicy{Name: "bodo-path", Quota: 2, Enforced: true, Partitioned: true, Operations: []string{"getContact"}},
				ExtraPolicy{Name: "bodo-soft", Quota: 1, Window: time.Second},
			),
			WithFaults(func(r *http.Request) Fault {
				if r.Header.Get("X-Overload") != "" {
					return Fault{Overloaded: http.StatusServiceUnavailable}
				}
				return Fault{}
			}),
		}
		noisy := New(append(opts, WithNoisyHeaders(7))...)
		plain := New(opts...)
		sides := []*tester{newTester(t, noisy), newTester(t, plain)}
		ids := [2][]string{}
		for i, c := range sides {
			for range 3 {
				ids[i] = append(ids[i], c.createContact("N"))
			}
		}
		base := []string{"key", "principal", "org", "parallel"}
		kinds := []struct {
			method, path string
			body         any
			names        []string
			hdr          []string
		}{
			{"GET", "/v1/me", nil, nil, nil},
			{"GET", "/v1/contacts?q=N", nil, []string{"egress", "bodo-search"}, nil},
			{"GET", "/v1/contacts", nil, []string{"egress"}, nil},
			{"GET", "/v1/contacts/%s", nil, []string{"egress", "bodo-path"}, nil},
			{"POST", "/v1/contacts", `{"name":"N"}`, []string{"write"}, nil},
			{"DELETE", "/v1/contacts/%s", nil, []string{"write", "delete", "delete-day"}, nil},
			{"GET", "/v1/rate_limit", nil, nil, nil},
			{"GET", "/v1/nope", nil, nil, nil},
			{"GET", "/v1/me", nil, nil, []string{"X-Overload", "1"}},
		}
		rng := rand.New(rand.NewPCG(1, 2))
		var (
			lineCounts    = map[int]int{}
			firstPolicy   = map[string]bool{}
			twoMembers    int
			unknownParams int
			explicitQu    int
			spacing       = map[string]bool{}
		)
		for i := range 600 {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			kind := kinds[rng.IntN(len(kinds))]
			pick := rng.IntN(3)
			var rs [2]*reply
			for j, c := range sides {
				path := kind.path
				if strings.Contains(path, "%s") {
					path = fmt.Sprintf(path, ids[j][pick%len(ids[j])])
				}
				if i%50 == 7 {
					c = c.as("")
				}
				rs[j] = c.do(kind.method, path, kind.body, kind.hdr...)
				if kind.method == "POST" && rs[j].status == http.StatusCreated {
					ids[j] = append(ids[j], rs[j].obj(t)["id"].(string))
				}
			}
			rn, rp := rs[0], rs[1]
			if rn.status != rp.status {
				t.Fatalf("request %d %s %s: status %d noisy, %d plain", i, kind.method, kind.path, rn.status, rp.status)
			}

			lines := rn.header.Values("RateLimit-Policy")
			lineCounts[len(lines)]++
			pol, err := httpsfv.UnmarshalList(lines)
			if err != nil {
				t.Fatalf("RateLimit-Policy %q: %v", lines, err)
			}
			want := map[string]any{} // the plain twin's quotas
			plainPol, err := httpsfv.UnmarshalList(rp.header.Values("RateLimit-Policy"))
			if err != nil || len(rp.header.Values("RateLimit-Policy")) != 1 {
				t.Fatalf("plain RateLimit-Policy %q: %v", rp.header.Values("RateLimit-Policy"), err)
			}
			for _, m := range plainPol {
				q, _ := m.(httpsfv.Item).Params.Get("q")
				want[m.(httpsfv.Item).Value.(string)] = q
			}
			names := map[string]bool{}
			for k, m := range pol {
				it := m.(httpsfv.Item)
				name := it.Value.(string)
				names[name] = true
				if k == 0 {
					firstPolicy[name] = true
				}
				if w, ok := want[name]; ok {
					q, _ := it.Params.Get("q")
					if q != w {
						t.Errorf("%s q=%v noisy, %v plain", name, q, w)
					}
				}
				for _, key := range it.Params.Names() {
					switch key {
					case "q", "w", "pk":
					case "qu":
						if v, _ := it.Params.Get("qu"); v == "requests" {
							explicitQu++
						}
					default:
						unknownParams++
					}
				}
			}
			for name := range want {
				if !names[name] {
					t.Errorf("noisy RateLimit-Policy lacks %s: %q", name, lines)
				}
			}
			if !names["bodo-export"] || !names["bodo-tenant"] || len(names) != len(want)+2 {
				t.Errorf("noisy RateLimit-Policy policies %v", names)
			}
			for _, l := range lines {
				for _, sp := range []string{",\t", ", ", " ,", "; "} {
					if strings.Contains(l, sp) {
						spacing[sp] = true
					}
				}
			}

			rl, err := httpsfv.UnmarshalList(rn.header.Values("RateLimit"))
			if err != nil || len(rl) == 0 || len(rl) > 2 {
				t.Fatalf("RateLimit %q: %v", rn.header.Values("RateLimit"), err)
			}
			if len(rl) == 2 {
				twoMembers++
			}
			plainRL, err := httpsfv.UnmarshalList(rp.header.Values("RateLimit"))
			if err != nil || len(plainRL) != 1 {
				t.Fatalf("plain RateLimit %q: %v", rp.header.Values("RateLimit"), err)
			}
			pName, pR, pT, pPK := sfMemberOf(t, plainRL[0])
			found := false
			for _, m := range rl {
				name, r, reset, pk := sfMemberOf(t, m)
				if !slices.Contains(base, name) && !slices.Contains(kind.names, name) {
					t.Errorf("%s %s: RateLimit names %s, which does not apply: %q", kind.method, kind.path, name, rn.header.Values("RateLimit"))
				}
				if name == pName && r == pR && reset == pT && (pk == "") == (pPK == "") {
					found = true
				}
				if i%50 == 7 {
					continue // no key: a fresh key level
				}
				if st, ok := stateNow(noisy, TestKey, name, pk); !ok || int64(st.remaining) != r || ceilDiv(st.reset, time.Second) != reset {
					t.Errorf("%s %s: member %s r=%d t=%d, the level has r=%d t=%v", kind.method, kind.path, name, r, reset, st.remaining, st.reset)
				}
			}
			if !found {
				t.Errorf("%s %s: noisy RateLimit %q lacks the narrowest %s r=%d t=%d", kind.method, kind.path, rn.header.Values("RateLimit"), pName, pR, pT)
			}
		}
		if lineCounts[2] == 0 || lineCounts[3] == 0 || len(lineCounts) != 2 {
			t.Errorf("RateLimit-Policy line counts %v, want 2 and 3 lines", lineCounts)
		}
		if len(firstPolicy) < 5 || twoMembers < 50 || unknownParams < 100 || explicitQu < 20 || len(spacing) != 4 {
			t.Errorf("not noisy enough: first policies %v, %d two-member fields, %d unknown parameters, %d explicit qu, spacing %v",
				firstPolicy, twoMembers, unknownParams, explicitQu, spacing)
		}
	})
}

// TestNoisyHeadersAreDeterministic: the same seed and requests give the
// same fields.
func TestNoisyHeadersAreDeterministic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got [2][]string
		for i := range got {
			c := newTester(t, New(WithNoisyHeaders(42)))
			for range 20 {
				r := c.do("GET", "/v1/me", nil)
				got[i] = append(got[i], strings.Join(r.header.Values("RateLimit-Policy"), "\n")+"\n"+r.header.Get("RateLimit"))
			}
		}
		if !slices.Equal(got[0], got[1]) {
			t.Error("the same seed gave other fields")
		}
		c := newTester(t, New(WithNoisyHeaders(43)))
		r := c.do("GET", "/v1/me", nil)
		if strings.Join(r.header.Values("RateLimit-Policy"), "\n")+"\n"+r.header.Get("RateLimit") == got[0][0] {
			t.Error("another seed gave the same fields")
		}
	})
}
