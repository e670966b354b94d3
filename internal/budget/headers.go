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
// Structured Fields List. A field that is no valid List gives nothing; a
// member that is no String or Token item, or lacks a non-negative integer q,
// is skipped; a w or qu of the wrong type skips the member too. Unknown
// parameters (pk, and whatever later drafts add) are ignored.
func parsePolicyHeader(h http.Header) []policyHeader {
	list, ok := parseList(h, "RateLimit-Policy")
	if !ok {
		return nil
	}
	var out []policyHeader
	for _, m := range list {
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
			if !isString || s == "" {
				continue
			}
			p.unit = s
		}
		out = append(out, p)
	}
	return out
}

// parseLimitHeader parses the RateLimit field like parsePolicyHeader: each
// member needs a non-negative integer r; t is optional; a pk that is not a
// Byte Sequence skips the member.
func parseLimitHeader(h http.Header) []limitHeader {
	list, ok := parseList(h, "RateLimit")
	if !ok {
		return nil
	}
	var out []limitHeader
	for _, m := range list {
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

func parseList(h http.Header, name string) (httpsfv.List, bool) {
	lines := h.Values(name)
	if len(lines) == 0 {
		return nil, false
	}
	list, err := httpsfv.UnmarshalList(lines)
	return list, err == nil
}

// namedItem returns the name of a list member that is an Item holding a
// String (as the draft says) or a Token (as some servers send).
func namedItem(m httpsfv.Member) (string, *httpsfv.Params, bool) {
	item, ok := m.(httpsfv.Item)
	if !ok || item.Params == nil {
		return "", nil, false
	}
	switch v := item.Value.(type) {
	case string:
		return v, item.Params, v != ""
	case httpsfv.Token:
		return string(v), item.Params, v != ""
	}
	return "", nil, false
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
