package budget

import (
	"strings"
	"time"
)

// Levels that several keys share: the principal level (every key of a
// person or service account) and the org level (every key of the
// organisation). Each key's state reads the server's word for them, but two
// keys that read the same r take it twice. So the keys of this process that
// are known to share a principal (or an org) split its quota: each may take
// at most its part within the level's window, 1/N of the quota for N keys
// (for org, no more than the key's own share of it either). A key learns
// whom it belongs to from GET /v1/me (SetIdentity); a client asks for it
// once a second key talks to the same host in the process (WantsIdentity).

// identity is whom a state's key belongs to; guarded by the lock of states.
type identity struct {
	principal, org string // group keys of the map groups; "" unknown
}

// hostOf is the host part of a state id of For ("host/keyhash").
func hostOf(id string) string { return id[:strings.LastIndexByte(id, '/')+1] }

// joinHostLocked counts s among the states of its host; with a second
// state on the host, every state there that does not know its identity
// wants it. The lock of states is held.
func joinHostLocked(s *State) {
	host := hostOf(s.id)
	members := states.hosts[host]
	if members == nil {
		members = map[*State]struct{}{}
		states.hosts[host] = members
	}
	members[s] = struct{}{}
	switch {
	case len(members) == 2:
		for m := range members {
			m.identWanted.Store(m.ident.principal == "")
		}
	case len(members) > 2:
		s.identWanted.Store(true) // the others were asked when the second came
	}
}

// leaveLocked takes a retired s out of its host and its groups (leaveGroupsLocked).
// The lock of states is held, s.mu is not.
func leaveLocked(s *State) {
	host := hostOf(s.id)
	delete(states.hosts[host], s)
	if len(states.hosts[host]) == 0 {
		delete(states.hosts, host)
	}
	leaveGroupsLocked(s)
}

// leaveGroupsLocked takes s out of its groups and gives the remaining
// members their larger parts. The lock of states is held, s.mu is not.
func leaveGroupsLocked(s *State) {
	for _, g := range []string{s.ident.principal, s.ident.org} {
		if g == "" {
			continue
		}
		delete(states.groups[g], s)
		if len(states.groups[g]) == 0 {
			delete(states.groups, g)
		}
		splitLocked(g)
	}
	s.ident = identity{}
}

// SetIdentity records that s's key belongs to principal and org (their ids,
// from GET /v1/me) and splits the shared levels among the keys of this
// process on the same host that belong to them too.
func (s *State) SetIdentity(principal, org string) {
	s = s.live()
	if s.id == "" || principal == "" && org == "" {
		return
	}
	host := hostOf(s.id)
	p, o := "", ""
	if principal != "" {
		p = host + " principal " + principal
	}
	if org != "" {
		o = host + " org " + org
	}
	states.Lock()
	defer states.Unlock()
	s.identWanted.Store(false)
	if s.retired.Load() || s.ident == (identity{principal: p, org: o}) {
		return
	}
	leaveGroupsLocked(s)
	s.ident = identity{principal: p, org: o}
	for _, g := range []string{p, o} {
		if g == "" {
			continue
		}
		if states.groups[g] == nil {
			states.groups[g] = map[*State]struct{}{}
		}
		states.groups[g][s] = struct{}{}
		splitLocked(g)
	}
}

// splitLocked gives every member of group g its part of the group's level.
// The lock of states is held.
func splitLocked(g string) {
	name := Principal
	if strings.Contains(g, " org ") {
		name = Org
	}
	members := states.groups[g]
	part := 1 / float64(len(members))
	for m := range members {
		m.mu.Lock()
		if l := m.levels[name]; l != nil && l.parts.split != part {
			l.parts.split = part
			l.gate.wakeHead()
		}
		m.mu.Unlock()
	}
}

// identityRetry is how long a client waits before it asks GET /v1/me again
// after the answer failed.
const identityRetry = time.Minute

// WantsIdentity reports whether the caller should fetch s's identity (GET
// /v1/me) now and tell it with SetIdentity or IdentityFailed: another key
// talks to the same host in this process and s does not know whom its key
// belongs to. It answers true to one caller at a time.
func (s *State) WantsIdentity(now time.Time) bool {
	s = s.live()
	if !s.identWanted.Load() || now.UnixNano() < s.identRetryAt.Load() {
		return false
	}
	return s.identWanted.CompareAndSwap(true, false)
}

// IdentityFailed says that fetching s's identity failed; it is asked for
// again after identityRetry.
func (s *State) IdentityFailed(now time.Time) {
	s = s.live()
	s.identRetryAt.Store(now.Add(identityRetry).UnixNano())
	s.identWanted.Store(true)
}
