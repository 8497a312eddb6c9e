package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := map[string]bool{
		// Public.
		"93.184.216.34":                      true,
		"1.1.1.1":                            true,
		"192.0.3.1":                          true, // just past TEST-NET-1
		"198.20.0.1":                         true, // just past benchmarking
		"223.255.255.255":                    true,
		"2606:2800:220:1:248:1893:25c8:1946": true,
		"2a00:1450:4001::1":                  true,
		"64:ff9b::5db8:d822":                 true, // NAT64 for 93.184.216.34
		"2002:5db8:d822::1":                  true, // 6to4 for 93.184.216.34
		"::ffff:93.184.216.34":               true, // IPv4-mapped public
		// IPv4 special purpose.
		"0.0.0.0":         false,
		"0.1.2.3":         false,
		"10.1.2.3":        false,
		"100.64.0.1":      false, // carrier-grade NAT
		"100.127.255.255": false,
		"127.0.0.1":       false,
		"127.255.0.1":     false,
		"169.254.169.254": false, // cloud metadata endpoint
		"172.16.0.1":      false,
		"172.31.255.255":  false,
		"192.0.0.8":       false, // IETF protocol assignments
		"192.0.2.1":       false, // documentation
		"192.88.99.1":     false, // 6to4 relay anycast
		"192.168.1.1":     false,
		"198.18.0.1":      false, // benchmarking
		"198.19.255.255":  false,
		"198.51.100.7":    false,
		"203.0.113.9":     false,
		"224.0.0.1":       false, // multicast
		"239.255.255.250": false,
		"240.0.0.1":       false, // reserved
		"255.255.255.255": false, // broadcast
		// IPv6 special purpose and the forms that embed IPv4.
		"::":                     false,
		"::1":                    false,
		"::127.0.0.1":            false, // IPv4-compatible
		"::10.0.0.1":             false,
		"::ffff:127.0.0.1":       false, // IPv4-mapped loopback
		"::ffff:169.254.169.254": false,
		"64:ff9b::7f00:1":        false, // NAT64 for 127.0.0.1
		"64:ff9b::a9fe:a9fe":     false, // NAT64 for the metadata endpoint
		"64:ff9b:1::1":           false, // local-use NAT64
		"2002:7f00:1::1":         false, // 6to4 for 127.0.0.1
		"2002:c0a8:101::1":       false, // 6to4 for 192.168.1.1
		"2001::1":                false, // Teredo
		"2001:2::1":              false, // benchmarking
		"2001:db8::1":            false, // documentation
		"3fff::1":                false, // documentation
		"5f00::1":                false, // SRv6
		"100::1":                 false, // discard-only
		"fc00::1":                false, // unique local
		"fd12:3456::1":           false,
		"fe80::1":                false, // link-local
		"fe80::1%eth0":           false,
		"fec0::1":                false, // site-local (deprecated)
		"ff02::1":                false, // multicast
		"4000::1":                false, // outside global unicast
	}
	for addr, want := range tests {
		t.Run(addr, func(t *testing.T) {
			err := Check(netip.MustParseAddr(addr))
			if got := err == nil; got != want {
				t.Fatalf("Check(%s) = %v, want public %v", addr, err, want)
			}
			if err != nil && !errors.Is(err, ErrNotPublic) {
				t.Fatalf("Check(%s) = %v, not ErrNotPublic", addr, err)
			}
			if Public(netip.MustParseAddr(addr)) != want {
				t.Fatalf("Public(%s) disagrees with Check", addr)
			}
		})
	}
}

// The dialer checks the address it resolved, not the name it was given.
func TestDialerRefusesWhatANameResolvesTo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, target := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		conn, err := Dialer(0).DialContext(context.Background(), "tcp", target)
		if err == nil {
			conn.Close()
			t.Fatalf("dialled %s", target)
		}
		if !errors.Is(err, ErrNotPublic) || !strings.Contains(err.Error(), "loopback") {
			t.Fatalf("dial %s: %v, want a loopback refusal", target, err)
		}
	}
}
