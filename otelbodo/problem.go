package otelbodo

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
)

// maxProblem caps how much of a refusal's body is read for its code and
// policy.
const maxProblem = 64 << 10

// problemOf reads the code and policy of a refusal's problem body, and puts
// back what it read so that the client reads the whole body as sent.
func problemOf(resp *http.Response) []attribute.KeyValue {
	if resp.Body == nil {
		return nil
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblem))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	var p struct {
		Code   string `json:"code"`
		Policy string `json:"policy"`
	}
	if json.Unmarshal(head, &p) != nil {
		return nil
	}
	var attrs []attribute.KeyValue
	if p.Code != "" {
		attrs = append(attrs, AttrRefusalCode.String(p.Code))
	}
	if p.Policy != "" {
		attrs = append(attrs, AttrRefusalPolicy.String(p.Policy))
	}
	return attrs
}
