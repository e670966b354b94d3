package sandbox

import (
	"net/http"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

type meJSON struct {
	KeyID     string `json:"keyId"`
	Principal struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"principal"`
	Organization struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"organization"`
}

const orgName = "Muster GmbH"

func (s *Server) getMe(c *call, _ *http.Request) answer {
	var me meJSON
	me.KeyID = c.key.id
	me.Principal.ID = c.key.principal.id
	me.Principal.Type = c.key.principal.kind
	me.Principal.Name = c.key.principal.name
	me.Organization.ID = s.orgID
	me.Organization.Name = orgName
	return jsonAnswer(http.StatusOK, me)
}

type policyJSON struct {
	Name         string `json:"name"`
	Quota        int    `json:"quota"`
	Window       *int64 `json:"window,omitempty"`
	Unit         string `json:"unit"`
	Remaining    int    `json:"remaining"`
	ResetSeconds int64  `json:"resetSeconds"`
	Capacity     *int   `json:"capacity,omitempty"`
}

type rateLimitJSON struct {
	Policies          []policyJSON `json:"policies"`
	LockedUntil       *string      `json:"lockedUntil"`
	RejectionsLast60s int          `json:"rejectionsLast60s"`
}

// getRateLimit reports every level of the calling key after this call was
// charged, then every enforced extra policy. The org entry's remaining is
// what this key can still take from the org: the lesser of the org level
// and the key's share of it.
func (s *Server) getRateLimit(c *call, _ *http.Request) answer {
	k := c.key
	s.advance(k, c.now)
	s.pruneRefusals(k, c.now)
	out := rateLimitJSON{RejectionsLast60s: len(k.refusals)}
	for _, st := range append(s.levels(k, c.now), s.extraListing(k, c.now)...) {
		p := policyJSON{Name: st.name, Quota: st.quota, Unit: st.unit, Remaining: st.remaining,
			ResetSeconds: ceilDiv(st.reset, time.Second)}
		if st.window > 0 {
			w := windowSeconds(st.window)
			p.Window = &w
		}
		if st.capacity > 0 {
			p.Capacity = &st.capacity
		}
		out.Policies = append(out.Policies, p)
	}
	if c.now.Before(k.lockedUntil) {
		t := k.lockedUntil.UTC().Format(time.RFC3339)
		out.LockedUntil = &t
	}
	return jsonAnswer(http.StatusOK, out)
}

func (s *Server) getOpenAPI(_ *call, _ *http.Request) answer {
	a := newAnswer(http.StatusOK)
	a.header.Set("Content-Type", "application/json")
	a.body = ops.Spec
	return a
}
