package sandbox

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// lang is the language of a problem's title, detail and field messages.
// German is the API's; English is served when Accept-Language prefers it.
type lang int

const (
	german lang = iota
	english
)

// tag is the language's Content-Language value.
func (l lang) tag() string {
	if l == english {
		return "en"
	}
	return "de"
}

// msg is a message in both languages; de and en are fmt formats taking the
// same arguments.
type msg struct{ de, en string }

// in renders m in l.
func (m msg) in(l lang, args ...any) string {
	format := m.de
	if l == english {
		format = m.en
	}
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// languageOf picks the language of the answers to h's request from its
// Accept-Language (RFC 9110, section 12.5.4): English when the weight of
// English ("en", "en-GB", or "*" when no range names English) is above
// German's (likewise), or the same and English is named first; German
// otherwise, also when the field is absent or malformed or accepts neither.
func languageOf(h http.Header) lang {
	vals := h.Values("Accept-Language")
	if len(vals) == 0 {
		return german
	}
	// For each language, the highest weight (in thousandths) a range
	// naming it gives, and where that range stands; likewise for "*".
	type choice struct{ q, pos int }
	var named [2]*choice
	var wild *choice
	// better keeps the higher weight, the earlier range on a tie.
	better := func(cur, c *choice) *choice {
		if cur == nil || c.q > cur.q {
			return c
		}
		return cur
	}
	for pos, elem := range strings.Split(strings.Join(vals, ","), ",") {
		rng, params, _ := strings.Cut(elem, ";")
		q, ok := weight(params)
		if !ok {
			continue
		}
		c := &choice{q: q, pos: pos}
		primary, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(rng)), "-")
		switch primary {
		case "de":
			named[german] = better(named[german], c)
		case "en":
			named[english] = better(named[english], c)
		case "*":
			wild = better(wild, c)
		}
	}
	pick := func(l lang) choice {
		switch {
		case named[l] != nil:
			return *named[l]
		case wild != nil:
			return *wild
		}
		return choice{}
	}
	de, en := pick(german), pick(english)
	if en.q > de.q || en.q > 0 && en.q == de.q && named[english] != nil && (named[german] == nil || en.pos < de.pos) {
		return english
	}
	return german
}

// weight reads the q parameter of one Accept-Language element (1 when
// absent) in thousandths; ok is false when it is malformed.
func weight(params string) (q int, ok bool) {
	q = 1000
	for p := range strings.SplitSeq(params, ";") {
		name, val, found := strings.Cut(strings.TrimSpace(p), "=")
		if !found || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || f < 0 || f > 1 {
			return 0, false
		}
		q = int(f*1000 + 0.5)
	}
	return q, true
}
