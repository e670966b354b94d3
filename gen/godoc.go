package main

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	enumValuesDoc = regexp.MustCompile(`(?m)^// Defines values for (\w+)\.$`)
	enumValidDoc  = regexp.MustCompile(`(?m)^// Valid indicates whether the value is a known member of the (\w+) enum\.$`)
	// namedDoc is the first line of oapi-codegen's doc comment of a type
	// or field: its name, then the schema's description.
	namedDoc = regexp.MustCompile(`^(\t?)// (\w+) (.*)$`)
	// declared is the line that declares a type or a struct field.
	declared = regexp.MustCompile(`^(?:type (\w+) |\t(\w+) )`)
)

// goDoc turns oapi-codegen's doc comments into Go sentences: "Contact is a
// person or company…" for a type, the description alone for a field
// (wrapped to the width of the source), and a plain sentence on each
// enum's values.
func goDoc(src string) string {
	src = enumValuesDoc.ReplaceAllString(src, "// The values of ${1}.")
	src = enumValidDoc.ReplaceAllString(src, "// Valid reports whether e is one of the values of ${1}.")
	lines := strings.Split(src, "\n")
	out := make([]string, 0, len(lines))
	for i, line := range lines {
		m := namedDoc.FindStringSubmatch(line)
		if m == nil || i > 0 && strings.HasPrefix(strings.TrimLeft(lines[i-1], "\t"), "//") {
			out = append(out, line)
			continue
		}
		j := i + 1
		for j < len(lines) && strings.HasPrefix(strings.TrimLeft(lines[j], "\t"), "//") {
			j++
		}
		var d []string
		if j < len(lines) {
			d = declared.FindStringSubmatch(lines[j])
		}
		indent, name, text := m[1], m[2], m[3]
		switch {
		case d != nil && indent == "" && d[1] == name:
			out = append(out, wrapText(name+" is "+lowerSentence(text), "// "))
		case d != nil && indent == "\t" && d[2] == name:
			out = append(out, wrapText(upperFirst(text), "\t// "))
		default:
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// lowerSentence lowers the first letter of text to go after "X is ",
// unless its first word is an initialism or a name ("ISO", "OpenAPI").
func lowerSentence(text string) string {
	first, size := utf8.DecodeRuneInString(text)
	second, _ := utf8.DecodeRuneInString(text[size:])
	if unicode.IsUpper(first) && !unicode.IsUpper(second) {
		return string(unicode.ToLower(first)) + text[size:]
	}
	return text
}

// wrapText breaks text into comment lines of at most about 80 columns, each
// starting with prefix.
func wrapText(text, prefix string) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > 76 {
			lines = append(lines, prefix+line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, prefix+line), "\n")
}
