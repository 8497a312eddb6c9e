package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"

	"github.com/agentd/agentd/netguard"
)

//go:embed fetch_url.md
var fetchURLDescription string

// FetchURLParams are the arguments of fetch_url.
type FetchURLParams struct {
	URL string `json:"url" jsonschema:"description=The absolute http or https URL to fetch,minLength=1,maxLength=2048"`
}

// FetchOptions configure fetch_url. Zero values take the defaults.
type FetchOptions struct {
	// Timeout bounds the whole request, redirects included (default 15s).
	Timeout time.Duration
	// MaxBytes is how much of the body is read (default 512 KiB); the rest
	// is dropped and the text says so.
	MaxBytes int
	// AllowPrivate lets the tool reach loopback, private, link-local and
	// other non-public addresses. Off by default: a model steered by a page
	// must not be able to read the daemon's own API or a cloud metadata
	// endpoint. Tests turn it on to reach httptest servers.
	AllowPrivate bool
	// UserAgent is sent with each request (default "agentd-fetch_url/1").
	UserAgent string
}

const (
	defaultFetchTimeout  = 15 * time.Second
	defaultFetchMaxBytes = 512 << 10
	maxRedirects         = 5
)

// RegisterFetchURL adds the fetch_url tool.
func RegisterFetchURL(r *Registry, opts FetchOptions) error {
	f := newFetcher(opts)
	return Register(r, "fetch_url", fetchURLDescription, f.run)
}

type fetcher struct {
	opts   FetchOptions
	client *http.Client
}

func newFetcher(opts FetchOptions) *fetcher {
	if opts.Timeout <= 0 {
		opts.Timeout = defaultFetchTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = defaultFetchMaxBytes
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "agentd-fetch_url/1"
	}
	dialer := &net.Dialer{Timeout: opts.Timeout}
	if !opts.AllowPrivate {
		// Checked on the resolved address at connect time, so a public name
		// that resolves to a private address (DNS rebinding) and a redirect
		// to one are both refused.
		dialer = netguard.Dialer(opts.Timeout)
	}
	transport := &http.Transport{
		// No proxy from the environment: through a proxy the dialer would
		// check the proxy's address, not the page's.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   opts.Timeout,
		ResponseHeaderTimeout: opts.Timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
	}
	client := &http.Client{
		Transport: transport,
		Timeout:   opts.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to unsupported scheme %q", req.URL.Scheme)
			}
			return nil
		},
	}
	return &fetcher{opts: opts, client: client}
}

func (f *fetcher) run(ctx context.Context, p FetchURLParams) (Result, error) {
	u, err := url.Parse(strings.TrimSpace(p.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Result{Text: fmt.Sprintf("%q is not an absolute http or https URL; give one like https://example.com/page", p.URL), IsError: true}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Result{Text: fmt.Sprintf("cannot request %q: %v", p.URL, err), IsError: true}, nil
	}
	req.Header.Set("User-Agent", f.opts.UserAgent)
	req.Header.Set("Accept", "text/html, text/plain;q=0.9, application/json;q=0.9, application/xml;q=0.8, text/*;q=0.7")

	resp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The caller's deadline or cancellation: let the runner say so.
			return Result{}, fmt.Errorf("fetch %s: %w", u.Redacted(), ctx.Err())
		}
		return Result{Text: fetchErrorText(u, err, f.opts.Timeout), IsError: true, Untrusted: true}, nil
	}
	defer resp.Body.Close()

	final := resp.Request.URL.Redacted()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{Text: fmt.Sprintf("%s answered HTTP %s", final, resp.Status), IsError: true, Untrusted: true}, nil
	}

	// Read one byte past the cap to know whether anything was dropped.
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(f.opts.MaxBytes)+1))
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("fetch %s: reading body: %w", final, ctx.Err())
		}
		return Result{Text: fmt.Sprintf("reading %s failed: %v", final, err), IsError: true, Untrusted: true}, nil
	}
	truncated := len(body) > f.opts.MaxBytes
	if truncated {
		body = body[:f.opts.MaxBytes]
	}

	ctype := resp.Header.Get("Content-Type")
	if ctype == "" {
		ctype = http.DetectContentType(body)
	}
	media, _, _ := mime.ParseMediaType(ctype)
	if !isTextMedia(media) {
		return Result{Text: fmt.Sprintf("%s is %s, not text; fetch_url only reads text documents", final, orUnknown(media)), IsError: true, Untrusted: true}, nil
	}

	text, err := decodeText(body, ctype)
	if err != nil {
		return Result{Text: fmt.Sprintf("cannot decode the text of %s: %v", final, err), IsError: true, Untrusted: true}, nil
	}
	if media == "text/html" || media == "application/xhtml+xml" {
		text = htmlToText(text)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nContent-Type: %s\n\n%s", final, media, text)
	if truncated {
		fmt.Fprintf(&b, "\n\n[… the document continues; only its first %d bytes were read]", f.opts.MaxBytes)
	}
	return Result{Text: b.String(), Untrusted: true}, nil
}

