// Command sandbox serves the in-memory bodo API on loopback, for trying the
// SDK and the quickstart without an account:
//
//	go run ./examples/sandbox [-addr 127.0.0.1:8080]
//
// It prints the URL and a test key and stops on SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on (port 0 picks a free one)")
	flag.Parse()
	if err := run(*addr); err != nil {
		log.Fatal(err)
	}
}

func run(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	srv := &http.Server{Handler: sandbox.New(), ReadHeaderTimeout: 10 * time.Second}

	fmt.Printf("bodo sandbox listening on %s\n", url)
	fmt.Printf("test key: %s\n", sandbox.TestKey)
	fmt.Printf("export BODO_BASE_URL=%s BODO_API_KEY=%s\n", url, sandbox.TestKey)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Println("bodo sandbox stopped")
	return nil
}
