package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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

type batchPartJSON struct {
	Method         string          `json:"method"`
	Path           string          `json:"path"`
	Body           json.RawMessage `json:"body"`
	IdempotencyKey *string         `json:"idempotencyKey"`
}

type batchResponseJSON struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// parseBatch checks the shape of a batch body; what is wrong with a part's
// content (unknown path, invalid fields) is that part's answer instead.
func parseBatch(body []byte) ([]batchPart, error) {
	var req struct {
		Requests []batchPartJSON `json:"requests"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, errors.New("Der Body ist kein gültiger Batch: erwartet wird {\"requests\":[…]}.")
	}
	if n := len(req.Requests); n < 1 || n > maxBatchParts {
		return nil, fmt.Errorf("Ein Batch hat 1 bis %d Teile, nicht %d.", maxBatchParts, n)
	}
	parts := make([]batchPart, len(req.Requests))
	for i, p := range req.Requests {
		switch p.Method {
		case http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete:
		default:
			return nil, fmt.Errorf("Teil %d: method muss GET, POST, PATCH oder DELETE sein.", i)
		}
		u, err := url.Parse(p.Path)
		if err != nil || u.Scheme != "" || u.Host != "" || u.Fragment != "" || !strings.HasPrefix(u.Path, "/v1/") {
			return nil, fmt.Errorf("Teil %d: path muss ein Pfad der API sein, der mit /v1/ beginnt.", i)
		}
		if op, _, ok := ops.Match(p.Method, u.Path); ok && op.Class == ops.ClassBatch {
			return nil, fmt.Errorf("Teil %d: ein Batch darf keinen Batch enthalten.", i)
		}
		b := []byte(p.Body)
		if isNull(b) {
			b = nil
		}
		parts[i] = batchPart{method: p.Method, u: u, body: b, idemKey: p.IdempotencyKey}
	}
	return parts, nil
}

// batchDemand is the sum of the parts: each part's cost from the ops table,
// 1 for a part that will replay or that has no route; every part an
// enforced extra policy covers is charged to it as a call of its own.
func (s *Server) batchDemand(k *apiKey, now time.Time, parts []batchPart) demand {
	var d demand
	for _, p := range parts {
		op, _, ok := ops.Match(p.method, p.u.Path)
		if !ok {
			d.points++
			continue
		}
		query := p.u.Query().Get
		if p.keyed() && validIdemKey(*p.idemKey) && k.lookup(*p.idemKey, now) != nil {
			d.points++
			s.extraTakes(&d, op, query, p.u.Path, 1)
			continue
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
	return c.badRequest("Ein Batch darf keinen Batch enthalten.")
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
		query: p.u.Query(), body: p.body, header: http.Header{}}
	rt := s.lookup(p.method, p.u)
	if rt == nil {
		return c.notFound()
	}
	if !p.keyed() {
		if rt.op.KeyRequired {
			return c.fail(http.StatusBadRequest, codeIdemKeyRequired, "Geld-Aktionen brauchen einen Idempotency-Key.")
		}
		return s.dispatch(c, p.u)
	}
	key := *p.idemKey
	if !validIdemKey(key) {
		return c.badRequest("Der idempotencyKey muss 1 bis 255 Zeichen lang sein.")
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
