package sandbox

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// sfItem is one member of a Structured Fields List (RFC 9651) whose value
// is a String, with Integer or String parameters: the shape of RateLimit
// and RateLimit-Policy.
type sfItem struct {
	name   string
	params map[string]any // int64 or string
	order  []string
}

// parseSFList parses the field lines of a List strictly enough to reject
// what a conforming parser rejects for this shape.
func parseSFList(lines []string) ([]sfItem, error) {
	s := strings.Join(lines, ",")
	p := &sfParser{s: s}
	p.skipSP()
	var out []sfItem
	for !p.eof() {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.skipOWS()
		if p.eof() {
			break
		}
		if p.s[p.i] != ',' {
			return nil, fmt.Errorf("at %d: want ',' in %q", p.i, s)
		}
		p.i++
		p.skipOWS()
		if p.eof() {
			return nil, errors.New("trailing comma")
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) eof() bool { return p.i >= len(p.s) }

func (p *sfParser) skipSP() {
	for !p.eof() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for !p.eof() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *sfParser) item() (sfItem, error) {
	name, err := p.str()
	if err != nil {
		return sfItem{}, err
	}
	it := sfItem{name: name, params: map[string]any{}}
	for !p.eof() && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key := p.key()
		if key == "" {
			return sfItem{}, fmt.Errorf("at %d: bad parameter key in %q", p.i, p.s)
		}
		if _, dup := it.params[key]; !dup {
			it.order = append(it.order, key)
		}
		if p.eof() || p.s[p.i] != '=' {
			it.params[key] = true
			continue
		}
		p.i++
		v, err := p.bare()
		if err != nil {
			return sfItem{}, err
		}
		it.params[key] = v
	}
	return it, nil
}

func (p *sfParser) key() string {
	start := p.i
	for !p.eof() {
		c := p.s[p.i]
		ok := 'a' <= c && c <= 'z' || c == '*' || p.i > start && ('0' <= c && c <= '9' || c == '_' || c == '-' || c == '.')
		if !ok {
			break
		}
		p.i++
	}
	return p.s[start:p.i]
}

func (p *sfParser) bare() (any, error) {
	if p.eof() {
		return nil, errors.New("missing value")
	}
	if p.s[p.i] == '"' {
		return p.str()
	}
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	for !p.eof() && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	digits := p.s[start:p.i]
	if digits == "" || digits == "-" || len(strings.TrimPrefix(digits, "-")) > 15 {
		return nil, fmt.Errorf("at %d: want an integer or a string in %q", start, p.s)
	}
	if !p.eof() && p.s[p.i] == '.' {
		return nil, fmt.Errorf("at %d: decimals are not expected in %q", p.i, p.s)
	}
	return strconv.ParseInt(digits, 10, 64)
}

func (p *sfParser) str() (string, error) {
	if p.eof() || p.s[p.i] != '"' {
		return "", fmt.Errorf("at %d: want a string in %q", p.i, p.s)
	}
	p.i++
	var b strings.Builder
	for !p.eof() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.eof() || p.s[p.i] != '"' && p.s[p.i] != '\\' {
				return "", errors.New("bad escape")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", errors.New("non-printable character in string")
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated string")
}
