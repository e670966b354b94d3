package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestIdempotentReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New())
		first := c.do("POST", "/v1/contacts", `{"name":"Einmal"}`, "Idempotency-Key", "k1").want(t, http.StatusCreated)
		before := c.points()
		again := c.do("POST", "/v1/contacts", `{"name":"Einmal"}`, "Idempotency-Key", "k1").want(t, http.StatusCreated)
		if !bytes.Equal(first.body, again.body) || again.header.Get("Idempotent-Replayed") != "true" ||
			first.header.Get("Idempotent-Replayed") != "" || again.header.Get("Location") != first.header.Get("Location") {
			t.Errorf("replay %s %v", again.body, again.header)
		}
		if again.header.Get("Request-Id") == first.header.Get("Request-Id") {
			t.Error("replay reuses the Request-Id header")
		}
		st := c.s.Stats(TestKey)
		if c.points()-before != 1 || st.Writes != 1 || c.s.ContactsNamed("Einmal") != 1 {
			t.Errorf("replay cost %d, writes %d, contacts %d", c.points()-before, st.Writes, c.s.ContactsNamed("Einmal"))
		}
		var events struct{ Data []eventJSON }
		c.do("GET", "/v1/events", nil).decode(t, &events)
		if len(events.Data) != 1 {
			t.Errorf("%d events after a replay", len(events.Data))
		}

		c.do("POST", "/v1/contacts", `{"name":"Anders"}`, "Idempotency-Key", "k1").wantProblem(t, http.StatusUnprocessableEntity, codeIdemKeyReused)
		c.do("POST", "/v1/invoices", `{"name":"Einmal"}`, "Idempotency-Key", "k1").wantProblem(t, http.StatusUnprocessableEntity, codeIdemKeyReused)
		c.as(SecondKey).do("POST", "/v1/contacts", `{"name":"Einmal"}`, "Idempotency-Key", "k1").want(t, http.StatusCreated)
		if c.s.ContactsNamed("Einmal") != 2 {
			t.Error("keys are not scoped per API key")
		}

		// Problems are stored too, and PATCH is keyed like POST.
		c.do("POST", "/v1/contacts", `{}`, "Idempotency-Key", "k2").wantProblem(t, http.StatusUnprocessableEntity, codeValidationFailed)
		r := c.do("POST", "/v1/contacts", `{}`, "Idempotency-Key", "k2").want(t, http.StatusUnprocessableEntity)
		if r.header.Get("Idempotent-Replayed") != "true" || r.obj(t)["code"] != codeValidationFailed {
			t.Error("stored problem not replayed")
		}
		id := first.obj(t)["id"].(string)
		p1 := c.do("PATCH", "/v1/contacts/"+id, `{"company":"A"}`, "Idempotency-Key", "k3").want(t, http.StatusOK)
		c.do("PATCH", "/v1/contacts/"+id, `{"company":"B"}`).want(t, http.StatusOK)
		p2 := c.do("PATCH", "/v1/contacts/"+id, `{"company":"A"}`, "Idempotency-Key", "k3").want(t, http.StatusOK)
		if !bytes.Equal(p1.body, p2.body) || p1.header.Get("ETag") != p2.header.Get("ETag") {
			t.Error("PATCH replay differs")
		}

		// Keys live 24 hours.
		time.Sleep(24 * time.Hour)
		r = c.do("POST", "/v1/contacts", `{"name":"Einmal"}`, "Idempotency-Key", "k1").want(t, http.StatusCreated)
		if r.header.Get("Idempotent-Replayed") != "" || c.s.ContactsNamed("Einmal") != 3 {
			t.Error("key outlived 24 hours")
		}
	})
}

