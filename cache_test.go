package bodo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/jarcoal/httpmock"
)

// ifNoneMatchRecorder wraps a transport and keeps each GET's If-None-Match
// and status.
type ifNoneMatchRecorder struct {
	next     http.RoundTripper
	sent     []string
	statuses []int
}

func (r *ifNoneMatchRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/v1/contacts/") && err == nil {
		r.sent = append(r.sent, req.Header.Get("If-None-Match"))
		r.statuses = append(r.statuses, resp.StatusCode)
	}
	return resp, err
}

func egressLeft(c *Client) float64 {
	for _, l := range c.Budget().Levels {
		if l.Name == "egress" {
			return l.Remaining
		}
	}
	return -1
}

func TestCacheRevalidatesAndServes304(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		rec := &ifNoneMatchRecorder{next: srv.Transport()}
		c := newTestClient(t, rec, WithAPIKey(sandbox.TestKey), WithCache(10))
		other := newTestClient(t, srv.Transport(), WithAPIKey(sandbox.SecondKey))
		ctx := context.Background()
		ada, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"})
		if err != nil {
			t.Fatal(err)
		}
		first, err := c.Contacts.Get(ctx, ada.ID)
		if err != nil {
			t.Fatal(err)
		}
		before := egressLeft(c)
		second, err := c.Contacts.Get(ctx, ada.ID)
		if err != nil || second.Name != first.Name || second.UpdatedAt != first.UpdatedAt {
			t.Fatalf("from the cache: %+v %v", second, err)
		}
		if rec.sent[0] != "" || rec.sent[1] == "" || rec.statuses[1] != http.StatusNotModified {
			t.Fatalf("If-None-Match %q, statuses %v", rec.sent, rec.statuses)
		}
		if after := egressLeft(c); after < before-1e-6 {
			t.Errorf("a 304 took egress records: %v -> %v", before, after)
		}
		st, err := c.RateLimit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Policies {
			if p.Name == "egress" && p.Remaining != p.Quota-1 {
				t.Errorf("the server counted %d records for one 200 and one 304", p.Quota-p.Remaining)
			}
		}

		// Changed by someone else: the revalidation gets the new version.
		if _, err := other.Contacts.Update(ctx, ada.ID, ContactUpdate{Company: Value("Engines")}); err != nil {
			t.Fatal(err)
		}
		third, err := c.Contacts.Get(ctx, ada.ID)
		if err != nil || third.Company.Value() != "Engines" || rec.statuses[2] != http.StatusOK {
			t.Fatalf("after a change elsewhere: %+v %v %v", third, err, rec.statuses)
		}
		// An update through this client drops the entry.
		if _, err := c.Contacts.Update(ctx, ada.ID, ContactUpdate{Phone: Value("1")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Contacts.Get(ctx, ada.ID); err != nil || rec.sent[3] != "" {
			t.Errorf("after an own update: If-None-Match %q, %v", rec.sent[3], err)
		}
	})
}

func TestCacheEvictsTheLeastRecentlyUsed(t *testing.T) {
	c := newETagCache(2)
	c.put("/a", `"1"`, []byte("a"))
	c.put("/b", `"2"`, []byte("b"))
	c.get("/a")
	c.put("/c", `"3"`, []byte("c"))
	if _, ok := c.get("/b"); ok {
		t.Error("/b, the least recently used, is still there")
	}
	for _, k := range []string{"/a", "/c"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("%s was evicted", k)
		}
	}
	var off *etagCache = newETagCache(0)
	off.put("/a", `"1"`, nil)
	if _, ok := off.get("/a"); ok {
		t.Error("a cache of size 0 keeps entries")
	}
	c.put("/a", `"4"`, make([]byte, maxCachedBody+1))
	if _, ok := c.get("/a"); ok {
		t.Error("a body over maxCachedBody is cached, or leaves the key's older entry")
	}
}

func TestIfMatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		c := sandboxClient(t, srv)
		ctx := context.Background()
		ada, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"})
		if err != nil {
			t.Fatal(err)
		}
		var resp *http.Response
		if _, err := c.Contacts.Get(ctx, ada.ID, WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		etag := resp.Header.Get("ETag")
		if _, err := c.Contacts.Update(ctx, ada.ID, ContactUpdate{Phone: Value("1")}, WithIfMatch(etag)); err != nil {
			t.Fatalf("update with the current ETag: %v", err)
		}
		_, err = c.Contacts.Update(ctx, ada.ID, ContactUpdate{Phone: Value("2")}, WithIfMatch(etag))
		var apiErr *Error
		if !errors.Is(err, ErrPreconditionFailed) || !errors.As(err, &apiErr) || apiErr.Status != 412 {
			t.Fatalf("update with a stale ETag: %v", err)
		}
		if _, err := c.Contacts.Update(ctx, ada.ID, ContactUpdate{}, WithIfMatch("no-quotes")); err == nil {
			t.Error("a malformed ETag was accepted")
		}
	})
}

