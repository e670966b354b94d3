package sandbox

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// WithNoisyHeaders makes RateLimit and RateLimit-Policy vary from answer to
// answer as far as RFC 9651 and draft-ietf-httpapi-ratelimit-headers-11
// allow, pseudo-randomly from seed (and the order requests arrive in):
//
//   - RateLimit-Policy comes in 2 or 3 field lines (which combine into one
//     list), its members in varying order;
//   - parameters come in varying order, items carry unknown parameters
//     (x-region="eu", bodo-tier=3, tokens, booleans, decimals, byte
//     sequences) and qu="requests" is sometimes given explicitly;
//   - the optional whitespace around commas and after semicolons varies;
//   - RateLimit-Policy also announces policies no call is ever charged to:
//     "bodo-export";q=12;w=3600 and a partitioned "bodo-tenant" with pk;
//   - RateLimit sometimes carries a second member, before or after the
//     first, for another level that applies to the call, with its true r
//     and t.
//
// The levels named in RateLimit are still only ones that apply to the call,
// and the narrowest (or the refusing) level is always among them.
func WithNoisyHeaders(seed uint64) Option {
	return func(c *config) { c.noisy, c.noiseSeed = true, seed }
}

// sfParam is a parameter of a Structured Fields item; val is the serialized
// bare item, "" for Boolean true in its short form.
type sfParam struct{ key, val string }

// sfMember is a List member of RateLimit or RateLimit-Policy: a String item
// with parameters.
type sfMember struct {
	name   string
	params []sfParam
}

func (m sfMember) String() string {
	var b strings.Builder
	b.WriteString(sfString(m.name))
	for _, p := range m.params {
		b.WriteString(";" + p.key)
		if p.val != "" {
			b.WriteString("=" + p.val)
		}
	}
	return b.String()
}

// sfString serializes a String; s is printable ASCII.
func sfString(s string) string {
	return `"` + sfEscaper.Replace(s) + `"`
}

var sfEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// joinMembers serializes a List the canonical way.
func joinMembers(ms []sfMember) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return strings.Join(parts, ", ")
}

// noise varies the rate-limit fields; it is used under Server.mu.
type noise struct {
	rng   *rand.Rand
	fakes []sfMember // announced, never charged
}

func newNoise(seed uint64, taken func(string) bool) *noise {
	n := &noise{rng: rand.New(rand.NewPCG(seed, 0x6e6f697379))}
	tenant := fmt.Sprintf("tenant-%d", seed%997)
	fakes := []sfMember{
		{name: "bodo-export", params: []sfParam{{"q", "12"}, {"w", "3600"}}},
		{name: "bodo-tenant", params: []sfParam{{"q", "5000"}, {"w", "60"}, {"qu", `"points"`},
			{"pk", ":" + base64.StdEncoding.EncodeToString([]byte(tenant)) + ":"}}},
	}
	for _, f := range fakes {
		if !taken(f.name) {
			n.fakes = append(n.fakes, f)
		}
	}
	return n
}

// unknownParams are parameters no bodo client knows.
var unknownParams = []sfParam{
	{"x-region", `"eu"`}, {"bodo-tier", "3"}, {"x-zone", "eu-central-1"}, {"x-beta", ""},
	{"x-canary", "?0"}, {"x-weight", "1.5"}, {"x-trace", ":Ym9kbw==:"}, {"x-note", `"a \"quoted\" \\ note"`},
}

// decorate shuffles m's parameters and maybe adds unknown ones; in a
// RateLimit-Policy member (policy) maybe also an explicit qu="requests".
func (n *noise) decorate(m sfMember, policy bool) sfMember {
	ps := slices.Clone(m.params)
	hasQu := slices.ContainsFunc(ps, func(p sfParam) bool { return p.key == "qu" })
	if policy && !hasQu && n.rng.IntN(3) == 0 {
		ps = append(ps, sfParam{"qu", `"requests"`})
	}
	extra := 0 // half the items have none, some one, a few two
	switch x := n.rng.IntN(20); {
	case x >= 17:
		extra = 2
	case x >= 10:
		extra = 1
	}
	for _, i := range n.rng.Perm(len(unknownParams))[:extra] {
		ps = append(ps, unknownParams[i])
	}
	n.rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	return sfMember{name: m.name, params: ps}
}

// item serializes m with varying whitespace after its semicolons.
func (n *noise) item(m sfMember) string {
	var b strings.Builder
	b.WriteString(sfString(m.name))
	for _, p := range m.params {
		b.WriteString(";")
		if n.rng.IntN(4) == 0 {
			b.WriteString(" ")
		}
		b.WriteString(p.key)
		if p.val != "" {
			b.WriteString("=" + p.val)
		}
	}
	return b.String()
}

var listSeparators = []string{",", ", ", ",  ", " ,", " , ", ",\t", "\t, "}

func (n *noise) join(ms []sfMember, policy bool) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString(listSeparators[n.rng.IntN(len(listSeparators))])
		}
		b.WriteString(n.item(n.decorate(m, policy)))
	}
	return b.String()
}

func (n *noise) rateLimit(ms []sfMember) string { return n.join(ms, false) }

// policyLines shuffles the members and splits them over 2 or 3 lines.
func (n *noise) policyLines(ms []sfMember) []string {
	ms = slices.Clone(ms)
	n.rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	lines := min(2+n.rng.IntN(2), len(ms))
	cuts := append(n.rng.Perm(len(ms) - 1)[:lines-1], -1)
	for i := range cuts {
		cuts[i]++
	}
	slices.Sort(cuts)
	cuts = append(cuts, len(ms))
	out := make([]string, 0, lines)
	for i := 0; i+1 < len(cuts); i++ {
		out = append(out, n.join(ms[cuts[i]:cuts[i+1]], true))
	}
	return out
}

// withSecond is the states a RateLimit field reports: states[i] and, with
// noisy headers now and then, another one of states, in either order.
func (s *Server) withSecond(states []levelState, i int) []levelState {
	if s.noise == nil || len(states) < 2 || s.noise.rng.IntN(3) != 0 {
		return states[i : i+1]
	}
	j := s.noise.rng.IntN(len(states) - 1)
	if j >= i {
		j++
	}
	if s.noise.rng.IntN(2) == 0 {
		return []levelState{states[i], states[j]}
	}
	return []levelState{states[j], states[i]}
}
