package bodo

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http/httptrace"
	"sync/atomic"
)

// sendTrace tells, for one attempt, whether the request could have reached
// the server: whether the transport began (GetConn, which net/http's
// Transport reports for every request) and whether it wrote the request's
// headers (WroteHeaders). Before its headers are complete no server can act
// on a request, so a failure before then is a request not sent.
type sendTrace struct {
	began, wrote atomic.Bool
}

// with returns ctx with hooks that record what the transport did. Hooks of
// a trace already in ctx are still called.
func (st *sendTrace) with(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn:      func(string) { st.began.Store(true) },
		WroteHeaders: func() { st.wrote.Store(true) },
	})
}

// unsent reports whether the transport began the attempt and failed before
// it wrote the headers. A transport that reports nothing (a RoundTripper of
// its own) leaves it unknown, so false.
func (st *sendTrace) unsent() bool { return st.began.Load() && !st.wrote.Load() }

// notSentError is the error of an attempt that failed before its request
// was written: the server cannot have seen it.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// badCertificate reports whether err is the server's certificate failing
// verification: the TLS handshake ended before anything was sent, and
// trying again will not change the certificate.
func badCertificate(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// certificateRefused is the error of an attempt whose TLS handshake refused
// the server's certificate: not sent, and not retried, since no retry
// changes the certificate.
func certificateRefused(cl *call, err error) *Error {
	e := noAnswer(cl, err)
	e.Title = "Certificate refused"
	e.Detail = "not sent: the TLS handshake refused the server's certificate: " + err.Error()
	return e
}
