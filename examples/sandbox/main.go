// Command sandbox serves a bodotest server (the in-memory bodo API) on
// loopback, for trying the SDK and the quickstart without an account:
//
//	go run ./examples/sandbox [-addr 127.0.0.1:8080] [-profile small-plan] [-limit-factor 10]
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
	"strings"
	"syscall"
	"time"

	"github.com/bodo-app/bodo-go/bodotest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on (port 0 picks a free one)")
	profile := flag.String("profile", string(bodotest.Documented), "the server profile: "+profileNames())
	factor := flag.Float64("limit-factor", 1, "multiply every quota by this (above 0, up to 1000000)")
	flag.Parse()
	if bodotest.Profile(*profile).Summary() == "" {
		log.Fatalf("-profile %q: there is no such profile; the profiles are %s", *profile, profileNames())
	}
	if !(*factor > 0 && *factor <= 1e6) {
		log.Fatalf("-limit-factor %g: the factor must be above 0 and at most 1000000", *factor)
	}
	if err := run(*addr, bodotest.WithProfile(bodotest.Profile(*profile)), bodotest.WithLimitFactor(*factor)); err != nil {
		log.Fatal(err)
	}
}

func profileNames() string {
	var names []string
	for _, p := range bodotest.Profiles() {
		names = append(names, string(p))
	}
	return strings.Join(names, ", ")
}

func run(addr string, opts ...bodotest.Option) error {
	api := bodotest.NewServer(opts...)
	defer api.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}

	fmt.Printf("bodo sandbox listening on %s\n", url)
	fmt.Printf("test key: %s\n", bodotest.APIKey)
	fmt.Printf("export BODO_BASE_URL=%s BODO_API_KEY=%s\n", url, bodotest.APIKey)

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
