// Package netguard keeps outbound requests that a model or an application
// steers (fetch_url, webhooks) on the public internet: it refuses loopback,
// private, link-local, shared, documentation, benchmarking, reserved,
// multicast and broadcast addresses, and IPv6 forms that carry one of those
// inside (IPv4-mapped and -compatible, NAT64, 6to4, Teredo).
//
// The check runs on the address actually dialled (Dialer's Control hook),
// after DNS resolution, so a public name that resolves to a private address
// (DNS rebinding) and a redirect to one are refused too. It is pure apart
// from the dialer; the ranges come from the IANA IPv4 and IPv6
// Special-Purpose Address Registries (RFC 6890 and its updates).
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrNotPublic is what Check and the dialer's refusals wrap.
var ErrNotPublic = errors.New("address is not public")

// special is one special-purpose range and what it is.
type special struct {
	prefix netip.Prefix
	what   string
}

func p(s, what string) special { return special{netip.MustParsePrefix(s), what} }

// blocked4 are the IPv4 ranges that are not globally reachable unicast.
var blocked4 = []special{
	p("0.0.0.0/8", `"this network"`),
	p("10.0.0.0/8", "private"),
	p("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
	p("127.0.0.0/8", "loopback"),
	p("169.254.0.0/16", "link-local"),
	p("172.16.0.0/12", "private"),
	p("192.0.0.0/24", "IETF protocol assignments"),
	p("192.0.2.0/24", "documentation (TEST-NET-1)"),
	p("192.88.99.0/24", "deprecated 6to4 relay anycast"),
	p("192.168.0.0/16", "private"),
	p("198.18.0.0/15", "benchmarking"),
	p("198.51.100.0/24", "documentation (TEST-NET-2)"),
	p("203.0.113.0/24", "documentation (TEST-NET-3)"),
	p("224.0.0.0/4", "multicast"),
	p("240.0.0.0/4", "reserved"), // holds 255.255.255.255, the broadcast address
}

// blocked6 are the IPv6 ranges inside global unicast (2000::/3) that are
// not globally reachable; everything outside 2000::/3 is refused anyway,
// after the forms that embed an IPv4 address are checked by that address.
var blocked6 = []special{
	p("2001::/23", "IETF protocol assignments (Teredo, benchmarking, ORCHID)"),
	p("2001:db8::/32", "documentation"),
	p("3fff::/20", "documentation"),
	p("5f00::/16", "segment routing (SRv6) SIDs"),
}

var (
	mapped4  = netip.MustParsePrefix("::ffff:0:0/96")
	compat4  = netip.MustParsePrefix("::/96")
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
	sixToFor = netip.MustParsePrefix("2002::/16")
	global6  = netip.MustParsePrefix("2000::/3")
)

// Check returns nil for a globally reachable unicast address, and otherwise
// an error wrapping ErrNotPublic that names the range.
func Check(ip netip.Addr) error {
	ip = ip.WithZone("")
	if what := refusal(ip); what != "" {
		return fmt.Errorf("%w: %s is %s", ErrNotPublic, ip, what)
	}
	return nil
}

// Public reports whether ip is a globally reachable unicast address.
func Public(ip netip.Addr) bool { return Check(ip) == nil }

func refusal(ip netip.Addr) string {
	switch {
	case !ip.IsValid():
		return "not an address"
	case ip.Is4():
		return in(ip, blocked4)
	case mapped4.Contains(ip):
		return embedded(ip.Unmap(), "IPv4-mapped")
	case ip == netip.IPv6Unspecified():
		return "unspecified"
	case ip == netip.IPv6Loopback():
		return "loopback"
	case compat4.Contains(ip):
		return "IPv4-compatible (deprecated)"
	case nat64.Contains(ip):
		b := ip.As16()
		return embedded(netip.AddrFrom4([4]byte(b[12:16])), "NAT64")
	case sixToFor.Contains(ip):
		b := ip.As16()
		return embedded(netip.AddrFrom4([4]byte(b[2:6])), "6to4")
	case !global6.Contains(ip):
		switch {
		case ip.IsMulticast():
			return "multicast"
		case ip.IsLinkLocalUnicast():
			return "link-local"
		case ip.IsPrivate():
			return "a unique local address"
		}
		return "outside IPv6 global unicast (2000::/3)"
	}
	return in(ip, blocked6)
}

func in(ip netip.Addr, ranges []special) string {
	for _, s := range ranges {
		if s.prefix.Contains(ip) {
			return s.what + " (" + s.prefix.String() + ")"
		}
	}
	return ""
}

// embedded judges an IPv6 form by the IPv4 address inside it.
func embedded(v4 netip.Addr, form string) string {
	if what := in(v4, blocked4); what != "" {
		return form + " for " + v4.String() + ", " + what
	}
	return ""
}

// Control is a net.Dialer Control hook that refuses to connect to an
// address Check refuses. It sees the resolved address of every attempt.
func Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the address %q", ErrNotPublic, address)
	}
	return Check(ap.Addr())
}

// Dialer returns a dialer that connects only to public addresses. Use it
// as an http.Transport's DialContext with Proxy nil: through a proxy it
// would check the proxy's address, not the destination's.
func Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: Control}
}
