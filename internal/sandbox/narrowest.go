package sandbox

import "time"

// WithNarrowestOfAll makes the RateLimit field of every answer but a
// refusal name the narrowest of all the key's levels (the smallest
// remaining share of its full level): the built-in ones (parallel only when
// no slot is left) and every enforced extra policy, whether or not the call
// takes from it. It is how a server reads "the narrowest one" of bodo-api.md
// when it means the key's narrowest, not the call's: the answer to a plain
// read names a search policy once searches have used more of it than the
// read has of the key. A refusal's RateLimit still names the refusing level.
func WithNarrowestOfAll() Option { return func(c *config) { c.narrowestAll = true } }

// keyStates are every level of k at now as WithNarrowestOfAll reports them:
// the built-in levels (parallel only when no slot is left), then the
// enforced extra policies as GET /v1/rate_limit lists them.
func (s *Server) keyStates(k *apiKey, now time.Time) []levelState {
	s.advance(k, now)
	var out []levelState
	for _, st := range s.levels(k, now) {
		if st.name != policyParallel || st.remaining == 0 {
			out = append(out, st)
		}
	}
	return append(out, s.extraListing(k, now)...)
}
