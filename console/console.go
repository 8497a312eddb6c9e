// Package console serves agentd's web console: four static files (a page,
// a script, a style sheet and an icon) embedded in the binary, so someone who just ran
// `agentd serve` can open a browser and watch a chat, see what its model is
// sent, and act on memories. The pages hold no data and need no build step;
// everything they show comes from the HTTP API with the API's own bearer
// token, so the console has no authentication or state of its own.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy allows only the console's own files and API calls to
// the same origin: a transcript carries text from models and web pages, and
// the script only ever sets it as text, but a policy without inline scripts
// is the second fence should that ever slip.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// file is one embedded page, read once.
type file struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the console: GET / is the page, /app.js, /style.css and
// /favicon.svg its script, style and icon. Any other path answers 404, so a mistyped API path is
// never answered with the page. The files are small and revalidated by ETag
// on each load, so a new binary's console shows at once.
func Handler() http.Handler {
	files, err := load()
	if err != nil {
		// The files are embedded at build time; failing here means the
		// binary itself is broken, so every request says so.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "console unavailable: "+err.Error(), http.StatusInternalServerError)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := r.URL.Path
		if name == "/" || name == "/index.html" {
			name = "/index.html"
		}
		f, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ctype)
		h.Set("ETag", f.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
	})
}

// load reads every embedded file into memory with its type and ETag.
func load() (map[string]file, error) {
	out := map[string]file{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		out["/"+path.Base(p)] = file{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console: load embedded files: %w", err)
	}
	return out, nil
}
