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
// (VCHAR: no space, no control, nothing beyond ASCII), what an API key
// consists of.
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

// fieldContent reports whether s is visible ASCII with spaces only between
// its characters: what a header carries as it is (RFC 9110 field-content;
// a space at either end of a field value is not part of it). An
// Idempotency-Key consists of it.
func fieldContent(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x21 || c > 0x7e) && c != ' ' {
			return false
		}
	}
	return true
}