func TestIdempotencyKeyRules(t *testing.T) {
	c := newTester(t, New())
	con := c.createContact("Geld")
	inv := c.createInvoice(con, 100, "open")
	before := c.s.Stats(TestKey).Writes
	c.do("POST", "/v1/invoices/"+inv+"/pay", nil).wantProblem(t, http.StatusBadRequest, codeIdemKeyRequired)
	c.do("POST", "/v1/invoices/"+inv+"/refund", nil).wantProblem(t, http.StatusBadRequest, codeIdemKeyRequired)
	c.do("POST", "/v1/contacts", `{"name":"x"}`, "Idempotency-Key", "").wantProblem(t, http.StatusBadRequest, codeBadRequest)
	c.do("POST", "/v1/contacts", `{"name":"x"}`, "Idempotency-Key", strings.Repeat("k", 256)).wantProblem(t, http.StatusBadRequest, codeBadRequest)
	c.do("POST", "/v1/contacts", `{"name":"x"}`, "Idempotency-Key", strings.Repeat("k", 255)).want(t, http.StatusCreated)
	if w := c.s.Stats(TestKey).Writes - before; w != 1 {
		t.Errorf("%d writes committed", w)
	}
	// Pay once, replay, then a new key meets the new state.
	c.do("POST", "/v1/invoices/"+inv+"/pay", nil, "Idempotency-Key", "p").want(t, http.StatusOK)
	c.do("POST", "/v1/invoices/"+inv+"/pay", nil, "Idempotency-Key", "p").want(t, http.StatusOK)
	c.do("POST", "/v1/invoices/"+inv+"/pay", nil, "Idempotency-Key", "q").wantProblem(t, http.StatusConflict, codeInvalidState)
}

func TestIdempotencyKeyInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithFaults(func(r *http.Request) Fault {
			if r.Header.Get("X-Slow") != "" {
				return Fault{Delay: 2 * time.Second}
			}
			return Fault{}
		}))
		c := newTester(t, s)
		done := make(chan *reply)
		go func() {
			done <- c.do("POST", "/v1/contacts", `{"name":"Langsam"}`, "Idempotency-Key", "slow", "X-Slow", "1")
		}()
		synctest.Wait()
		if s.ContactsNamed("Langsam") != 1 {
			t.Fatal("the slow request has not committed")
		}
		r := c.do("POST", "/v1/contacts", `{"name":"Langsam"}`, "Idempotency-Key", "slow")
		r.wantProblem(t, http.StatusConflict, codeIdemKeyInUse)
		if r.header.Get("Retry-After") != "1" {
			t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
		}
		first := (<-done).want(t, http.StatusCreated)
		again := c.do("POST", "/v1/contacts", `{"name":"Langsam"}`, "Idempotency-Key", "slow").want(t, http.StatusCreated)
		if !bytes.Equal(first.body, again.body) || s.ContactsNamed("Langsam") != 1 {
			t.Error("no replay after the first finished")
		}
	})
}

func TestDropAfterCommitThenReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithFaults(func(r *http.Request) Fault {
			return Fault{DropAfterCommit: r.Header.Get("X-Drop") != ""}
		}))
		c := newTester(t, s)
		req, _ := c.request("POST", "/v1/contacts", `{"name":"Verloren"}`, "Idempotency-Key", "drop", "X-Drop", "1")
		_, err := c.hc.Do(req)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("dropped request: %v", err)
		}
		if s.ContactsNamed("Verloren") != 1 || s.Stats(TestKey).PointsAccepted != 5 {
			t.Fatal("the dropped request did not commit")
		}
		r := c.do("POST", "/v1/contacts", `{"name":"Verloren"}`, "Idempotency-Key", "drop").want(t, http.StatusCreated)
		if r.header.Get("Idempotent-Replayed") != "true" || s.ContactsNamed("Verloren") != 1 {
			t.Error("retry did not replay")
		}
		if st := s.Stats(TestKey); st.Writes != 1 || st.PointsAccepted != 6 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestBatchPartIdempotency(t *testing.T) {
	c := newTester(t, New())
	body := `{"requests":[{"method":"POST","path":"/v1/contacts","body":{"name":"Teilweise"},"idempotencyKey":"part"}]}`
	first := c.do("POST", "/v1/batch", body).want(t, http.StatusOK)
	before := c.points()
	again := c.do("POST", "/v1/batch", body).want(t, http.StatusOK)
	if !bytes.Equal(first.body, again.body) || c.s.ContactsNamed("Teilweise") != 1 || c.points()-before != 1 {
		t.Errorf("part replay: %s vs %s, cost %d", first.body, again.body, c.points()-before)
	}
	// The same key with the same request outside a batch replays too.
	c.do("POST", "/v1/contacts", `{"name":"Teilweise"}`, "Idempotency-Key", "part").want(t, http.StatusCreated)
	if c.s.ContactsNamed("Teilweise") != 1 {
		t.Error("part key not shared with single calls")
	}
	// A key on the batch itself replays the whole batch.
	b2 := `{"requests":[{"method":"POST","path":"/v1/contacts","body":{"name":"Ganz"}}]}`
	r1 := c.do("POST", "/v1/batch", b2, "Idempotency-Key", "whole").want(t, http.StatusOK)
	r2 := c.do("POST", "/v1/batch", b2, "Idempotency-Key", "whole").want(t, http.StatusOK)
	if !bytes.Equal(r1.body, r2.body) || r2.header.Get("Idempotent-Replayed") != "true" || c.s.ContactsNamed("Ganz") != 1 {
		t.Error("batch not replayed")
	}
}

