package bodo

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestOptJSON(t *testing.T) {
	for _, tc := range []struct {
		in   ContactUpdate
		want string
	}{
		{ContactUpdate{}, `{}`},
		{ContactUpdate{Phone: String("+49 30 1")}, `{"phone":"+49 30 1"}`},
		{ContactUpdate{Phone: Null[string]()}, `{"phone":null}`},
		{ContactUpdate{Phone: String("")}, `{"phone":""}`},
		{ContactUpdate{Tags: []string{}}, `{"tags":[]}`},
	} {
		b, err := json.Marshal(tc.in)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.in, b, err, tc.want)
		}
	}

	var c Contact
	if err := json.Unmarshal([]byte(`{"id":"con_1","name":"Ada","email":"ada@example.com","phone":null}`), &c); err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Email.Get(); !ok || v != "ada@example.com" || c.Email.String() != "ada@example.com" {
		t.Errorf("Email = %v", c.Email)
	}
	if !c.Phone.IsNull() || c.Phone.IsSet() || c.Phone.Or("none") != "none" || c.Phone.String() != "null" {
		t.Errorf("Phone = %v", c.Phone)
	}
	if !c.Company.IsZero() || c.Company.IsNull() || c.Company.Value() != "" || c.Company.String() != "absent" {
		t.Errorf("Company = %v", c.Company)
	}
	if err := json.Unmarshal([]byte(`{"email":42}`), &c); err == nil {
		t.Error("a number for a string field decoded without an error")
	}
	if b, err := json.Marshal(Opt[int]{}); err != nil || string(b) != "null" {
		t.Errorf("an absent Opt outside omitzero = %s, %v", b, err)
	}
}

func TestBatchPartAndDecode(t *testing.T) {
	part, err := BatchPart(BatchMethodPost, "/v1/contacts", ContactCreate{Name: "Ada"})
	if err != nil || string(part.Body.Value()) != `{"name":"Ada"}` {
		t.Fatalf("BatchPart = %+v, %v", part, err)
	}
	if _, err := BatchPart(BatchMethodPost, "/v1/contacts", func() {}); !errors.As(err, new(*Error)) {
		t.Errorf("BatchPart of a body that JSON cannot encode = %v, want an *Error", err)
	}
	for _, bad := range []struct {
		method BatchMethod
		path   string
	}{
		{"get", "/v1/contacts"}, {BatchMethodGet, "contacts"}, {BatchMethodPost, "/v1/batch"}, {BatchMethodGet, "/v1/contacts/%zz"},
		// What the service methods refuse of an id: dot segments, also
		// percent-encoded, and a literal of another path; and empty segments.
		{BatchMethodDelete, "/v1/contacts/.."}, {BatchMethodDelete, "/v1/contacts/%2e%2e"}, {BatchMethodPost, "/v1/invoices/../pay"},
		{BatchMethodPatch, "/v1/contacts/."}, {BatchMethodDelete, "/v1/contacts/count"}, {BatchMethodGet, "/v1/contacts/con_1/"},
		{BatchMethodGet, "/v1//contacts"},
		// What is not a path of the API at all.
		{BatchMethodGet, "v1/contacts"}, {BatchMethodGet, "https://evil.example/v1/contacts"},
		{BatchMethodGet, "//evil.example/v1/contacts"}, {BatchMethodGet, "/v1/contacts#x"}, {BatchMethodGet, "/v1/contacts#"},
	} {
		if _, err := BatchPart(bad.method, bad.path, nil); !errors.Is(err, ErrBadRequest) {
			t.Errorf("BatchPart(%q, %q) = %v, want a BAD_REQUEST *Error", bad.method, bad.path, err)
		}
	}
	if p, err := BatchPart(BatchMethodGet, "/v1/contacts/count", nil); err != nil || !p.Body.IsZero() {
		t.Errorf("BatchPart without a body = %+v, %v", p, err)
	}
	for _, good := range []struct {
		method BatchMethod
		path   string
	}{{BatchMethodGet, "/v1/contacts/con_1"}, {BatchMethodPost, "/v1/invoices/inv_1/pay"}, {BatchMethodGet, "/v1/contacts?q=a%2Fb&limit=10"}} {
		if _, err := BatchPart(good.method, good.path, nil); err != nil {
			t.Errorf("BatchPart(%q, %q) = %v", good.method, good.path, err)
		}
	}
	c, mt := mockClient(t)
	var rec recorder
	mt.RegisterResponder("POST", "=~/v1/batch", rec.wrap(jsonResponder(200, map[string]any{"responses": []any{}})))
	_, err = c.Batch(context.Background(), BatchRequest{Requests: []BatchRequestItem{{Method: BatchMethodDelete, Path: "/v1/contacts/%2e%2e"}}})
	if !errors.Is(err, ErrBadRequest) || rec.count() != 0 {
		t.Errorf("a batch whose part Batch would not make: %v, %d sent", err, rec.count())
	}
	for _, key := range []string{"", strings.Repeat("k", 256)} {
		part := BatchRequestItem{Method: BatchMethodPost, Path: "/v1/contacts", IdempotencyKey: String(key)}
		_, err = c.Batch(context.Background(), BatchRequest{Requests: []BatchRequestItem{part}})
		if !errors.Is(err, ErrBadRequest) || rec.count() != 0 {
			t.Errorf("a part whose idempotencyKey has %d characters: %v, %d sent", len(key), err, rec.count())
		}
	}
	get, _ := BatchPart(BatchMethodGet, "/v1/contacts/con_1", nil)
	for _, n := range []int{0, maxBatchParts + 1} {
		_, err = c.Batch(context.Background(), BatchRequest{Requests: slices.Repeat([]BatchRequestItem{get}, n)})
		if !errors.Is(err, ErrBadRequest) || rec.count() != 0 {
			t.Errorf("a batch of %d parts: %v, %d sent", n, err, rec.count())
		}
	}

	var contact Contact
	ok := BatchResultItem{Status: 201, Body: Value(json.RawMessage(`{"id":"con_1","name":"Ada"}`))}
	if err := ok.Decode(&contact); err != nil || contact.ID != "con_1" {
		t.Errorf("Decode = %+v, %v", contact, err)
	}
	if err := (BatchResultItem{Status: 204, Body: Null[json.RawMessage]()}).Decode(&contact); err != nil {
		t.Errorf("Decode of a 204 = %v", err)
	}
	if err := (BatchResultItem{Status: 200, Body: Value(json.RawMessage(`[1]`))}).Decode(&contact); !errors.As(err, new(*Error)) {
		t.Errorf("Decode of a list into a Contact = %v, want an *Error", err)
	}
	notFound := BatchResultItem{Status: 404, Body: Value(json.RawMessage(`{"type":"https://developers.bodo-app.com/problems/NOT_FOUND","title":"Nicht gefunden","status":404,"code":"NOT_FOUND","requestId":"req_1"}`))}
	err = notFound.Decode(&contact)
	var e *Error
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &e) || e.RequestID != "req_1" {
		t.Errorf("Decode of a 404 = %v", err)
	}
}
