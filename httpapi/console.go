package httpapi

import "github.com/agentd/agentd/console"

// mountConsole serves the web console at / (index.html, app.js, style.css, favicon.svg).
// The pages are public and hold no data: every chat, context and memory they
// show comes from /v1/ with the API's bearer token, so the console is exactly
// as protected as the API. The pattern has no method on purpose: "GET /"
// would conflict with the method-less "/v1/" catch-all in net/http's mux;
// the console handler answers 405 to anything but GET and HEAD itself.
func (s *Server) mountConsole() {
	s.mux.Handle("/", console.Handler())
}
