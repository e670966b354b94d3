package bodo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// BatchPart makes one part of a batch: method and path (with its query) as
// the API takes them, and body, when not nil, encoded as the part's JSON
// body. Write parts without an IdempotencyKey get one from Client.Batch.
func BatchPart(method BatchMethod, path string, body any) (BatchRequestItem, error) {
	part := BatchRequestItem{Method: method, Path: path}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return part, badInput("batch", false, fmt.Sprintf("part %s %s: the body cannot be encoded as JSON", method, path), err)
		}
		part.Body = Value(json.RawMessage(b))
	}
	return part, nil
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
