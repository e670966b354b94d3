package bodo

import (
	"container/list"
	"errors"
	"net/http"
	"strings"
	"sync"
)

// WithCache keeps the last n answers of the GETs that carry an ETag
// (getContact, getInvoice, getOperation) and revalidates them: the request
// carries If-None-Match, and a 304 Not Modified is served from the cache;
// a 304 whose ETag names another representation drops the entry, and the
// call asks again without it (one request more). The API charges a 304 the
// GET's points but no egress records, and the budget counts it so. An
// update or delete through the client drops its entry, and so does an
// error answer to the revalidation (a 404 or 410 for a resource that is
// gone, or a 412 or 431 for an ETag the server does not take; any 4xx but
// 429), so that a bad entry fails one call at most. An ETag longer than
// MaxETagLength is not cached, nor a body over 1 MiB. n <= 0 turns the
// cache off (the default).
func WithCache(n int) Option {
	return clientOption(func(s *clientSettings) error {
		s.cacheSize = n
		return nil
	})
}

// WithIfMatch makes an update conditional: the server applies it only if
// the resource still has this ETag, and answers 412 (ErrPreconditionFailed)
// otherwise. Get the ETag of a fetched resource with WithResponseInto. An
// ETag longer than MaxETagLength fails the call before it is sent.
func WithIfMatch(etag string) RequestOption {
	return requestOption(func(s *callSettings) error {
		if _, ok := parseETag(etag); !ok {
			return errInvalidETag(etag)
		}
		s.ifMatch = etag
		return nil
	})
}

// WithResponseInto stores the call's final *http.Response in *dst (its body
// already read and closed), for its headers: ETag, Request-Id, RateLimit.
// A call that fails on an answer stores that answer (Error.Response); one
// that got none stores nil.
func WithResponseInto(dst **http.Response) RequestOption {
	return requestOption(func(s *callSettings) error {
		s.responseInto = dst
		return nil
	})
}

// etagCache is a least-recently-used map from a request path to the last
// 200 answer and its ETag.
type etagCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // of *cacheEntry, most recent first
	byKey map[string]*list.Element
}

type cacheEntry struct {
	key  string
	etag string
	body []byte
}

func newETagCache(size int) *etagCache {
	if size <= 0 {
		return nil
	}
	return &etagCache{size: size, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *etagCache) get(key string) (cacheEntry, bool) {
	if c == nil {
		return cacheEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return cacheEntry{}, false
	}
	c.order.MoveToFront(el)
	return *el.Value.(*cacheEntry), true
}

// maxCachedBody is the longest body the cache keeps, 1 MiB, far beyond
// any resource of the API: n entries take at most n MiB, whatever a server
// answers. A longer one drops what the cache held for the key.
const maxCachedBody = 1 << 20

func (c *etagCache) put(key, etag string, body []byte) {
	if c == nil {
		return
	}
	if len(body) > maxCachedBody {
		c.drop(key)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		e := el.Value.(*cacheEntry)
		e.etag, e.body = etag, body
		c.order.MoveToFront(el)
		return
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, etag: etag, body: body})
	for c.order.Len() > c.size {
		last := c.order.Back()
		delete(c.byKey, last.Value.(*cacheEntry).key)
		c.order.Remove(last)
	}
}

// dropRefused drops the entry of key when err is an answer that refused its
// revalidation: a 4xx but 429 (which says nothing about the resource).
func (c *etagCache) dropRefused(key string, err error) {
	var e *Error
	if errors.As(err, &e) && !e.Local && e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests {
		c.drop(key)
	}
}

func (c *etagCache) drop(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		delete(c.byKey, key)
		c.order.Remove(el)
	}
}

// MaxETagLength is the longest ETag the client caches or sends in If-Match,
// in bytes with its quotes: 1 KiB, far beyond any the API makes and far
// below the header sizes servers refuse.
const MaxETagLength = 1 << 10

// parseETag checks an entity tag of RFC 9110 §8.8.3: an optional W/ and a
// quoted string of etagc characters (no DQUOTE, no controls, no space), of
// at most MaxETagLength bytes. It returns the tag as given.
func parseETag(v string) (string, bool) {
	if len(v) > MaxETagLength {
		return "", false
	}
	s := v
	if len(s) >= 2 && s[0] == 'W' && s[1] == '/' {
		s = s[2:]
	}
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	for i := 1; i < len(s)-1; i++ {
		c := s[i]
		if c == '"' || c < 0x21 || c == 0x7f {
			return "", false
		}
	}
	return v, true
}

// weakMatch reports whether two entity tags match by the weak comparison
// of RFC 9110 8.8.3.2: the same opaque tag, either of them weak or not.
func weakMatch(a, b string) bool {
	return strings.TrimPrefix(a, "W/") == strings.TrimPrefix(b, "W/")
}

type errInvalidETag string

func (e errInvalidETag) Error() string { return "not an entity tag: " + string(e) }
