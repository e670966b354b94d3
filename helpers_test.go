package bodo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jarcoal/httpmock"
)

var hostSeq atomic.Int64

// uniqueBaseURL gives every test client a host of its own, so that no two
// tests share the per-key state.
func uniqueBaseURL() string {
	return fmt.Sprintf("https://t%d.bodo.test", hostSeq.Add(1))
}

const testKey = "bodo_test_secretsecretsecret"

var quiet = slog.New(slog.DiscardHandler)

// newTestClient makes a client on a unique host over the given transport.
func newTestClient(t *testing.T, rt http.RoundTripper, opts ...Option) *Client {
	t.Helper()
	base := []Option{
		WithAPIKey(testKey),
		WithBaseURL(uniqueBaseURL()),
		WithHTTPClient(&http.Client{Transport: rt}),
		WithLogger(quiet),
	}
	c, err := NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mockClient makes a client over a fresh httpmock transport.
func mockClient(t *testing.T, opts ...Option) (*Client, *httpmock.MockTransport) {
	t.Helper()
	mt := httpmock.NewMockTransport()
	return newTestClient(t, mt, opts...), mt
}

// problem answers a problem+json body with the given code and members.
func problemResponder(status int, code string, header http.Header, members map[string]any) httpmock.Responder {
	body := map[string]any{
		"type":      "https://developers.bodo-app.com/problems/" + code,
		"title":     "Titel",
		"status":    status,
		"detail":    "Einzelheiten.",
		"instance":  "/v1/contacts",
		"code":      code,
		"requestId": "req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP",
	}
	for k, v := range members {
		body[k] = v
	}
	raw, _ := json.Marshal(body)
	return func(r *http.Request) (*http.Response, error) {
		resp := httpmock.NewBytesResponse(status, raw)
		resp.Header.Set("Content-Type", "application/problem+json")
		resp.Header.Set("Request-Id", "req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP")
		for k, vs := range header {
			resp.Header[k] = vs
		}
		resp.Request = r
		return resp, nil
	}
}

func jsonResponder(status int, v any) httpmock.Responder {
	return func(r *http.Request) (*http.Response, error) {
		resp, err := httpmock.NewJsonResponse(status, v)
		if err == nil {
			resp.Request = r
		}
		return resp, err
	}
}

var sampleContact = map[string]any{
	"id": "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP", "name": "Ada", "email": nil, "phone": nil, "company": nil,
	"tags": []string{}, "createdAt": "2026-11-30T10:00:00Z", "updatedAt": "2026-11-30T10:00:00Z",
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
