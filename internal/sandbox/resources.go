package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// store is the data of the sandbox's organisation. Ids are monotonic ULIDs,
// so the id slices are sorted by id and by creation at once.
type store struct {
	contacts     map[string]*contact
	contactIDs   []string
	invoices     map[string]*invoice
	invoiceIDs   []string
	operations   map[string]*operation
	operationIDs []string
	settled      int // operationIDs before this have finished
	events       []event
}

func newStore() store {
	return store{contacts: map[string]*contact{}, invoices: map[string]*invoice{}, operations: map[string]*operation{}}
}

func (s *Server) registerRoutes() {
	s.mux = http.NewServeMux()
	s.routes = map[string]*route{}
	s.handle("GET /v1/contacts", "listContacts", s.listContacts)
	s.handle("GET /v1/contacts/count", "countContacts", s.countContacts)
	s.handle("GET /v1/contacts/{id}", "getContact", s.getContact)
	s.handle("POST /v1/contacts", "createContact", s.createContact)
	s.handle("PATCH /v1/contacts/{id}", "updateContact", s.updateContact)
	s.handle("DELETE /v1/contacts/{id}", "deleteContact", s.deleteContact)
	s.handle("GET /v1/invoices", "listInvoices", s.listInvoices)
	s.handle("GET /v1/invoices/{id}", "getInvoice", s.getInvoice)
	s.handle("POST /v1/invoices", "createInvoice", s.createInvoice)
	s.handle("POST /v1/invoices/{id}/pay", "payInvoice", s.payInvoice)
	s.handle("POST /v1/invoices/{id}/refund", "refundInvoice", s.refundInvoice)
	s.handle("POST /v1/exports", "createExport", s.createExport)
	s.handle("GET /v1/operations/{id}", "getOperation", s.getOperation)
	s.handle("GET /v1/events", "listEvents", s.listEvents)
	s.handle("POST /v1/batch", "batch", nestedBatch)
	s.handle("GET /v1/me", "getMe", s.getMe)
	s.handle("GET /v1/rate_limit", "getRateLimit", s.getRateLimit)
	s.handle("GET /v1/openapi.json", "getOpenAPI", s.getOpenAPI)
}

// ContactsNamed reports how many live contacts have exactly this name.
func (s *Server) ContactsNamed(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.contacts {
		if c.name == name {
			n++
		}
	}
	return n
}

// timestamp formats t as RFC 3339 UTC with milliseconds.
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// etagListMatches reports whether the If-None-Match or If-Match value lists
// etag; weak compares opaque tags only (RFC 9110 weak comparison).
func etagListMatches(list, etag string, weak bool) bool {
	for _, tag := range strings.Split(list, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" {
			return true
		}
		if strings.HasPrefix(tag, "W/") {
			if !weak {
				continue
			}
			tag = tag[2:]
		}
		if tag == etag {
			return true
		}
	}
	return false
}

// resourceAnswer answers a GET of one resource: 200 with ETag, or 304 when
// If-None-Match has the ETag (no body, no egress records).
func resourceAnswer(c *call, v any) answer {
	a := jsonAnswer(http.StatusOK, v)
	etag := etagOf(a.body)
	a.header.Set("ETag", etag)
	if inm := c.header.Get("If-None-Match"); inm != "" && etagListMatches(inm, etag, true) {
		nm := newAnswer(http.StatusNotModified)
		nm.header.Set("ETag", etag)
		return nm
	}
	a.records = 1
	return a
}

func (s *Server) emit(now time.Time, at time.Time, typ string, data any) {
	s.events = append(s.events, event{id: "evt_" + s.ids.next(now), typ: typ, created: at, data: marshal(data)})
}

// pagination

const cursorPrefix = "bodo1:"

func encodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + id))
}

func decodeCursor(cur, idPrefix string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(cur)
	if err != nil || !bytes.HasPrefix(b, []byte(cursorPrefix)) {
		return "", false
	}
	id := string(b[len(cursorPrefix):])
	return id, validID(id, idPrefix)
}

