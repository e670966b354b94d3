package budget

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestParsePolicyHeader(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		want  []policyHeader
	}{
		{"bodo's example", []string{`"key";q=300;w=60, "org";q=3000;w=60`},
			[]policyHeader{{"key", 300, 60, "requests"}, {"org", 3000, 60, "requests"}}},
		{"draft example with partition key", []string{`"peruser";q=100;w=60;pk=:cHsdsRa894==:`},
			[]policyHeader{{"peruser", 100, 60, "requests"}}},
		{"units", []string{`"key";q=300;w=60;qu="points", "parallel";q=6;qu="concurrent-requests"`},
			[]policyHeader{{"key", 300, 60, "points"}, {"parallel", 6, 0, "concurrent-requests"}}},
		{"two lines are one list", []string{`"key";q=300;w=60`, `"egress";q=10000;w=3600;qu="records"`},
			[]policyHeader{{"key", 300, 60, "requests"}, {"egress", 10000, 3600, "records"}}},
		{"a token name and unknown parameters", []string{`daily;q=1000;w=86400;x-new=?1`},
			[]policyHeader{{"daily", 1000, 86400, "requests"}}},
		{"odd spacing", []string{`"a";q=1;w=2 ,   "b";q=3`}, []policyHeader{{"a", 1, 2, "requests"}, {"b", 3, 0, "requests"}}},
		{"a bad member is skipped", []string{`"a";q=-1, "b";q=1.5, "c";q="9", "d";w=5, ("e");q=1, 7;q=1, "f";q=2;qu=points, "g";q=4`},
			[]policyHeader{{"g", 4, 0, "requests"}}},
		{"a bad window skips the member", []string{`"a";q=1;w=-5, "b";q=1;w=1.5, "c";q=1;w=?1, "d";q=2;w=60`},
			[]policyHeader{{"d", 2, 60, "requests"}}},
		{"no valid list", []string{`"key";q=300;w=60, ,`}, nil},
		{"a field longer than MaxFieldBytes", []string{`"key";q=300;w=60,` + strings.Repeat(" ", MaxFieldBytes)}, nil},
		{"a name or unit longer than MaxNameBytes", []string{`"` + strings.Repeat("n", MaxNameBytes+1) + `";q=1, ` + strings.Repeat("t", MaxNameBytes+1) + `;q=1, "u";q=1;qu="` + strings.Repeat("u", MaxNameBytes+1) + `", "` + strings.Repeat("n", MaxNameBytes) + `";q=2`},
			[]policyHeader{{strings.Repeat("n", MaxNameBytes), 2, 0, "requests"}}},
		{"garbage", []string{`{}}`}, nil},
		{"empty", nil, nil},
	}
	for _, tc := range cases {
		h := http.Header{}
		for _, l := range tc.lines {
			h.Add("RateLimit-Policy", l)
		}
		if got := parsePolicyHeader(h); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseLimitHeader(t *testing.T) {
	cases := []struct {
		name string
		line string
		want []limitHeader
	}{
		{"bodo's example", `"key";r=12;t=41`, []limitHeader{{"key", 12, 41, ""}}},
		{"draft example", `"default";r=50;t=30`, []limitHeader{{"default", 50, 30, ""}}},
		{"no t", `"key";r=0`, []limitHeader{{"key", 0, -1, ""}}},
		{"several", `"key";r=1;t=2, "org";r=3;t=4;pk=:AQ==:`, []limitHeader{{"key", 1, 2, ""}, {"org", 3, 4, "AQ=="}}},
		{"bad members skipped", `"a";r=-1, "b";t=3, "c";r=1;t=-2, "d";r=2.0, "e";r=5;t=1`, []limitHeader{{"e", 5, 1, ""}}},
		{"a pk that is no byte sequence", `"p";r=1;t=2;pk="x", "q";r=1`, []limitHeader{{"q", 1, -1, ""}}},
		{"not a list", `"key";r=`, []limitHeader{}},
		{"no r", `"key";t=3`, []limitHeader{}},
		{"three members", `"key";r=1;t=2, "org";r=3, "write";r=0;t=9`, []limitHeader{{"key", 1, 2, ""}, {"org", 3, -1, ""}, {"write", 0, 9, ""}}},
		{"a parameter name of two letters", `"key";rr=1, "org";r=2`, []limitHeader{{"org", 2, -1, ""}}},
		{"a parameter without a value", `"key";r, "org";r=2`, []limitHeader{{"org", 2, -1, ""}}},
		{"two members without a comma", `"key";r=1 "org";r=2`, []limitHeader{}},
		{"two members joined by another character", `"key";r=1x"org";r=2`, []limitHeader{}},
		{"a string without its opening quote", `ab";r=1`, []limitHeader{}},
		{"a parameter without =", `"key";rx5`, []limitHeader{}},
		{"a member that is no string", `key;r=1, "org";r=2`, []limitHeader{{"key", 1, -1, ""}, {"org", 2, -1, ""}}},
		{"a field longer than MaxFieldBytes", `"key";r=1` + strings.Repeat(" ", MaxFieldBytes), []limitHeader{}},
		{"a name longer than MaxNameBytes", `"` + strings.Repeat("n", MaxNameBytes+1) + `";r=1, "org";r=2`, []limitHeader{{"org", 2, -1, ""}}},
	}
	for _, tc := range cases {
		if got := parseLimitHeader(http.Header{"Ratelimit": {tc.line}}); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// parseLimitHeader is parseLimitInto into a fresh slice.
func parseLimitHeader(h http.Header) []limitHeader {
	var buf [2]limitHeader
	return parseLimitInto(h, buf[:0])
}

// TestParseLimitCommonShapeAllocatesNothing: a RateLimit line of the common
// shape (parseLimitFast) is read into the caller's slice without an
// allocation, as every answer carries one.
func TestParseLimitCommonShapeAllocatesNothing(t *testing.T) {
	h := http.Header{"Ratelimit": {`"key";r=12;t=41, "org";r=300;t=60`}}
	var buf [2]limitHeader
	if n := testing.AllocsPerRun(100, func() { parseLimitInto(h, buf[:0]) }); n != 0 {
		t.Fatalf("%v allocations a parse", n)
	}
}
