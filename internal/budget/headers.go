package budget

import (
	"encoding/base64"
	"net/http"

	"github.com/dunglas/httpsfv"
)

// policyHeader is one member of a RateLimit-Policy field
// (draft-ietf-httpapi-ratelimit-headers-11): a policy's name, quota (q),
// window in seconds (w, 0 when absent) and unit (qu, "requests" when absent).
type policyHeader struct {
	name   string
	quota  int64
	window int64
	unit   string
}

// limitHeader is one member of a RateLimit field: the policy's name, what
// remains of it (r), the seconds until more is available (t, -1 when
// absent) and the partition key (pk, base64 of its bytes; "" when absent).
type limitHeader struct {
	name      string
	remaining int64
	reset     int64
	partition string
}

// parsePolicyHeader parses every RateLimit-Policy line of h as one
// Structured Fields List. A field that is no valid List, or is longer than
// MaxFieldBytes, gives nothing; a
// member that is no String or Token item, or lacks a non-negative integer q,
// is skipped; a w or qu of the wrong type skips the member too. Unknown
// parameters (pk, and whatever later drafts add) are ignored.
func parsePolicyHeader(h http.Header) []policyHeader {
	var out []policyHeader
	for _, m := range parseList(h, fieldRateLimitPolicy) {
		name, params, ok := namedItem(m)
		if !ok {
			continue
		}
		p := policyHeader{name: name, unit: "requests"}
		if p.quota, ok = intParam(params, "q", true); !ok {
			continue
		}
		if p.window, ok = intParam(params, "w", false); !ok {
			continue
		}
		if v, has := params.Get("qu"); has {
			s, isString := v.(string)
			if !isString || s == "" || len(s) > MaxNameBytes {
				continue
			}
			p.unit = s
		}
		out = append(out, p)
	}
	return out
}

// The canonical forms (textproto.CanonicalMIMEHeaderKey) of the fields'
// names, looked up directly so that no lookup builds a key.
const (
	fieldRateLimit       = "Ratelimit"
	fieldRateLimitPolicy = "Ratelimit-Policy"
)

// parseLimitInto parses the RateLimit field like parsePolicyHeader,
// appending to out: each member needs a non-negative integer r; t is
// optional; a pk that is not a Byte Sequence skips the member. The common
// shapes (one field line of up to two members, each a String with integer
// r and t) are parsed without allocating into out; everything else goes
// through httpsfv.
func parseLimitInto(h http.Header, out []limitHeader) []limitHeader {
	if lines := h[fieldRateLimit]; len(lines) == 1 && !fieldTooLong(lines) {
		if fast, ok := parseLimitFast(lines[0], out); ok {
			return fast
		}
	}
	for _, m := range parseList(h, fieldRateLimit) {
		name, params, ok := namedItem(m)
		if !ok {
			continue
		}
		l := limitHeader{name: name, reset: -1}
		if l.remaining, ok = intParam(params, "r", true); !ok {
			continue
		}
		if _, has := params.Get("t"); has {
			if l.reset, ok = intParam(params, "t", true); !ok {
				continue
			}
		}
		if v, has := params.Get("pk"); has {
			b, isBytes := v.([]byte)
			if !isBytes {
				continue
			}
			l.partition = base64.StdEncoding.EncodeToString(b)
		}
		out = append(out, l)
	}
	return out
}

// parseList is the field name of h as a Structured Fields List; nil when
// h has none, it is longer than MaxFieldBytes or it is no valid List.
func parseList(h http.Header, name string) httpsfv.List {
	lines := h[name]
	if len(lines) == 0 || fieldTooLong(lines) {
		return nil
	}
	list, err := httpsfv.UnmarshalList(lines)
	if err != nil {
		return nil
	}
	return list
}

// namedItem returns the name of a list member that is an Item holding a
// String (as the draft says) or a Token (as some servers send), of at most
// MaxNameBytes.
func namedItem(m httpsfv.Member) (string, *httpsfv.Params, bool) {
	item, ok := m.(httpsfv.Item)
	if !ok || item.Params == nil {
		return "", nil, false
	}
	var name string
	switch v := item.Value.(type) {
	case string:
		name = v
	case httpsfv.Token:
		name = string(v)
	}
	return name, item.Params, name != "" && len(name) <= MaxNameBytes
}

// intParam returns a non-negative integer parameter. A missing one is
// (0, !required); one of another type or negative is (0, false).
func intParam(p *httpsfv.Params, key string, required bool) (int64, bool) {
	v, has := p.Get(key)
	if !has {
		return 0, !required
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		return 0, false
	}
	return n, true
}

// parseLimitFast parses the common shape of a RateLimit line: up to two
// members separated by a comma and optional spaces, each a String of
// letters, digits, '-', '_' and '.', with parameters r and t (in either
// order, each at most once, t optional) holding integers of at most 15
// digits, and nothing else. It reports false for anything else, which
// httpsfv then parses; on what it accepts the two agree (FuzzLimitFastPath).
func parseLimitFast(line string, out []limitHeader) ([]limitHeader, bool) {
	i := 0
	for n := 0; ; n++ {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if n == 2 || i >= len(line) || line[i] != '"' {
			return nil, false
		}
		j := i + 1
		for j < len(line) && (line[j] >= 'a' && line[j] <= 'z' || line[j] >= 'A' && line[j] <= 'Z' || line[j] >= '0' && line[j] <= '9' || line[j] == '-' || line[j] == '_' || line[j] == '.') {
			j++
		}
		if j == i+1 || j-i-1 > MaxNameBytes || j >= len(line) || line[j] != '"' {
			return nil, false
		}
		m := limitHeader{name: line[i+1 : j], remaining: -1, reset: -1}
		i = j + 1
		for i < len(line) && line[i] == ';' {
			if i+2 >= len(line) || line[i+2] != '=' {
				return nil, false
			}
			key := line[i+1]
			i += 3
			start := i
			var v int64
			for i < len(line) && line[i] >= '0' && line[i] <= '9' {
				v = v*10 + int64(line[i]-'0')
				i++
			}
			if i == start || i-start > 15 {
				return nil, false
			}
			switch {
			case key == 'r' && m.remaining < 0:
				m.remaining = v
			case key == 't' && m.reset < 0:
				m.reset = v
			default:
				return nil, false
			}
		}
		if m.remaining < 0 {
			return nil, false
		}
		out = append(out, m)
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i == len(line) {
			return out, true
		}
		if line[i] != ',' {
			return nil, false
		}
		i++
	}
}