func pageLimit(c *call) (int, *answer) {
	v, ok := c.query["limit"]
	if !ok {
		return 20, nil
	}
	n, err := strconv.Atoi(strings.Join(v, ""))
	if err != nil || n < 1 || n > 100 {
		a := c.badRequest(msg{"limit muss eine ganze Zahl von 1 bis 100 sein.", "limit must be a whole number from 1 to 100."})
		return 0, &a
	}
	return n, nil
}

// pageStart reads limit and cursor of a list of ids with idPrefix.
func pageStart(c *call, idPrefix string) (limit int, after string, bad *answer) {
	limit, bad = pageLimit(c)
	if bad != nil {
		return 0, "", bad
	}
	if v, ok := c.query["cursor"]; ok {
		id, valid := decodeCursor(strings.Join(v, ""), idPrefix)
		if !valid {
			a := c.badRequest(msg{"Der cursor ist ungültig; nimm den nextCursor der vorigen Seite.", "The cursor is invalid; use the nextCursor of the previous page."})
			return 0, "", &a
		}
		after = id
	}
	return limit, after, nil
}

// page collects up to limit items whose ids follow after; item returns false
// for ids that are not in the list. more reports whether items remain.
func page[T any](ids []string, after string, limit int, item func(id string) (T, bool)) (items []T, last string, more bool) {
	i, found := slices.BinarySearch(ids, after)
	if found {
		i++
	}
	items = []T{}
	for ; i < len(ids); i++ {
		v, ok := item(ids[i])
		if !ok {
			continue
		}
		if len(items) == limit {
			return items, last, true
		}
		items = append(items, v)
		last = ids[i]
	}
	return items, last, false
}