// TestResponseIntoOnAFailedCall: a call that fails on an answer (a 412
// for a stale ETag) stores that answer, with its headers; one that got no
// answer stores nil, not a response of an earlier call.
func TestResponseIntoOnAFailedCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		c := sandboxClient(t, srv, WithMaxRetries(0))
		ctx := context.Background()
		ada, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"})
		if err != nil {
			t.Fatal(err)
		}
		var resp *http.Response
		_, err = c.Contacts.Update(ctx, ada.ID, ContactUpdate{Phone: Value("2")}, WithIfMatch(`"stale"`), WithResponseInto(&resp))
		if !errors.Is(err, ErrPreconditionFailed) || resp == nil || resp.StatusCode != http.StatusPreconditionFailed || resp.Header.Get("Request-Id") == "" {
			t.Fatalf("a 412: %v, stored %v", err, resp)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.Contacts.Get(cancelled, ada.ID, WithResponseInto(&resp)); err == nil || resp != nil {
			t.Errorf("a call that got no answer: %v, stored %v; want nil", err, resp)
		}
	})
}

func TestNotModifiedWithoutCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		c := sandboxClient(t, srv)
		ctx := context.Background()
		ada, _ := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"})
		var resp *http.Response
		if _, err := c.Contacts.Get(ctx, ada.ID, WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		_, err := c.Contacts.Get(ctx, ada.ID, WithHeader("If-None-Match", resp.Header.Get("ETag")))
		if !errors.Is(err, ErrNotModified) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestParseETag(t *testing.T) {
	for v, ok := range map[string]bool{
		`"xyzzy"`: true, `W/"xyzzy"`: true, `""`: true, `"a b"`: false, `xyzzy`: false, `"x"y"`: false,
		`W/xyzzy`: false, `w/"x"`: false, `"`: false, ``: false, "\"\x7f\"": false, "\"\xc3\xa9\"": true,
	} {
		if _, got := parseETag(v); got != ok {
			t.Errorf("parseETag(%q) = %v", v, got)
		}
	}
}

func FuzzParseETag(f *testing.F) {
	for _, s := range []string{`"xyzzy"`, `W/"xyzzy"`, `""`, `W/""`, `"a"b"`, `*`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tag, ok := parseETag(v)
		if ok && (tag != v || !strings.HasSuffix(v, `"`) || strings.ContainsAny(strings.TrimPrefix(v, "W/")[1:len(strings.TrimPrefix(v, "W/"))-1], "\" \t\r\n")) {
			t.Fatalf("parseETag(%q) accepted %q", v, tag)
		}
	})
}

func TestClientNeverPrintsItsKey(t *testing.T) {
	c, _ := mockClient(t)
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("client", "c", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), buf.String()} {
		if strings.Contains(s, testKey) || strings.Contains(s, "secretsecret") {
			t.Errorf("the key shows in %q", s)
		}
	}
	if !strings.Contains(c.String(), "bodo_test_[REDACTED]cret") {
		t.Errorf("String() = %q", c.String())
	}
}

// TestA304OfAnotherETagIsNotServedFromTheCache: a 304 names in its ETag
// the representation the server holds now (RFC 9110 15.4.5); one whose ETag
// is not the cached one's says the cached body is not the current one. The
// call asks again without If-None-Match, and serves what that answers.
func TestA304OfAnotherETagIsNotServedFromTheCache(t *testing.T) {
	c, mt := mockClient(t, WithCache(4), WithoutBudget())
	id := "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP"
	n := 0
	mt.RegisterResponder(http.MethodGet, "https://"+c.host+"/v1/contacts/"+id, func(r *http.Request) (*http.Response, error) {
		n++
		if n == 1 {
			resp, _ := httpmock.NewJsonResponse(200, sampleContact) // name Ada
			resp.Header.Set("ETag", `"v1"`)
			resp.Request = r
			return resp, nil
		}
		// The server's current representation is "v2"; a confused cache or
		// proxy in front answers 304 with it when asked with "v1".
		if r.Header.Get("If-None-Match") == "" {
			fresh := maps.Clone(sampleContact)
			fresh["name"] = "Grace"
			resp, _ := httpmock.NewJsonResponse(200, fresh)
			resp.Header.Set("ETag", `"v2"`)
			resp.Request = r
			return resp, nil
		}
		resp := httpmock.NewStringResponse(http.StatusNotModified, "")
		resp.Header.Set("ETag", `"v2"`)
		resp.Request = r
		return resp, nil
	})
	if _, err := c.Contacts.Get(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	got, err := c.Contacts.Get(context.Background(), id, WithResponseInto(&resp))
	if err != nil || got.Name != "Grace" || resp.Header.Get("ETag") != `"v2"` || n != 3 {
		t.Errorf("after a 304 with ETag \"v2\" to If-None-Match \"v1\": %v, %v after %d requests; want the fresh body of \"v2\" after 3", got, err, n)
	}
}
