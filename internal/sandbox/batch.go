package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

const maxBatchParts = 20

// batchPart is one request of a batch, parsed and checked.
type batchPart struct {
	method  string
	u       *url.URL
	body    []byte
	idemKey *string
}

type batchResponseJSON struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// errBatchJSON is parseBatch's error for a body that is no JSON object: 400
// BAD_REQUEST with msgBatchJSON, as for every other body.
var errBatchJSON = errors.New("the batch body is no JSON object")

var msgBatchJSON = msg{`Der Body ist kein gültiges JSON-Objekt; erwartet wird {"requests":[…]}.`,
	`The body is not a valid JSON object; {"requests":[…]} is expected.`}

// parseBatch checks a batch body against BatchRequest of openapi.json: a
// body that is no JSON object is errBatchJSON, one that does not match the
// schema (1 to 20 parts, each with a method of the enum, a path under /v1/
// that is no nested batch and an idempotencyKey of 1 to 255 characters when
// there is one) yields field errors, answered 422 VALIDATION_FAILED like
// every other body. What is wrong with a part's content (unknown path,
// invalid fields) is that part's answer instead.
func parseBatch(body []byte) ([]batchPart, []fieldError, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		return nil, nil, errBatchJSON
	}
	var v validator
	var raw []json.RawMessage
	if r, ok := req["requests"]; !ok {
		v.add("requests", msgRequired)
	} else if json.Unmarshal(r, &raw) != nil || isNull(r) {
		v.add("requests", msg{"muss eine Liste von Teilen sein", "must be a list of parts"})
	} else if n := len(raw); n < 1 || n > maxBatchParts {
		v.add("requests", msg{"ein Batch hat 1 bis %d Teile, nicht %d", "a batch has 1 to %d parts, not %d"}, maxBatchParts, n)
	}
	if v.errs != nil {
		return nil, v.errs, nil
	}
	parts := make([]batchPart, len(raw))
	for i, r := range raw {
		field := func(name string) string { return fmt.Sprintf("requests[%d].%s", i, name) }
		var p map[string]json.RawMessage
		if json.Unmarshal(r, &p) != nil || p == nil {
			v.add(fmt.Sprintf("requests[%d]", i), msg{"muss ein Objekt sein", "must be an object"})
			continue
		}
		var method, path string
		if m, ok := p["method"]; !ok {
			v.add(field("method"), msgRequired)
		} else if json.Unmarshal(m, &method) != nil || !slices.Contains([]string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete}, method) {
			v.add(field("method"), msg{"muss GET, POST, PATCH oder DELETE sein", "must be GET, POST, PATCH or DELETE"})
		}
		var u *url.URL
		if pr, ok := p["path"]; !ok {
			v.add(field("path"), msgRequired)
		} else if json.Unmarshal(pr, &path) != nil || !strings.HasPrefix(path, "/v1/") {
			v.add(field("path"), msgBatchPath)
		} else if pu, err := url.Parse(path); err != nil || pu.Scheme != "" || pu.Host != "" || pu.Fragment != "" {
			v.add(field("path"), msgBatchPath)
		} else if op, _, ok := ops.Match(method, pu.Path); ok && op.Class == ops.ClassBatch {
			v.add(field("path"), msg{"ein Batch darf keinen Batch enthalten", "a batch must not contain a batch"})
		} else {
			u = pu
		}
		var idemKey *string
		if k, ok := p["idempotencyKey"]; ok {
			var key string
			if json.Unmarshal(k, &key) != nil || !validIdemKey(key) {
				v.add(field("idempotencyKey"), msg{"muss ein Text von 1 bis 255 Zeichen sein", "must be a string of 1 to 255 characters"})
			}
			idemKey = &key
		}
		b := []byte(p["body"])
		if len(b) == 0 || isNull(b) {
			b = nil
		}
		parts[i] = batchPart{method: method, u: u, body: b, idemKey: idemKey}
	}
	if v.errs != nil {
		return nil, v.errs, nil
	}
	return parts, nil, nil
}

// batchDemand is the sum of the parts: each part's cost from the ops table,
// 1 for a part that has no route (as runPart finds it) or whose
// Idempotency-Key a request before it used, in the batch or earlier, which
// replays it or is refused; every part an enforced extra policy covers is
// charged to it as a call of its own.
func (s *Server) batchDemand(k *apiKey, now time.Time, parts []batchPart) demand {
	var d demand
	keys := map[string]bool{} // the keys of the parts before
	for _, p := range parts {
		rt := s.lookup(p.method, p.u)
		if rt == nil {
			d.points++
			continue
		}
		op, query := rt.op, p.u.Query().Get
		if p.keyed() && validIdemKey(*p.idemKey) {
			used := keys[*p.idemKey] || k.lookup(*p.idemKey, now) != nil
			keys[*p.idemKey] = true
			if used {
				d.points++
				s.extraTakes(&d, op, query, p.u.Path, 1)
				continue
			}
		}
		pd := opDemand(op, query)
		s.extraTakes(&d, op, query, p.u.Path, pd.points)
		d.points += pd.points
		d.writes += pd.writes
		d.deletes += pd.deletes
		d.egress = d.egress || pd.egress
	}
	return d
}

func (p batchPart) keyed() bool {
	return p.idemKey != nil && (p.method == http.MethodPost || p.method == http.MethodPatch)
}

func nestedBatch(c *call, _ *http.Request) answer {
	return c.badRequest(msg{"Ein Batch darf keinen Batch enthalten.", "A batch must not contain a batch."})
}

// runBatch runs the parts in order through the same handlers as single
// calls; the batch was admitted and charged as a whole.
func (s *Server) runBatch(c *call, parts []batchPart) answer {
	out := struct {
		Responses []batchResponseJSON `json:"responses"`
	}{Responses: make([]batchResponseJSON, len(parts))}
	var records, writes int
	for i, p := range parts {
		a := s.runPart(c, p)
		records += a.records
		writes += a.writes
		body := json.RawMessage("null")
		if len(bytes.TrimSpace(a.body)) > 0 {
			body = a.body
		}
		out.Responses[i] = batchResponseJSON{Status: a.status, Body: body}
	}
	a := jsonAnswer(http.StatusOK, out)
	a.records = records
	a.writes = writes
	return a
}

func (s *Server) runPart(parent *call, p batchPart) answer {
	c := &call{key: parent.key, now: parent.now, reqID: parent.reqID, method: p.method, path: p.u.Path,
		query: p.u.Query(), body: p.body, header: http.Header{}, lang: parent.lang}
	rt := s.lookup(p.method, p.u)
	if rt == nil {
		if allow := s.allowed(p.u); allow != nil {
			return c.methodNotAllowed(allow)
		}
		return c.notFound()
	}
	if !p.keyed() {
		if rt.op.KeyRequired {
			return c.fail(http.StatusBadRequest, codeIdemKeyRequired, msgKeyRequired)
		}
		return s.dispatch(c, p.u)
	}
	key := *p.idemKey
	if !validIdemKey(key) {
		return c.badRequest(msg{"Der idempotencyKey muss 1 bis 255 Zeichen lang sein.", "The idempotencyKey must be 1 to 255 characters long."})
	}
	fp := fingerprint(c.method, c.path, c.query, c.body)
	if e := c.key.lookup(key, c.now); e != nil {
		return e.answerFor(c, fp)
	}
	e := c.key.reserve(key, fp, c.now)
	a := s.dispatch(c, p.u)
	e.complete(a)
	return a
}
