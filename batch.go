package bodo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// BatchPart makes one part of a batch: method and path (with its query) as
// the API takes them, and body, when not nil, encoded as the part's JSON
// body. Write parts without an IdempotencyKey get one from Client.Batch.
//
// A method the API does not take in a batch, a path (before its query) of
// no operation, or one with an id the service methods would refuse (a dot
// segment, also percent-encoded, or another path's literal such as
// "count"), is refused here; Client.Batch refuses such a part too, before
// anything is sent.
func BatchPart(method BatchMethod, path string, body any) (BatchRequestItem, error) {
	part := BatchRequestItem{Method: method, Path: path}
	if !method.Valid() {
		return part, badInput("batch", false, fmt.Sprintf("part %q %s: the method is none of GET, POST, PATCH, DELETE", method, path), nil)
	}
	if _, _, err := partOperation(string(method), path); err != nil {
		return part, badInput("batch", false, fmt.Sprintf("part %s %q: %v", method, path, err), err)
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return part, badInput("batch", false, fmt.Sprintf("part %s %s: the body cannot be encoded as JSON", method, path), err)
		}
		part.Body = Value(json.RawMessage(b))
	}
	return part, nil
}

// partOperation is the operation a batch part of method names with path,
// and the path's query. It refuses a path that does not parse, does not
// start with /v1/, has a scheme, host or fragment, has an empty segment, names no operation or a batch, or whose parameters the
// service methods would refuse: a dot segment (also percent-encoded), or a
// literal of another operation's path (DELETE /v1/contacts/count).
func partOperation(method, path string) (*ops.Operation, url.Values, error) {
	u, err := url.Parse(path)
	if err != nil {
		return nil, nil, fmt.Errorf("the path does not parse: %w", err)
	}
	if u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || strings.Contains(path, "#") || !strings.HasPrefix(u.Path, "/v1/") {
		return nil, nil, errors.New("the path is none of the API's: it starts with /v1/ and has no scheme, host or fragment")
	}
	if strings.Contains(u.Path, "//") || strings.HasSuffix(u.Path, "/") {
		return nil, nil, errors.New("the path has an empty segment")
	}
	op, params, ok := ops.Match(method, u.Path)
	if !ok || op == ops.Batch {
		return nil, nil, errors.New("no operation of the API (a path starts with /v1/; a batch holds no batch)")
	}
	for name, v := range params {
		if err := checkPathParam(name, v); err != nil {
			return nil, nil, err
		}
	}
	for _, m := range []BatchMethod{BatchMethodGet, BatchMethodPost, BatchMethodPatch, BatchMethodDelete} {
		if other, otherParams, ok := ops.Match(string(m), u.Path); ok && len(otherParams) < len(params) {
			return nil, nil, fmt.Errorf("%s is the path of %s, not a resource of %s", u.Path, other.ID, op.ID)
		}
	}
	return op, u.Query(), nil
}

// Decode reads the part's answer: a 2xx body into v (v may be nil, and a
// part without a body leaves v as it is), or, for any other status, the
// part's problem as an *Error that errors.Is matches like the error of a
// call of its own (ErrNotFound, ErrValidation, ...).
func (it BatchResultItem) Decode(v any) error {
	body, _ := it.Body.Get()
	if it.Status < 200 || it.Status > 299 {
		resp := &http.Response{
			StatusCode: it.Status,
			Header:     http.Header{"Content-Type": {"application/problem+json"}},
			Body:       io.NopCloser(bytes.NewReader(body)),
		}
		return newError("batch part", resp, time.Now())
	}
	if v == nil || len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &Error{Operation: "batch part", Status: it.Status, Title: "Invalid response", cause: err, Body: body,
			Detail: fmt.Sprintf("the part's %d answer does not decode into %T: %v", it.Status, v, err)}
	}
	return nil
}
