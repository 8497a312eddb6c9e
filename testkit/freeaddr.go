package testkit

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback host:port nothing listens at now, for a
// server a test starts (or leaves unstarted) there later.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