type listJSON[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"nextCursor"`
}

func listAnswer[T any](items []T, next string, more bool) answer {
	l := listJSON[T]{Data: items}
	if more {
		l.NextCursor = &next
	}
	a := jsonAnswer(http.StatusOK, l)
	a.records = len(items)
	return a
}

// body fields

type fields map[string]json.RawMessage

func parseObject(c *call, optional bool) (fields, *answer) {
	if len(bytes.TrimSpace(c.body)) == 0 {
		if optional {
			return fields{}, nil
		}
		a := c.badRequest(msg{"Der Body fehlt; erwartet wird ein JSON-Objekt.", "The body is missing; a JSON object is expected."})
		return nil, &a
	}
	var f fields
	if err := json.Unmarshal(c.body, &f); err != nil || f == nil {
		a := c.badRequest(msg{"Der Body ist kein gültiges JSON-Objekt.", "The body is not a valid JSON object."})
		return nil, &a
	}
	return f, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// hasValue reports whether the field is present and not null.
func hasValue(f fields, name string) bool {
	raw, ok := f[name]
	return ok && !isNull(raw)
}

type validator struct{ errs []fieldError }

// add records that field is invalid: m with args says why.
func (v *validator) add(field string, m msg, args ...any) {
	v.errs = append(v.errs, fieldError{Field: field, m: m, args: args})
}

// Field messages used in several places.
var (
	msgRequired  = msg{"ist erforderlich", "is required"}
	msgPositive  = msg{"muss größer als 0 sein", "must be greater than 0"}
	msgNotText   = msg{"muss ein Text sein", "must be a string"}
	msgBatchPath = msg{"muss ein Pfad der API sein, der mit /v1/ beginnt", "must be a path of the API starting with /v1/"}
)

// text reads a string field of 1 to maxLen characters; set is false when
// the field is absent, val is nil when it is null or invalid.
func (v *validator) text(f fields, name string, maxLen int) (val *string, set bool) {
	return v.str(f, name, maxLen, msgNotText)
}

// freeText reads a string field of any length; set is false when the
// field is absent, val is nil when it is null or invalid.
func (v *validator) freeText(f fields, name string) (val *string, set bool) {
	return v.str(f, name, 0, msg{"muss ein Text oder null sein", "must be a string or null"})
}

// str reads a string field, of 1 to maxLen characters when maxLen is
// positive; notText is the message for a value that is no string.
func (v *validator) str(f fields, name string, maxLen int, notText msg) (val *string, set bool) {
	raw, ok := f[name]
	if !ok {
		return nil, false
	}
	if isNull(raw) {
		return nil, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		v.add(name, notText)
		return nil, true
	}
	if n := utf8.RuneCountInString(s); maxLen > 0 && (n < 1 || n > maxLen) {
		v.add(name, msg{"muss 1 bis %d Zeichen lang sein", "must be 1 to %d characters long"}, maxLen)
		return nil, true
	}
	return &s, true
}

func (v *validator) integer(f fields, name string) (val int64, set bool) {
	raw, ok := f[name]
	if !ok || isNull(raw) {
		return 0, false
	}
	if json.Unmarshal(raw, &val) != nil {
		v.add(name, msg{"muss eine ganze Zahl sein", "must be a whole number"})
		return 0, false
	}
	return val, true
}

func (v *validator) oneOf(f fields, name string, required bool, allowed ...string) string {
	raw, ok := f[name]
	if !ok || isNull(raw) {
		if required {
			v.add(name, msgRequired)
		}
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || !slices.Contains(allowed, s) {
		v.add(name, msg{"muss einer dieser Werte sein: %s", "must be one of %s"}, strings.Join(allowed, ", "))
		return ""
	}
	return s
}

// contacts

type contact struct {
	id                    string
	name                  string
	email, phone, company *string
	tags                  []string
	created, updated      time.Time
}

type contactJSON struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Email     *string  `json:"email"`
	Phone     *string  `json:"phone"`
	Company   *string  `json:"company"`
	Tags      []string `json:"tags"`
	CreatedAt string   `json:"createdAt"`
	UpdatedAt string   `json:"updatedAt"`
}

func (ct *contact) view() contactJSON {
	tags := ct.tags
	if tags == nil {
		tags = []string{}
	}
	return contactJSON{ID: ct.id, Name: ct.name, Email: ct.email, Phone: ct.phone, Company: ct.company,
		Tags: tags, CreatedAt: timestamp(ct.created), UpdatedAt: timestamp(ct.updated)}
}

func (ct *contact) matches(q string) bool {
	if q == "" {
		return true
	}
	in := func(p *string) bool { return p != nil && strings.Contains(strings.ToLower(*p), q) }
	return in(&ct.name) || in(ct.email) || in(ct.company)
}

// contactPatch is a parsed create or merge-patch body.
type contactPatch struct {
	name                           *string
	email, phone, company          *string
	emailSet, phoneSet, companySet bool
	tags                           []string
	tagsSet                        bool
}

// parseContact checks a create or merge-patch body against ContactCreate
// or ContactUpdate of openapi.json, which follow bodo-api.md: name 1 to 200
// characters (never null); email, phone and company any text or null; tags
// a list of texts or null. The contract sets no format or length for the
// others, so the sandbox checks none.
func parseContact(f fields, create bool) (contactPatch, []fieldError) {
	var v validator
	var p contactPatch
	name, nameSet := v.text(f, "name", 200)
	switch {
	case name != nil:
		p.name = name
	case nameSet && isNull(f["name"]):
		v.add("name", msg{"darf nicht null sein", "must not be null"})
	case !nameSet && create:
		v.add("name", msgRequired)
	}
	p.email, p.emailSet = v.freeText(f, "email")
	p.phone, p.phoneSet = v.freeText(f, "phone")
	p.company, p.companySet = v.freeText(f, "company")
	if raw, ok := f["tags"]; ok {
		p.tagsSet = true
		if !isNull(raw) {
			var tags []*string
			if json.Unmarshal(raw, &tags) != nil {
				v.add("tags", msg{"muss eine Liste von Texten sein", "must be a list of strings"})
			} else {
				for i, t := range tags {
					if t == nil {
						v.add(fmt.Sprintf("tags[%d]", i), msgNotText)
						continue
					}
					p.tags = append(p.tags, *t)
				}
				if p.tags == nil {
					p.tags = []string{}
				}
			}
		}
	}
	return p, v.errs
}

func (p contactPatch) apply(ct *contact) {
	if p.name != nil {
		ct.name = *p.name
	}
	if p.emailSet {
		ct.email = p.email
	}
	if p.phoneSet {
		ct.phone = p.phone
	}
	if p.companySet {
		ct.company = p.company
	}
	if p.tagsSet {
		ct.tags = p.tags
	}
}

func (s *Server) contactOf(r *http.Request) *contact {
	return s.contacts[r.PathValue("id")]
}

func (s *Server) listContacts(c *call, _ *http.Request) answer {
	limit, after, bad := pageStart(c, "con_")
	if bad != nil {
		return *bad
	}
	q := strings.ToLower(c.query.Get("q"))
	items, last, more := page(s.contactIDs, after, limit, func(id string) (contactJSON, bool) {
		ct := s.contacts[id]
		if ct == nil || !ct.matches(q) {
			return contactJSON{}, false
		}
		return ct.view(), true
	})
	return listAnswer(items, encodeCursor(last), more)
}

func (s *Server) countContacts(c *call, _ *http.Request) answer {
	q := strings.ToLower(c.query.Get("q"))
	n := 0
	for _, ct := range s.contacts {
		if ct.matches(q) {
			n++
		}
	}
	a := jsonAnswer(http.StatusOK, map[string]int{"count": n})
	a.records = 1
	return a
}

func (s *Server) getContact(c *call, r *http.Request) answer {
	ct := s.contactOf(r)
	if ct == nil {
		return c.notFound()
	}
	return resourceAnswer(c, ct.view())
}

func (s *Server) createContact(c *call, _ *http.Request) answer {
	f, bad := parseObject(c, false)
	if bad != nil {
		return *bad
	}
	p, errs := parseContact(f, true)
	if errs != nil {
		return c.invalid(errs)
	}
	ct := &contact{id: "con_" + s.ids.next(c.now), created: c.now, updated: c.now}
	p.apply(ct)
	s.contacts[ct.id] = ct
	s.contactIDs = append(s.contactIDs, ct.id)
	v := ct.view()
	s.emit(c.now, c.now, "contact.created", v)
	a := jsonAnswer(http.StatusCreated, v)
	a.header.Set("Location", "/v1/contacts/"+ct.id)
	a.header.Set("ETag", etagOf(a.body))
	a.writes = 1
	return a
}

func (s *Server) updateContact(c *call, r *http.Request) answer {
	ct := s.contactOf(r)
	if ct == nil {
		return c.notFound()
	}
	if im := c.header.Get("If-Match"); im != "" && !etagListMatches(im, etagOf(marshal(ct.view())), false) {
		return c.fail(http.StatusPreconditionFailed, codePreconditionFailed,
			msg{"If-Match passt nicht zum aktuellen ETag des Kontakts.", "If-Match does not match the contact's current ETag."})
	}
	f, bad := parseObject(c, false)
	if bad != nil {
		return *bad
	}
	p, errs := parseContact(f, false)
	if errs != nil {
		return c.invalid(errs)
	}
	p.apply(ct)
	ct.updated = c.now
	v := ct.view()
	s.emit(c.now, c.now, "contact.updated", v)
	a := jsonAnswer(http.StatusOK, v)
	a.header.Set("ETag", etagOf(a.body))
	a.writes = 1
	return a
}

func (s *Server) deleteContact(c *call, r *http.Request) answer {
	ct := s.contactOf(r)
	if ct == nil {
		return c.notFound()
	}
	delete(s.contacts, ct.id)
	if i, ok := slices.BinarySearch(s.contactIDs, ct.id); ok {
		s.contactIDs = slices.Delete(s.contactIDs, i, i+1)
	}
	s.emit(c.now, c.now, "contact.deleted", map[string]string{"id": ct.id})
	a := newAnswer(http.StatusNoContent)
	a.writes = 1
	return a
}