func fetchErrorText(u *url.URL, err error, timeout time.Duration) string {
	var ne net.Error
	switch {
	case errors.Is(err, netguard.ErrNotPublic):
		return fmt.Sprintf("%s points to a private or local network address, which fetch_url may not reach", u.Redacted())
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("%s did not answer within %s", u.Redacted(), timeout)
	}
	return fmt.Sprintf("fetching %s failed: %v", u.Redacted(), err)
}

func isTextMedia(media string) bool {
	switch {
	case strings.HasPrefix(media, "text/"),
		strings.HasSuffix(media, "+json"), strings.HasSuffix(media, "+xml"):
		return true
	}
	switch media {
	case "application/json", "application/xml", "application/javascript",
		"application/x-javascript", "application/yaml", "application/x-yaml",
		"application/toml", "application/x-ndjson", "application/xhtml+xml":
		return true
	}
	return false
}

func orUnknown(s string) string {
	if s == "" {
		return "of unknown type"
	}
	return s
}

// decodeText turns body into UTF-8 using the charset the server declared (or
// that the HTML declares), dropping invalid bytes.
func decodeText(body []byte, ctype string) (string, error) {
	r, err := charset.NewReader(strings.NewReader(string(body)), ctype)
	if err != nil {
		return "", err
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	return strings.ToValidUTF8(string(out), "\uFFFD"), nil
}

// Elements whose text is not page content.
var skipElements = map[string]bool{
	"script": true, "style": true, "noscript": true, "template": true,
	"svg": true, "iframe": true, "canvas": true,
}

// Elements that start a new line of text.
var blockElements = map[string]bool{
	"p": true, "div": true, "br": true, "li": true, "tr": true, "h1": true,
	"h2": true, "h3": true, "h4": true, "h5": true, "h6": true, "section": true,
	"article": true, "header": true, "footer": true, "pre": true, "blockquote": true,
	"table": true, "ul": true, "ol": true, "hr": true, "title": true, "main": true, "nav": true,
}

// htmlToText keeps the readable text of a page: the title, then the body's
// text with one line per block and runs of spaces collapsed. Links and
// markup are dropped; a model reading a page wants its words.
func htmlToText(src string) string {
	z := html.NewTokenizer(strings.NewReader(src))
	var out strings.Builder
	skip := 0
	inTitle := false
	newline := func() {
		s := out.String()
		if len(s) > 0 && !strings.HasSuffix(s, "\n") {
			out.WriteByte('\n')
		}
	}
	for {
		switch z.Next() {
		case html.ErrorToken:
			return tidyLines(out.String())
		case html.StartTagToken:
			name, _ := z.TagName()
			tag := string(name)
			if tag == "title" {
				inTitle = true
				continue
			}
			if skipElements[tag] {
				skip++
			}
			if blockElements[tag] {
				newline()
			}
		case html.SelfClosingTagToken:
			name, _ := z.TagName()
			if blockElements[string(name)] {
				newline()
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			tag := string(name)
			if tag == "title" {
				inTitle = false
				newline()
				continue
			}
			if skipElements[tag] && skip > 0 {
				skip--
			}
			if blockElements[tag] {
				newline()
			}
		case html.TextToken:
			if skip > 0 && !inTitle {
				continue
			}
			text := strings.Join(strings.Fields(string(z.Text())), " ")
			if text == "" {
				continue
			}
			s := out.String()
			if len(s) > 0 && !strings.HasSuffix(s, "\n") && !strings.HasSuffix(s, " ") {
				out.WriteByte(' ')
			}
			out.WriteString(text)
		}
	}
}

// tidyLines trims each line and drops empty ones.
func tidyLines(s string) string {
	lines := strings.Split(s, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" && utf8.ValidString(l) {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}
