package sandbox

import (
	"net/http"
	"strconv"
)

// WithContradictedHeaders makes every successful answer (a status below
// 400) carry an absurd RateLimit-Policy, "key";q=0;w=<the window in
// seconds>, and a RateLimit its own success contradicts, "key";r=0;t=0.
// The levels are enforced as usual, and every other answer, refusals
// included, carries the true fields.
func WithContradictedHeaders() Option { return func(c *config) { c.contradicted = true } }

// contradict gives x the fields of WithContradictedHeaders when it is a
// success.
func (s *Server) contradict(x *exchange) {
	if x.ans.status >= http.StatusBadRequest {
		return
	}
	if x.ans.header == nil {
		x.ans.header = http.Header{}
	}
	x.policy = []string{sfString(policyKey) + ";q=0;w=" + strconv.FormatInt(windowSeconds(s.lim.Window), 10)}
	x.ans.header.Set("RateLimit", sfString(policyKey)+";r=0;t=0")
}
