package otelbodo

import (
	"net/url"
	"strings"
)

// redactedURL is u for url.full with every query value replaced by
// REDACTED and the keys kept, as the conventions redact a sensitive value:
// a search (q) may hold a person's name or email, a cursor is opaque. User
// info, which a client's base URL never has (NewClient refuses it), would
// show as REDACTED:REDACTED.
func redactedURL(u *url.URL) string {
	if u.RawQuery == "" && u.User == nil {
		return u.String()
	}
	r := *u
	if u.User != nil {
		r.User = url.UserPassword("REDACTED", "REDACTED")
	}
	if u.RawQuery == "" {
		return r.String()
	}
	parts := strings.Split(u.RawQuery, "&")
	for i, p := range parts {
		if k, _, ok := strings.Cut(p, "="); ok {
			parts[i] = k + "=REDACTED"
		}
	}
	r.RawQuery = strings.Join(parts, "&")
	return r.String()
}
