package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPI describes the native HTTP API. It is written by hand, paths and
// all, with its component schemas generated from the api package's types
// (go test ./httpapi -run TestOpenAPI -update rewrites them); the tests hold
// its paths against the routes the server registers.
//
//go:embed openapi.json
var openAPI []byte

// serveOpenAPI answers the document itself; like /healthz it needs no token.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}

// routeMux is the server's mux; it remembers every pattern registered on
// it, so the list of routes really served can be read back.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}
