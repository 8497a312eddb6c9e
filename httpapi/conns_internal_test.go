package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"testing"
	"time"
)

// A connection a newer one is closing (its count freed, its socket maybe
// not closed yet) is answered nothing: its request closes the socket
// itself, so no 429 "busy" reaches a client whose tenant is not over its
// bound (seen under load in TestSlowAndSilentClientsDoNotLockOthersOut).
func TestAConnectionClosingForANewerOneIsAnsweredNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimiter(ln, 1, 1)
	tc := &trackedConn{Conn: server, l: l}
	l.mu.Lock()
	tc.released = true // Close has begun and not yet reached the socket
	l.mu.Unlock()
	r := httptest.NewRequest("GET", "/", nil).WithContext(withConn(context.Background(), tc))
	if got := admitConn(r, "a"); got != closing {
		t.Fatalf("admitConn = %d, want closing", got)
	}
	// A guard against a hang, not a measure: a closed socket reads EOF at once.
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the client reads %v; want EOF, the socket closed before any answer", err)
	}
	// Another connection of the tenant is admitted, one more is not.
	other := &trackedConn{Conn: server, l: l}
	if got := other.admit("a"); got != admitted {
		t.Fatalf("a live connection: %d, want admitted", got)
	}
	if got := (&trackedConn{Conn: server, l: l}).admit("a"); got != tenantFull {
		t.Fatalf("one past http.conns_per_tenant: %d, want tenantFull", got)
	}
}
