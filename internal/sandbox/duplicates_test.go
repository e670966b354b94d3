package sandbox

import (
	"net/http"
	"testing"
)

func TestDuplicateContactNames(t *testing.T) {
	c := newTester(t, New())
	create := func(name string) {
		if r := c.do("POST", "/v1/contacts", map[string]any{"name": name}); r.status != http.StatusCreated {
			t.Fatalf("create %q: %d %s", name, r.status, r.body)
		}
	}
	if names, extra := c.s.DuplicateContactNames(); names != 0 || extra != 0 {
		t.Fatalf("empty sandbox: %d names, %d extra", names, extra)
	}
	create("a")
	create("b")
	create("b")
	create("c")
	create("c")
	create("c")
	if names, extra := c.s.DuplicateContactNames(); names != 2 || extra != 3 {
		t.Fatalf("got %d names, %d extra; want 2, 3", names, extra)
	}

	// A replay under the same Idempotency-Key is no second create.
	for range 2 {
		if r := c.do("POST", "/v1/contacts", map[string]any{"name": "d"}, "Idempotency-Key", "k-d"); r.status != http.StatusCreated {
			t.Fatalf("create d: %d %s", r.status, r.body)
		}
	}
	if names, extra := c.s.DuplicateContactNames(); names != 2 || extra != 3 {
		t.Fatalf("after a replay: %d names, %d extra; want 2, 3", names, extra)
	}
}