func TestConditionalRequests(t *testing.T) {
	c := newTester(t, New())
	id := c.createContact("Etag")
	r := c.do("GET", "/v1/contacts/"+id, nil).want(t, http.StatusOK)
	etag := r.header.Get("ETag")
	if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
		t.Fatalf("ETag %q is not a strong quoted tag", etag)
	}
	nm := c.do("GET", "/v1/contacts/"+id, nil, "If-None-Match", etag).want(t, http.StatusNotModified)
	if len(nm.body) != 0 || nm.header.Get("ETag") != etag {
		t.Errorf("304 body %q ETag %q", nm.body, nm.header.Get("ETag"))
	}
	c.do("GET", "/v1/contacts/"+id, nil, "If-None-Match", `"other", W/`+etag).want(t, http.StatusNotModified)
	c.do("GET", "/v1/contacts/"+id, nil, "If-None-Match", `"other"`).want(t, http.StatusOK)

	var st rateLimitJSON
	c.do("GET", "/v1/rate_limit", nil).decode(t, &st)
	if st.Policies[7].Remaining != 10000-2 {
		t.Errorf("egress remaining %d: 304s must count no records", st.Policies[7].Remaining)
	}

	c.do("PATCH", "/v1/contacts/"+id, `{"name":"Neu"}`, "If-Match", `"stale"`).wantProblem(t, http.StatusPreconditionFailed, codePreconditionFailed)
	c.do("PATCH", "/v1/contacts/"+id, `{"name":"Neu"}`, "If-Match", "W/"+etag).wantProblem(t, http.StatusPreconditionFailed, codePreconditionFailed)
	up := c.do("PATCH", "/v1/contacts/"+id, `{"name":"Neu"}`, "If-Match", etag).want(t, http.StatusOK)
	if up.header.Get("ETag") == etag {
		t.Error("ETag did not change")
	}
	c.do("GET", "/v1/contacts/"+id, nil, "If-None-Match", etag).want(t, http.StatusOK)
	c.do("PATCH", "/v1/contacts/"+id, `{"name":"Neuer"}`, "If-Match", etag).wantProblem(t, http.StatusPreconditionFailed, codePreconditionFailed)
	c.do("PATCH", "/v1/contacts/"+id, `{"name":"Neuer"}`, "If-Match", "*").want(t, http.StatusOK)

	inv := c.createInvoice(id, 10, "")
	ie := c.do("GET", "/v1/invoices/"+inv, nil).header.Get("ETag")
	c.do("GET", "/v1/invoices/"+inv, nil, "If-None-Match", ie).want(t, http.StatusNotModified)
}

func TestTransportHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithFaults(func(*http.Request) Fault { return Fault{Delay: 10 * time.Second} }))
		c := newTester(t, s)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := c.request("POST", "/v1/contacts", `{"name":"Abgebrochen"}`)
		start := time.Now()
		_, err := c.hc.Do(req.WithContext(ctx))
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("err %v after %v", err, time.Since(start))
		}
		if st := s.Stats(TestKey); st.InFlight != 1 || s.ContactsNamed("Abgebrochen") != 1 {
			t.Errorf("the handler should go on like a real server: %+v", st)
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if st := s.Stats(TestKey); st.InFlight != 0 || st.Accepted != 1 {
			t.Errorf("after the handler finished: %+v", st)
		}
	})
}
