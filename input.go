package bodo

import (
	"fmt"
	"strings"
)

// What can be sent in a header, checked when an option is given so that a
// value net/http would refuse (or a proxy would split) fails at once, before
// anything goes out.

// headerName reports why name is no header field name (RFC 9110 §5.1: a
// token), or "".
func headerName(name string) string {
	if name == "" {
		return "the header name is empty"
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return fmt.Sprintf("the header name %q contains %q, which a header name cannot hold", name, name[i])
		}
	}
	return ""
}

// headerValue reports why v cannot be sent as a header value (a control
// character other than tab: CR, LF or NUL would end or split the header),
// or "".
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return fmt.Sprintf("the value contains the control character %q, which cannot be sent in a header", c)
		}
	}
	return ""
}

// visibleASCII reports whether s is made of visible ASCII characters only
// (VCHAR: no space, no control, nothing beyond ASCII), what an API key and an
// Idempotency-Key consist of.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c < 0x7f && strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
