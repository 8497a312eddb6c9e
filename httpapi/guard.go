package httpapi

import (
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// webGuard keeps the local web out (docs/security.md, "The local web"): a
// request whose Host is not one of the daemon's names is refused (DNS
// rebinding), and so is a state-changing request from another origin
// (CSRF; the standard library's CrossOriginProtection decides, by
// Sec-Fetch-Site or else Origin against Host). Requests without those
// headers — curl, SDKs — pass. Each refusal is answered in the shape of
// the path's surface and logged at most once per refusalLogEvery for the
// host or origin it names, so one page's flood hides no other's line.
type webGuard struct {
	checkHost bool
	hosts     map[string]bool // configured names, lower case
	cop       *http.CrossOriginProtection
	log       zerolog.Logger
	// logs is its own: a page sending many names must not push the
	// tenants' refusal lines into the shared sampler.
	logs refusalLogs
}

const refusalLogEvery = 10 * time.Second

// newWebGuard checks Host when no token guards the API (a rebinding page
// could otherwise read everything) or when the operator listed hosts. With
// tokens and no list it does not: a rebinding page cannot learn a bearer
// token, and a daemon behind a proxy may be reached by any name.
func newWebGuard(allowed []string, tokens bool, log zerolog.Logger) *webGuard {
	g := &webGuard{
		checkHost: !tokens || len(allowed) > 0, hosts: map[string]bool{},
		cop: http.NewCrossOriginProtection(), log: log,
	}
	for _, h := range allowed {
		g.hosts[normalHost(h)] = true
	}
	return g
}

// wrap refuses what the guard refuses and passes the rest to next.
func (g *webGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.checkHost && !g.hostAllowed(r.Host) {
			if host := clip(r.Host, 100); g.logs.allow(host, http.StatusMisdirectedRequest, time.Now()) {
				g.log.Warn().Str("host", host).Str("method", r.Method).Str("path", clip(r.URL.Path, 200)).Str("remote", r.RemoteAddr).
					Msg("refused a request for a host this daemon does not serve (DNS rebinding?); further refusals naming this host are logged at most every 10s")
			}
			w.Header().Set("Connection", "close")
			errorWriterFor(r.URL.Path)(w, http.StatusMisdirectedRequest, "misdirected",
				"this daemon does not serve the host named in the request; use localhost or 127.0.0.1, or add the name to http.allowed_hosts")
			return
		}
		if err := g.cop.Check(r); err != nil {
			if origin := clip(r.Header.Get("Origin"), 100); g.logs.allow(origin, http.StatusForbidden, time.Now()) {
				g.log.Warn().Str("origin", origin).Str("sec_fetch_site", clip(r.Header.Get("Sec-Fetch-Site"), 30)).
					Str("method", r.Method).Str("path", clip(r.URL.Path, 200)).Str("remote", r.RemoteAddr).
					Msg("refused a cross-origin request (another web page?); further refusals from this origin are logged at most every 10s")
			}
			w.Header().Set("Connection", "close")
			errorWriterFor(r.URL.Path)(w, http.StatusForbidden, "cross_origin",
				"cross-origin request refused: requests that change anything must come from the console's own origin, or from a client that sends no Origin (curl, SDKs)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether the Host header names this daemon: a
// loopback name or address, or a configured name.
func (g *webGuard) hostAllowed(hostport string) bool {
	h := normalHost(hostport)
	if h == "localhost" || g.hosts[h] {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// normalHost is the host of a Host header, without port, brackets or a
// trailing dot, in lower case.
func normalHost(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
