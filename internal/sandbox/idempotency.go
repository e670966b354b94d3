package sandbox

import (
	"crypto/sha256"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// idemTTL is how long an Idempotency-Key is remembered.
const idemTTL = 24 * time.Hour

// idemEntry is one Idempotency-Key of one API key: the request it was first
// used with and, once that has been answered, the answer.
type idemEntry struct {
	fp      string
	created time.Time
	done    bool
	ans     answer
}

func validIdemKey(key string) bool {
	n := utf8.RuneCountInString(key)
	return n >= 1 && n <= 255
}

// fingerprint identifies a request for the idempotency store: method, path
// (with query) and body bytes.
func fingerprint(method, path string, query url.Values, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method + " " + path))
	if len(query) > 0 {
		h.Write([]byte("?" + query.Encode()))
	}
	h.Write([]byte{0})
	h.Write(body)
	return string(h.Sum(nil))
}

func (k *apiKey) lookup(key string, now time.Time) *idemEntry {
	e := k.idem[key]
	if e != nil && now.Sub(e.created) >= idemTTL {
		delete(k.idem, key)
		return nil
	}
	return e
}

func (k *apiKey) reserve(key, fp string, now time.Time) *idemEntry {
	if len(k.idem)%256 == 255 {
		for name, e := range k.idem {
			if now.Sub(e.created) >= idemTTL {
				delete(k.idem, name)
			}
		}
	}
	e := &idemEntry{fp: fp, created: now}
	k.idem[key] = e
	return e
}

// complete stores the answer a replay gives: status, body and the headers
// that describe the body.
func (e *idemEntry) complete(a answer) {
	e.done = true
	e.ans = answer{status: a.status, body: a.body, code: a.code, header: http.Header{}}
	for _, name := range []string{"Content-Type", "Content-Language", "Location", "Etag", "Retry-After"} {
		if v := a.header.Values(name); len(v) > 0 {
			e.ans.header[name] = v
		}
	}
}

// answerFor is the answer to a request that reuses the entry's key: the
// replay, or IDEMPOTENCY_KEY_REUSED, or IDEMPOTENCY_KEY_IN_USE.
func (e *idemEntry) answerFor(c *call, fp string) answer {
	switch {
	case e.fp != fp:
		return c.fail(http.StatusUnprocessableEntity, codeIdemKeyReused,
			msg{"Dieser Idempotency-Key wurde schon für eine andere Anfrage benutzt.", "This Idempotency-Key was already used for another request."})
	case !e.done:
		a := c.fail(http.StatusConflict, codeIdemKeyInUse,
			msg{"Eine Anfrage mit diesem Idempotency-Key läuft noch; versuche es gleich noch einmal.", "A request with this Idempotency-Key is still running; try again in a moment."})
		a.header.Set("Retry-After", "1")
		return a
	}
	a := e.ans
	a.header = maps.Clone(e.ans.header)
	a.header.Set("Idempotent-Replayed", "true")
	return a
}

func itoa(n int) string { return strconv.Itoa(n) }
