package bodo

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrRedirected is an answer that pointed elsewhere (a 3xx other than 304).
// The API never redirects, so the client follows no redirect: the API key,
// the request's body and its Idempotency-Key go nowhere but to the base URL,
// and a write never lands on another server. The *Error's Detail names the
// Location; its Response has the headers.
var ErrRedirected = errors.New("bodo: redirected")

// withoutRedirects returns a copy of hc (a new client when hc is nil) that
// returns a redirect as the answer instead of following it.
func withoutRedirects(hc *http.Client) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	c.CheckRedirect = stopAtRedirect
	return c
}

func stopAtRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// isRedirect reports whether status is a redirect, which the client never
// follows.
func isRedirect(status int) bool {
	return status >= 300 && status < 400 && status != http.StatusNotModified
}

// redirectDetail says what a redirect answer was and that it was not
// followed.
func redirectDetail(resp *http.Response) string {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return fmt.Sprintf("the API never redirects: the %d answer was not followed", resp.StatusCode)
	}
	return fmt.Sprintf("the API never redirects: the %d answer to Location %q was not followed, so neither the API key nor the request went there", resp.StatusCode, loc)
}
