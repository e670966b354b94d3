package bodo

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
)

// newRequest builds the request of one call for the generated services: the
// query, when not empty, appended to u, and body, when not nil, as JSON.
func newRequest(method, u string, query url.Values, body any) (*http.Request, error) {
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// errEmptyPathParam refuses an empty id before it turns /v1/contacts/{id}
// into another operation's path.
func errEmptyPathParam(name string) error {
	return errors.New(name + " is empty")
}
