package bodo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestNoRequestLeavesAfterAnAnswerThatAsksToWait, over real loopback HTTP
// with one connection to the host: a call admitted while another's
// OVERLOADED was on its way, its wait only in the body (retryAfterMs),
// waits for the connection that answer came on, and is written after the
// wait is over, not the moment the body has been read.
func TestNoRequestLeavesAfterAnAnswerThatAsksToWait(t *testing.T) {
	const (
		wait      = 300 * time.Millisecond
		refusedID = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0AA"
		afterID   = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0BB"
	)
	contact, _ := json.Marshal(sampleContact)
	var (
		mu       sync.Mutex
		refused  time.Time   // when the OVERLOADED answer was written
		arrivals []time.Time // of the requests after it
	)
	first := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/contacts/" + hostileContactID:
		case "/v1/contacts/" + refusedID:
			close(first)
			<-release // the other call is admitted meanwhile and waits for this connection
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"https://developers.bodo-app.com/problems/OVERLOADED","title":"Überlastet","status":503,"code":"OVERLOADED","requestId":"req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","retryAfterMs":300}`))
			mu.Lock()
			refused = time.Now()
			mu.Unlock()
			return
		default:
			mu.Lock()
			arrivals = append(arrivals, time.Now())
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(contact)
	}))
	defer srv.Close()
	c, err := NewClient(WithAPIKey(testKey), WithBaseURL(srv.URL), WithLogger(quiet), WithMaxRetries(0),
		WithHTTPClient(&http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Contacts.Get(ctx, hostileContactID); err != nil { // slow start ends with an answer
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() {
		_, err := c.Contacts.Get(ctx, refusedID)
		done <- err
	}()
	<-first
	go func() {
		_, err := c.Contacts.Get(ctx, afterID)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // admitted, and queued for the one connection
	close(release)
	<-done
	if err := <-done; err != nil {
		t.Fatalf("the call after the refusal: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 1 {
		t.Fatalf("%d requests after the refusal, want 1", len(arrivals))
	}
	if d := arrivals[0].Sub(refused); d < wait-20*time.Millisecond {
		t.Errorf("the call admitted before the refusal was read arrived %v after it, want the %v it asked", d, wait)
	}
}

// TestAWaitSatOutIsLookedAtAgain (rule 5), over real loopback HTTP with two
// connections to the host: a call admitted while two OVERLOADED answers
// were on their way gets the connection of the first (200 ms) and sits out
// its wait; the second (400 ms) is read meanwhile, and the call is written
// after that one is over too.
func TestAWaitSatOutIsLookedAtAgain(t *testing.T) {
	const (
		firstID  = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0AA"
		secondID = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0CC"
		afterID  = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0BB"
		second   = 400 * time.Millisecond
	)
	contact, _ := json.Marshal(sampleContact)
	var (
		mu       sync.Mutex
		refused  time.Time   // when the second OVERLOADED answer was written
		arrivals []time.Time // of the requests after it
	)
	arrived := make(chan struct{}, 2)
	releaseFirst, releaseSecond := make(chan struct{}), make(chan struct{})
	overloaded := func(w http.ResponseWriter, ms int) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, `{"type":"https://developers.bodo-app.com/problems/OVERLOADED","title":"Überlastet","status":503,"code":"OVERLOADED","requestId":"req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","retryAfterMs":%d}`, ms)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/contacts/" + hostileContactID:
		case "/v1/contacts/" + firstID:
			arrived <- struct{}{}
			<-releaseFirst
			overloaded(w, 200)
			return
		case "/v1/contacts/" + secondID:
			arrived <- struct{}{}
			<-releaseSecond
			overloaded(w, int(second/time.Millisecond))
			mu.Lock()
			refused = time.Now()
			mu.Unlock()
			return
		default:
			mu.Lock()
			arrivals = append(arrivals, time.Now())
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(contact)
	}))
	defer srv.Close()
	c, err := NewClient(WithAPIKey(testKey), WithBaseURL(srv.URL), WithLogger(quiet), WithMaxRetries(0),
		WithHTTPClient(&http.Client{Transport: &http.Transport{MaxConnsPerHost: 2}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Contacts.Get(ctx, hostileContactID); err != nil { // slow start ends with an answer
		t.Fatal(err)
	}
	done := make(chan error, 3)
	for _, id := range []string{firstID, secondID} {
		go func() {
			_, err := c.Contacts.Get(ctx, id)
			done <- err
		}()
		<-arrived
	}
	go func() {
		_, err := c.Contacts.Get(ctx, afterID)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // admitted, and queued for a connection
	close(releaseFirst)
	time.Sleep(50 * time.Millisecond) // it sits out the first wait on the first's connection
	close(releaseSecond)
	for range 3 {
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 1 {
		t.Fatalf("%d requests after the refusals, want 1", len(arrivals))
	}
	if d := arrivals[0].Sub(refused); d < second-20*time.Millisecond {
		t.Errorf("the call admitted before the refusals were read arrived %v after the second, want the %v it asked", d, second)
	}
}
