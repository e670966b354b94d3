package bodo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
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

// checkPathParam refuses a path parameter that would not be exactly one
// segment of its operation's path: empty, a dot segment ("." or "..", which
// a proxy may resolve), with a slash or a backslash (which some proxies
// take for one), or one of reserved, the literal segments that would make
// the path another operation's (the id "count" next to /v1/contacts/count).
// What is left, url.PathEscape escapes.
func checkPathParam(name, v string, reserved ...string) error {
	switch {
	case v == "":
		return errors.New(name + " is empty")
	case v == "." || v == "..":
		return fmt.Errorf("%s %q is a dot segment, which would name another path", name, v)
	case strings.ContainsAny(v, "/\\"):
		return fmt.Errorf("%s %q contains a slash, so it would not be one path segment", name, v)
	case slices.Contains(reserved, v):
		return fmt.Errorf("%s %q is a path of the API of its own, not a resource", name, v)
	}
	return nil
}
