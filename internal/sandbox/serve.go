package sandbox

import (
	"net"
	"net/http"
	"time"
)

// ServeLoopback serves h over HTTP on a free port of 127.0.0.1 and returns
// its base URL and a func that stops it.
func ServeLoopback(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}
