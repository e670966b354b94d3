package ops

import _ "embed"

// Spec is openapi.json, copied here by go generate so that the sandbox can
// serve it as GET /v1/openapi.json.
//
//go:embed openapi.json
var Spec []byte
