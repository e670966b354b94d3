package otelbodo

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bodo-app/bodo-go"
)

// A metric keeps one series for each set of attribute values it sees, so
// the values a server chooses (a refusal's code and policy, the level that
// held a call, the reason of a retry) go on metrics only from a closed
// set: the contract's codes and levels, the client's reasons and the HTTP
// statuses; any other is otherValue. Spans, which keep nothing between
// attempts, carry them as they came, cut to maxSpanValue bytes.
const (
	otherValue   = "_OTHER"
	maxSpanValue = 256
)

// knownValues are the values a metric carries as they are, besides the
// contract's levels (contractLevel).
var knownValues = map[string]bool{
	bodo.CodeRateLimited: true, bodo.CodeOverloaded: true, bodo.CodeQuotaExhausted: true, bodo.CodeBadRequest: true,
	bodo.CodeIdempotencyKeyRequired: true, bodo.CodeUnauthenticated: true, bodo.CodeNotFound: true,
	bodo.CodeMethodNotAllowed: true, bodo.CodeInvalidState: true, bodo.CodeIdempotencyKeyInUse: true,
	bodo.CodePreconditionFailed: true, bodo.CodeValidationFailed: true, bodo.CodeIdempotencyKeyReused: true,
	bodo.CodeInternal: true,
	// the lockout, what else holds a call, and why an attempt is sent again
	"lockout": true, "in-flight": true, "pace": true, "refusal-guard": true, "server-wait": true, "shared-store": true,
	"quota": true, "no-answer": true, "cut-off": true,
}

// contractLevel are the levels of the contract, which the remaining gauge
// names (it reports every other as otherValue) and metrics carry as they
// are.
var contractLevel = map[string]bool{
	"key": true, "write": true, "parallel": true, "principal": true, "org": true,
	"delete": true, "delete-day": true, "egress": true,
}

// metricValue is v as a metric carries it: a known value, an HTTP status
// (a retry's reason without a code), or otherValue.
func metricValue(v string) string {
	if knownValues[v] || contractLevel[v] {
		return v
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 100 && n <= 599 && len(v) == 3 {
		return v
	}
	return otherValue
}

// unitValue is a level's unit as a metric carries it: one the contract
// names, or otherValue.
func unitValue(u string) string {
	switch u {
	case "points", "requests", "records", "concurrent-requests":
		return u
	}
	return otherValue
}

// spanValue is v cut to at most maxSpanValue bytes, at the start of a
// character, with every byte that is no UTF-8 replaced by U+FFFD: OTLP
// carries attributes as protobuf strings, and an exporter drops the whole
// batch that holds one that is not UTF-8.
func spanValue(v string) string {
	if len(v) > maxSpanValue {
		n := maxSpanValue
		for n > maxSpanValue-utf8.UTFMax && !utf8.RuneStart(v[n]) {
			n--
		}
		v = v[:n]
	}
	return strings.ToValidUTF8(v, "\uFFFD")
}

// redactedErr is err as a span records it: a *url.Error of net/http names
// the request's URL, whose query url.full redacts, so it names that instead.
func redactedErr(err error, u *url.URL) error {
	var ue *url.Error
	if u == nil || !errors.As(err, &ue) || ue != err {
		return err
	}
	return &url.Error{Op: ue.Op, URL: redactedURL(u), Err: ue.Err}
}
